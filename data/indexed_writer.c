/* Writer of Megatron's indexed dataset (IndexedDatasetBuilder + _IndexWriter, MEGATRON.md
 * section 1). For the same documents its .bin and .idx are byte-identical to Megatron's.
 *
 * Tokens stream through a buffer into <prefix>.bin.tmp; only the per-sequence lengths and the
 * document indices stay in memory (as in Megatron). finish writes <prefix>.idx.tmp and renames
 * both into place, so a crash or an error never leaves a half-written dataset under the final
 * names. Unlike Megatron (numpy casts silently wrap), a token that does not fit the dtype is an
 * error. */
#include "base/error.h"
#include "data/indexed.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OUT_BUF_SIZE (1 << 20)
static const uint8_t MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

/* A file written through a buffer; path is used in error messages. */
typedef struct {
    int fd;
    const char *path;
    uint8_t *buf;
    size_t used;
} out_t;

struct mc_indexed_writer {
    char *prefix;
    char *bin_path, *idx_path, *bin_tmp, *idx_tmp;
    int dtype, itemsize;
    out_t bin;
    int32_t *lengths; /* sequence_lengths */
    int64_t n_seq, cap_seq;
    int64_t *docs; /* document_indices, starting with 0 */
    int64_t n_doc, cap_doc;
    bool failed; /* an I/O error left the .bin inconsistent with the index */
};


static char *concat(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s%s", a, b);
    return p;
}

/* ---- buffered output ---- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int out_open(out_t *o, const char *path, char *err, size_t n)
{
    o->path = path;
    o->used = 0;
    o->buf = malloc(OUT_BUF_SIZE);
    o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (o->fd < 0 || !o->buf) {
        int e = o->buf ? errno : ENOMEM;
        free(o->buf);
        o->buf = NULL;
        if (o->fd >= 0) close(o->fd);
        o->fd = -1;
        return mc_path_errf(err, n, path, "cannot create: %s", strerror(e));
    }
    return 0;
}

static int out_flush(out_t *o, char *err, size_t n)
{
    if (write_all(o->fd, o->buf, o->used))
        return mc_path_errf(err, n, o->path, "write: %s", strerror(errno));
    o->used = 0;
    return 0;
}

static int out_write(out_t *o, const void *data, size_t size, char *err, size_t n)
{
    if (size == 0) return 0; /* data may be NULL then, which memcpy does not allow */
    if (o->used + size > OUT_BUF_SIZE) {
        if (out_flush(o, err, n)) return -1;
        if (size > OUT_BUF_SIZE) { /* large blocks (add_index) bypass the buffer */
            if (write_all(o->fd, data, size))
                return mc_path_errf(err, n, o->path, "write: %s", strerror(errno));
            return 0;
        }
    }
    memcpy(o->buf + o->used, data, size);
    o->used += size;
    return 0;
}

/* Flushes, syncs (so the rename never publishes a file whose data is still only in the page
 * cache) and closes. */
static int out_close(out_t *o, char *err, size_t n)
{
    int rc = out_flush(o, err, n);
    if (rc == 0 && fsync(o->fd) != 0)
        rc = mc_path_errf(err, n, o->path, "fsync: %s", strerror(errno));
    if (close(o->fd) != 0 && rc == 0)
        rc = mc_path_errf(err, n, o->path, "close: %s", strerror(errno));
    o->fd = -1;
    free(o->buf);
    o->buf = NULL;
    return rc;
}

static void out_discard(out_t *o)
{
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
    free(o->buf);
    o->buf = NULL;
}

/* ---- writer ---- */

static void writer_free(mc_indexed_writer_t *w)
{
    out_discard(&w->bin);
    free(w->lengths);
    free(w->docs);
    free(w->prefix);
    free(w->bin_path);
    free(w->idx_path);
    free(w->bin_tmp);
    free(w->idx_tmp);
    free(w);
}

