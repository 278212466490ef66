/* TensorBoard event files: CRC-32C, TFRecord framing, the Event protobuf, the queued writer. */
#include "base/tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/fs.h"

/* SummaryWriter's flush_secs default: pending events reach the file at least this often. */
#define FLUSH_SECS 120.0

static uint32_t crc_table[256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[i] = c;
    }
}

uint32_t mc_crc32c(uint32_t crc, const void *data, size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

uint32_t mc_crc32c_masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) out[i] = (uint8_t)(v >> (8 * i));
}

void mc_tfrecord_frame(const void *data, size_t n, uint8_t *out)
{
    put_le(out, (uint64_t)n, 8);
    put_le(out + 8, mc_crc32c_masked(mc_crc32c(0, out, 8)), 4);
    memcpy(out + 12, data, n);
    put_le(out + 12 + n, mc_crc32c_masked(mc_crc32c(0, data, n)), 4);
}

/* ---- protobuf wire format: key = field << 3 | wire type (0 varint, 1 fixed64, 2 bytes,
 * 5 fixed32). A message is written into a bounded buffer; a nested one is written first into
 * its own buffer, then copied in as a bytes field, so every length is known when it is written.
 * ---- */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int overflow;
} pb_t;

static void pb_raw(pb_t *b, const void *data, size_t len)
{
    if (b->overflow || len > b->cap - b->n) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
}

static void pb_varint(pb_t *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t i = 0;
    do {
        tmp[i++] = (uint8_t)((v & 0x7fu) | (v >= 0x80u ? 0x80u : 0u));
        v >>= 7;
    } while (v);
    pb_raw(b, tmp, i);
}

static void pb_key(pb_t *b, int field, int wire) { pb_varint(b, (uint64_t)(field << 3 | wire)); }

/* A fixed-width field: wire type 1 (8 bytes, double) or 5 (4 bytes, float), little-endian. */
static void pb_fixed(pb_t *b, int field, uint64_t bits, int bytes)
{
    uint8_t le[8];
    put_le(le, bits, bytes);
    pb_key(b, field, bytes == 8 ? 1 : 5);
    pb_raw(b, le, (size_t)bytes);
}

static void pb_double(pb_t *b, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    pb_fixed(b, field, bits, 8);
}

static void pb_float(pb_t *b, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, 4);
    pb_fixed(b, field, bits, 4);
}

static void pb_bytes(pb_t *b, int field, const void *data, size_t len)
{
    pb_key(b, field, 2);
    pb_varint(b, len);
    pb_raw(b, data, len);
}

/* Event (tensorflow/core/util/event.proto): wall_time = 1 (double), step = 2 (int64),
 * file_version = 3 (string), summary = 5 (Summary). Summary: value = 1 (repeated Value).
 * Returns the Event's length, 0 when it does not fit. */
static size_t event(uint8_t *out, size_t cap, double wall_time, int64_t step, const uint8_t *value,
                    size_t value_len)
{
    uint8_t *summary = malloc(value_len + 16);
    if (!summary) return 0;
    pb_t s = {summary, 0, value_len + 16, 0}, e = {out, 0, cap, 0};
    pb_bytes(&s, 1, value, value_len);
    pb_double(&e, 1, wall_time);
    if (step != 0) { /* proto3 leaves a zero out, as SerializeToString does */
        pb_key(&e, 2, 0);
        pb_varint(&e, (uint64_t)step);
    }
    pb_bytes(&e, 5, summary, s.n);
    free(summary);
    return e.overflow || s.overflow ? 0 : e.n;
}

/* Summary.Value: tag = 1 (string), simple_value = 2 (float), as torch's add_scalar writes it. */
size_t mc_tfevent_scalar(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                         float value)
{
    const size_t tl = strlen(tag);
    uint8_t *v = malloc(tl + 32);
    if (!v) return 0;
    pb_t b = {v, 0, tl + 32, 0};
    pb_bytes(&b, 1, tag, tl);
    pb_float(&b, 2, value);
    size_t n = b.overflow ? 0 : event(out, cap, wall_time, step, v, b.n);
    free(v);
    return n;
}

/* torch's add_text: Summary.Value {tag = 1: "<tag>/text_summary", tensor = 8: TensorProto
 * {dtype = 1: DT_STRING (7), tensor_shape = 2: {dim = 2: {size = 1: 1}}, string_val = 8: text},
 * metadata = 9: SummaryMetadata {plugin_data = 1: {plugin_name = 1: "text"}}} (the text
 * plugin's content, TextPluginData(version=0), serializes to nothing). */
