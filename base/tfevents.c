/* TensorBoard event files: CRC-32C, TFRecord framing, the Event protobuf, the queued writer. */
#include "base/tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"

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
 * 5 fixed32) ---- */
static size_t put_varint(uint8_t *out, uint64_t v)
{
    size_t i = 0;
    do {
        out[i++] = (uint8_t)((v & 0x7fu) | (v >= 0x80u ? 0x80u : 0u));
        v >>= 7;
    } while (v);
    return i;
}

static size_t varint_len(uint64_t v)
{
    size_t i = 1;
    while (v >= 0x80u) v >>= 7, i++;
    return i;
}

static size_t put_double(uint8_t *out, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    out[0] = (uint8_t)(field << 3 | 1);
    put_le(out + 1, bits, 8);
    return 9;
}

/* Event (tensorflow/core/util/event.proto): wall_time = 1 (double), step = 2 (int64),
 * file_version = 3 (string), summary = 5 (Summary). Summary: value = 1 (repeated Value).
 * Summary.Value: tag = 1 (string), simple_value = 2 (float). */
size_t mc_tfevent_scalar(uint8_t *out, size_t cap, double wall_time, int64_t step, const char *tag,
                         float value)
{
    const size_t tl = strlen(tag);
    if (tl > 1u << 20 || cap < 48 + tl) return 0;
    size_t n = 0;
    /* the Value's length, then the Summary's around it: both known before any byte is written,
     * so the nested messages are written front to back */
    const size_t value_len = 1 + varint_len(tl) + tl + 5;
    const size_t summary_len = 1 + varint_len(value_len) + value_len;
    n += put_double(out + n, 1, wall_time);
    if (step != 0) { /* proto3 leaves a zero out, as SerializeToString does */
        out[n++] = 2 << 3 | 0;
        n += put_varint(out + n, (uint64_t)step);
    }
    out[n++] = 5 << 3 | 2;
    n += put_varint(out + n, summary_len);
    out[n++] = 1 << 3 | 2;
    n += put_varint(out + n, value_len);
    out[n++] = 1 << 3 | 2;
    n += put_varint(out + n, tl);
    memcpy(out + n, tag, tl);
    n += tl;
    out[n++] = 2 << 3 | 5;
    uint32_t bits;
    memcpy(&bits, &value, 4);
    put_le(out + n, bits, 4);
    return n + 4;
}

static size_t file_version_event(uint8_t *out, double wall_time)
{
    static const char version[] = "brain.Event:2";
    size_t n = put_double(out, 1, wall_time);
    out[n++] = 3 << 3 | 2;
    out[n++] = (uint8_t)(sizeof(version) - 1);
    memcpy(out + n, version, sizeof(version) - 1);
    return n + sizeof(version) - 1;
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mkdir -p */
static int make_dirs(const char *dir, char *err, size_t n)
{
    char p[4096];
    if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
        return mc_path_errf(err, n, dir, "path too long");
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0') continue;
        const char c = *s;
        *s = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return mc_path_errf(err, n, p, "cannot create the directory: %s", strerror(errno));
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
            return mc_path_errf(err, n, p, "not a directory");
        if (c == '\0') return 0;
        *s = c;
    }
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
    if (make_dirs(dir, err, n) != 0) return -1;
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    const double now = wall_now();
    if (snprintf(w->path, sizeof(w->path), "%s/events.out.tfevents.%010lld.%s.%ld.0", dir,
                 (long long)now, host, (long)getpid()) >= (int)sizeof(w->path))
        return mc_path_errf(err, n, dir, "path too long");
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (w->fd < 0) return mc_path_errf(err, n, w->path, "cannot create: %s", strerror(errno));
    uint8_t ev[64];
    size_t len = file_version_event(ev, now);
    /* EventFileWriter writes and flushes the version event at once: an empty run still leaves a
     * file TensorBoard recognises */
    if (queue(w, ev, len) != 0) return mc_errf(err, n, "out of host memory");
    return mc_tfevents_flush(w, err, n);
}

int mc_tfevents_scalar(mc_tfevents_t *w, const char *tag, double value, int64_t step, char *err,
                       size_t n)
{
    const size_t cap = 48 + strlen(tag);
    uint8_t small[256], *ev = cap <= sizeof(small) ? small : malloc(cap);
    if (!ev) return mc_errf(err, n, "out of host memory");
    size_t len = mc_tfevent_scalar(ev, cap, wall_now(), step, tag, (float)value);
    int rc = len && queue(w, ev, len) == 0 ? 0 : mc_errf(err, n, "out of host memory");
    if (ev != small) free(ev);
    if (rc != 0) return rc;
    if (w->pending >= w->max_queue || mc_now_s() - w->last_flush >= FLUSH_SECS)
        return mc_tfevents_flush(w, err, n);
    return 0;
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