void mc_indexed_writer_abort(mc_indexed_writer_t *w)
{
    if (!w) return;
    out_discard(&w->bin);
    unlink(w->bin_tmp);
    unlink(w->idx_tmp);
    writer_free(w);
}

mc_indexed_writer_t *mc_indexed_writer_open(const char *prefix, int dtype, char *err, size_t n)
{
    if (mc_indexed_dtype_size(dtype) == 0 || dtype == MC_DTYPE_FLOAT32 ||
        dtype == MC_DTYPE_FLOAT64) {
        mc_path_errf(err, n, prefix, "dtype %d (%s) is not a token dtype", dtype,
                     mc_indexed_dtype_name(dtype));
        return NULL;
    }
    mc_indexed_writer_t *w = calloc(1, sizeof(*w));
    if (!w) {
        mc_path_errf(err, n, prefix, "out of memory");
        return NULL;
    }
    w->bin.fd = -1;
    w->dtype = dtype;
    w->itemsize = mc_indexed_dtype_size(dtype);
    w->prefix = strdup(prefix);
    w->bin_path = concat(prefix, ".bin");
    w->idx_path = concat(prefix, ".idx");
    w->bin_tmp = concat(prefix, ".bin.tmp");
    w->idx_tmp = concat(prefix, ".idx.tmp");
    w->cap_seq = w->cap_doc = 1024;
    w->lengths = malloc((size_t)w->cap_seq * sizeof(*w->lengths));
    w->docs = malloc((size_t)w->cap_doc * sizeof(*w->docs));
    if (!w->prefix || !w->bin_path || !w->idx_path || !w->bin_tmp || !w->idx_tmp || !w->lengths ||
        !w->docs) {
        mc_path_errf(err, n, prefix, "out of memory");
        writer_free(w);
        return NULL;
    }
    w->docs[w->n_doc++] = 0; /* Megatron's document_indices start as [0] */
    if (out_open(&w->bin, w->bin_tmp, err, n)) {
        writer_free(w);
        return NULL;
    }
    return w;
}

/* arr grown to hold `need` items (doubling), or NULL with arr and *cap untouched. */
static void *grow(void *arr, int64_t *cap, int64_t need, size_t item)
{
    if (need <= *cap) return arr;
    int64_t c = *cap;
    while (c < need) c *= 2;
    void *p = realloc(arr, (size_t)c * item);
    if (p) *cap = c;
    return p;
}

static int reserve(mc_indexed_writer_t *w, int64_t more_seq, int64_t more_doc, char *err, size_t n)
{
    int32_t *lengths = grow(w->lengths, &w->cap_seq, w->n_seq + more_seq, sizeof(*lengths));
    if (lengths) w->lengths = lengths;
    int64_t *docs = grow(w->docs, &w->cap_doc, w->n_doc + more_doc, sizeof(*docs));
    if (docs) w->docs = docs;
    if (!lengths || !docs) return mc_path_errf(err, n, w->bin_tmp, "out of memory for the index");
    return 0;
}

static bool fits(int dtype, int32_t v)
{
    switch (dtype) {
    case MC_DTYPE_UINT8: return v >= 0 && v <= UINT8_MAX;
    case MC_DTYPE_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case MC_DTYPE_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case MC_DTYPE_UINT16: return v >= 0 && v <= UINT16_MAX;
    default: return true; /* int32, int64 */
    }
}

/* Converts n tokens (n <= chunk) to the dtype's little-endian bytes. */
static void encode(int dtype, const int32_t *t, int64_t n, uint8_t *dst)
{
    for (int64_t i = 0; i < n; i++) {
        switch (dtype) {
        case MC_DTYPE_UINT8:
        case MC_DTYPE_INT8: dst[i] = (uint8_t)t[i]; break;
        case MC_DTYPE_INT16:
        case MC_DTYPE_UINT16: {
            uint16_t v = (uint16_t)t[i];
            memcpy(dst + 2 * i, &v, 2);
            break;
        }
        case MC_DTYPE_INT32: memcpy(dst + 4 * i, &t[i], 4); break;
        default: {
            int64_t v = t[i];
            memcpy(dst + 8 * i, &v, 8);
        }
        }
    }
}