size_t mc_tfevent_text(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                       const char *text)
{
    static const uint8_t shape[] = {0x12, 0x02, 0x08, 0x01}; /* dim { size: 1 } */
    static const uint8_t metadata[] = {0x0a, 0x06, 0x0a, 0x04, 't', 'e', 'x', 't'};
    static const char suffix[] = "/text_summary";
    const size_t tl = strlen(tag), xl = strlen(text), room = tl + xl + 64;
    uint8_t *buf = malloc(2 * room);
    if (!buf) return 0;
    pb_t t = {buf, 0, room, 0}, v = {buf + room, 0, room, 0};
    pb_key(&t, 1, 0);
    pb_varint(&t, 7);
    pb_bytes(&t, 2, shape, sizeof(shape));
    pb_bytes(&t, 8, text, xl);
    pb_key(&v, 1, 2);
    pb_varint(&v, tl + sizeof(suffix) - 1);
    pb_raw(&v, tag, tl);
    pb_raw(&v, suffix, sizeof(suffix) - 1);
    pb_bytes(&v, 8, t.p, t.n);
    pb_bytes(&v, 9, metadata, sizeof(metadata));
    size_t n = t.overflow || v.overflow ? 0 : event(out, cap, wall_time, step, v.p, v.n);
    free(buf);
    return n;
}

static size_t file_version_event(uint8_t *out, size_t cap, double wall_time)
{
    static const char version[] = "brain.Event:2";
    pb_t e = {out, 0, cap, 0};
    pb_double(&e, 1, wall_time);
    pb_bytes(&e, 3, version, sizeof(version) - 1);
    return e.overflow ? 0 : e.n;
}

static int queue(mc_tfevents_t *w, const uint8_t *data, size_t len)
{
    if (w->len + len + 16 > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + len + 16) cap *= 2;
        uint8_t *b = realloc(w->buf, cap);
        if (!b) return -1;
        w->buf = b;
        w->cap = cap;
    }
    mc_tfrecord_frame(data, len, w->buf + w->len);
    w->len += len + 16;
    w->pending++;
    return 0;
}

int mc_tfevents_flush(mc_tfevents_t *w, char *err, size_t n)
{
    size_t off = 0;
    while (off < w->len) {
        ssize_t k = write(w->fd, w->buf + off, w->len - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return mc_path_errf(err, n, w->path, "cannot write: %s", strerror(errno));
        off += (size_t)k;
    }
    w->len = 0;
    w->pending = 0;
    w->last_flush = mc_now_s();
    return 0;
}

int mc_tfevents_open(mc_tfevents_t *w, const char *dir, int max_queue, char *err, size_t n)
{
    memset(w, 0, sizeof(*w));
    w->fd = -1;
    w->max_queue = max_queue > 0 ? max_queue : 1;
    if (mc_mkdirs(dir, err, n) != 0) return -1;
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    const double now = mc_wall_s();
    if (snprintf(w->path, sizeof(w->path), "%s/events.out.tfevents.%010lld.%s.%ld.0", dir,
                 (long long)now, host, (long)getpid()) >= (int)sizeof(w->path))
        return mc_path_errf(err, n, dir, "path too long");
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (w->fd < 0) return mc_path_errf(err, n, w->path, "cannot create: %s", strerror(errno));
    uint8_t ev[64];
    size_t len = file_version_event(ev, sizeof(ev), now);
    /* EventFileWriter writes and flushes the version event at once: an empty run still leaves a
     * file TensorBoard recognises */
    if (queue(w, ev, len) != 0) return mc_errf(err, n, "out of host memory");
    return mc_tfevents_flush(w, err, n);
}

/* Queues one event (len bytes at ev, 0 = it could not be encoded) and flushes when max_queue
 * events wait or FLUSH_SECS have passed. */
static int add_event(mc_tfevents_t *w, const uint8_t *ev, size_t len, char *err, size_t n)
{
    if (!len || queue(w, ev, len) != 0) return mc_errf(err, n, "out of host memory");
    if (w->pending >= w->max_queue || mc_now_s() - w->last_flush >= FLUSH_SECS)
        return mc_tfevents_flush(w, err, n);
    return 0;
}

int mc_tfevents_scalar(mc_tfevents_t *w, const char *tag, double value, int64_t step, char *err,
                       size_t n)
{
    const size_t cap = 64 + strlen(tag);
    uint8_t *ev = malloc(cap);
    if (!ev) return mc_errf(err, n, "out of host memory");
    int rc =
        add_event(w, ev, mc_tfevent_scalar(ev, cap, mc_wall_s(), step, tag, (float)value), err, n);
    free(ev);
    return rc;
}

int mc_tfevents_text(mc_tfevents_t *w, const char *tag, const char *text, int64_t step, char *err,
                     size_t n)
{
    const size_t cap = 128 + strlen(tag) + strlen(text);
    uint8_t *ev = malloc(cap);
    if (!ev) return mc_errf(err, n, "out of host memory");
    int rc = add_event(w, ev, mc_tfevent_text(ev, cap, mc_wall_s(), step, tag, text), err, n);
    free(ev);
    return rc;
}

int mc_tfevents_close(mc_tfevents_t *w, char *err, size_t n)
{
    int rc = w->fd >= 0 ? mc_tfevents_flush(w, err, n) : 0;
    if (w->fd >= 0 && close(w->fd) != 0 && rc == 0)
        rc = mc_path_errf(err, n, w->path, "cannot close: %s", strerror(errno));
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
    w->fd = -1;
    return rc;
}
