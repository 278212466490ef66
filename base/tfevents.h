/* TensorBoard event files (--tensorboard-dir): what torch.utils.tensorboard.SummaryWriter writes
 * for add_scalar and add_text, readable by TensorBoard's own reader.
 *
 * The file is a sequence of TFRecords: uint64 length (little-endian), uint32 masked CRC-32C of
 * those 8 bytes, the data, uint32 masked CRC-32C of the data. Each record's data is a serialized
 * tensorflow.Event protobuf; the first is {wall_time, file_version: "brain.Event:2"}, each scalar
 * {wall_time, step, summary {value {tag, simple_value}}} as torch's add_scalar (float32 value),
 * each text {wall_time, step, summary {value {tag, tensor, metadata}}} as torch's add_text.
 *
 * The protobuf encoding is written here (varints, fixed64/fixed32, length-delimited fields) rather
 * than taken from a library: the few messages and fields these events use need about a hundred
 * lines, while protobuf-c from Debian would add a code generator, the .proto files and a run-time
 * library to the build for the same bytes. The unit test holds the bytes TensorBoard's own
 * protobuf classes serialize. */
#ifndef MC_BASE_TFEVENTS_H
#define MC_BASE_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of data, continuing from crc (0 to
 * start), and TFRecord's mask of it: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t mc_crc32c(uint32_t crc, const void *data, size_t n);
uint32_t mc_crc32c_masked(uint32_t crc);

/* The TFRecord framing of data[0..n): writes n + 16 bytes into out. */
void mc_tfrecord_frame(const void *data, size_t n, uint8_t *out);

/* A serialized Event holding one scalar summary (torch's add_scalar: a float32 simple_value);
 * returns its length (at most 64 + strlen(tag)) written into out of size cap, 0 when it does not
 * fit. */
size_t mc_tfevent_scalar(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                         float value);
/* The same for torch's add_text: a string tensor of the text plugin under "<tag>/text_summary"
 * (at most 128 + strlen(tag) + strlen(text) bytes). */
size_t mc_tfevent_text(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                       const char *text);

/* The writer. Records are queued in memory and written, whole, with one write(2) when
 * max_queue events are pending (SummaryWriter's max_queue), when flush_secs have passed since
 * the last write (SummaryWriter's default 120 s) and on mc_tfevents_flush, so a killed process
 * leaves a file of whole records up to its last flush. */
typedef struct {
    int fd;
    char path[4352];
    int max_queue, pending;
    double last_flush; /* monotonic seconds */
    uint8_t *buf;
    size_t len, cap;
} mc_tfevents_t;

/* Creates dir (and its parents) when missing and the file
 * <dir>/events.out.tfevents.<10-digit unix time>.<hostname>.<pid>.0 (TensorBoard's name), and
 * writes the file_version event. Returns 0, or -1 with one line in err. */
int mc_tfevents_open(mc_tfevents_t *w, const char *dir, int max_queue, char *err, size_t n);
/* add_scalar(tag, value, step) at the current wall time. Returns 0, or -1 with one line in err
 * when a write to the file failed. */
int mc_tfevents_scalar(mc_tfevents_t *w, const char *tag, double value, int64_t step, char *err,
                       size_t n);
/* add_text(tag, text, step), as mc_tfevents_scalar. */
int mc_tfevents_text(mc_tfevents_t *w, const char *tag, const char *text, int64_t step, char *err,
                     size_t n);
int mc_tfevents_flush(mc_tfevents_t *w, char *err, size_t n);
/* Flushes and closes; returns as mc_tfevents_flush. */
int mc_tfevents_close(mc_tfevents_t *w, char *err, size_t n);

#endif