static int write_tokens(mc_indexed_writer_t *w, const int32_t *t, int64_t n, char *err, size_t nerr)
{
    enum { CHUNK = 4096 };
    uint8_t bytes[CHUNK * 8];
    for (int64_t i = 0; i < n; i += CHUNK) {
        int64_t k = n - i < CHUNK ? n - i : CHUNK;
        encode(w->dtype, t + i, k, bytes);
        if (out_write(&w->bin, bytes, (size_t)(k * w->itemsize), err, nerr)) return -1;
    }
    return 0;
}

/* Everything about a document that can be wrong, checked before anything is written, so a
 * rejected document leaves the writer usable. Sets *total to the token count. */
static int check_document(const mc_indexed_writer_t *w, const int32_t *tokens,
                          const int32_t *lengths, int n_seq, int64_t *total, char *err, size_t n)
{
    int64_t doc = w->n_doc - 1;
    if (n_seq < 0 || (n_seq > 0 && !lengths))
        return mc_path_errf(err, n, w->bin_tmp, "document %lld: bad sequence count %d",
                            (long long)doc, n_seq);
    *total = 0;
    for (int i = 0; i < n_seq; i++) {
        if (lengths[i] < 0)
            return mc_path_errf(err, n, w->bin_tmp,
                                "document %lld: sequence %d has negative length %d", (long long)doc,
                                i, lengths[i]);
        *total += lengths[i];
    }
    if (*total > 0 && !tokens)
        return mc_path_errf(err, n, w->bin_tmp, "document %lld: %lld tokens but no token array",
                            (long long)doc, (long long)*total);
    for (int64_t i = 0; i < *total; i++)
        if (!fits(w->dtype, tokens[i]))
            return mc_path_errf(err, n, w->bin_tmp,
                                "token value %d (document %lld, position %lld) "
                                "does not fit dtype %s",
                                tokens[i], (long long)doc, (long long)i,
                                mc_indexed_dtype_name(w->dtype));
    return 0;
}

int mc_indexed_writer_add_document(mc_indexed_writer_t *w, const int32_t *tokens,
                                   const int32_t *lengths, int n_sequences, char *err, size_t n)
{
    if (w->failed) return mc_path_errf(err, n, w->bin_tmp, "writer failed earlier; abort it");
    int64_t total = 0;
    if (check_document(w, tokens, lengths, n_sequences, &total, err, n) ||
        reserve(w, n_sequences, 1, err, n))
        return -1;
    if (write_tokens(w, tokens, total, err, n)) {
        w->failed = true;
        return -1;
    }
    if (n_sequences > 0) memcpy(w->lengths + w->n_seq, lengths, (size_t)n_sequences * 4);
    w->n_seq += n_sequences;
    w->docs[w->n_doc++] = w->n_seq;
    return 0;
}

/* True if the sequences fill the .bin exactly, back to back from byte 0: then copying the whole
 * .bin, as Megatron's add_index does, matches the pointers finish will recompute. */
static bool contiguous(const mc_indexed_t *d)
{
    int64_t p = 0;
    for (int64_t i = 0; i < d->num_sequences; i++) {
        if (d->sequence_pointers[i] != p) return false;
        p += (int64_t)d->sequence_lengths[i] * d->itemsize;
    }
    return (uint64_t)p == d->bin_size;
}

int mc_indexed_writer_add_index(mc_indexed_writer_t *w, const char *prefix, char *err, size_t n)
{
    if (w->failed) return mc_path_errf(err, n, w->bin_tmp, "writer failed earlier; abort it");
    mc_indexed_t d;
    if (mc_indexed_open(&d, prefix, false, err, n)) return -1;
    int rc = 0;
    if (d.dtype != w->dtype)
        rc = mc_path_errf(err, n, prefix, "add_index: dtype %s does not match the writer's %s",
                          mc_indexed_dtype_name(d.dtype), mc_indexed_dtype_name(w->dtype));
    else if (!contiguous(&d))
        rc = mc_path_errf(err, n, prefix,
                          "add_index: sequences are not stored back to back in the .bin, "
                          "so its bytes cannot be appended as they are");
    else rc = reserve(w, d.num_sequences, d.num_documents, err, n);
    if (rc == 0 && d.bin_size > 0 && out_write(&w->bin, d.bin, d.bin_size, err, n)) {
        w->failed = true;
        rc = -1;
    }
    if (rc == 0) {
        /* sequence_lengths.extend(...); document_indices.extend((offset + di)[1:]) */
        memcpy(w->lengths + w->n_seq, d.sequence_lengths, (size_t)d.num_sequences * 4);
        for (int64_t i = 1; i <= d.num_documents; i++)
            w->docs[w->n_doc++] = w->n_seq + d.document_indices[i];
        w->n_seq += d.num_sequences;
    }
    mc_indexed_close(&d);
    return rc;
}

/* _IndexWriter: magic, <Q version 1, <B dtype, <Q S, <Q D, int32 lengths, int64 pointers
 * (cumulative byte offsets), int64 document_indices. */
static int write_idx(const mc_indexed_writer_t *w, char *err, size_t n)
{
    out_t o;
    if (out_open(&o, w->idx_tmp, err, n)) return -1;
    uint64_t version = 1, S = (uint64_t)w->n_seq, D = (uint64_t)w->n_doc;
    uint8_t dtype = (uint8_t)w->dtype;
    int rc = out_write(&o, MAGIC, sizeof(MAGIC), err, n) || out_write(&o, &version, 8, err, n) ||
             out_write(&o, &dtype, 1, err, n) || out_write(&o, &S, 8, err, n) ||
             out_write(&o, &D, 8, err, n);
    if (rc == 0) rc = out_write(&o, w->lengths, (size_t)w->n_seq * 4, err, n);
    int64_t ptr = 0;
    for (int64_t i = 0; rc == 0 && i < w->n_seq; i++) {
        rc = out_write(&o, &ptr, 8, err, n);
        ptr += (int64_t)w->lengths[i] * w->itemsize;
    }
    if (rc == 0) rc = out_write(&o, w->docs, (size_t)w->n_doc * 8, err, n);
    if (rc) {
        out_discard(&o);
        return -1;
    }
    return out_close(&o, err, n);
}

/* Renames bin then idx into place. The old .idx (if any) goes first, so a reader never sees an
 * old .idx with a new .bin. If the last step fails the new .bin is removed again. */
static int publish(const mc_indexed_writer_t *w, char *err, size_t n)
{
    if (unlink(w->idx_path) != 0 && errno != ENOENT)
        return mc_path_errf(err, n, w->idx_path, "cannot replace: %s", strerror(errno));
    if (rename(w->bin_tmp, w->bin_path) != 0)
        return mc_path_errf(err, n, w->bin_path, "cannot rename %s into place: %s", w->bin_tmp,
                            strerror(errno));
    if (rename(w->idx_tmp, w->idx_path) != 0) {
        int e = errno;
        unlink(w->bin_path);
        return mc_path_errf(err, n, w->idx_path, "cannot rename %s into place: %s", w->idx_tmp,
                            strerror(e));
    }
    return 0;
}

int mc_indexed_writer_finish(mc_indexed_writer_t *w, char *err, size_t n)
{
    int rc = 0;
    if (w->failed) rc = mc_path_errf(err, n, w->bin_tmp, "not finished: the writer failed earlier");
    if (rc == 0) rc = out_close(&w->bin, err, n);
    if (rc == 0) rc = write_idx(w, err, n);
    if (rc == 0) rc = publish(w, err, n);
    if (rc) {
        mc_indexed_writer_abort(w);
        return -1;
    }
    writer_free(w);
    return 0;
}
