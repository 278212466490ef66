/* The dataset index cache: NPY files, descriptions, entries; see index_cache.h. */
#include "data/index_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fs.h"
#include "data/md5.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the index cache writes little-endian NPY arrays from memory as is"
#endif

static mc_index_cache_stats_t stats;
static bool warned_unwritable;


static char *concat(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
    return s;
}

/* =============================================================================================
 * Files */

static int write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t k = write(fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

static int read_all(int fd, void *data, size_t len)
{
    char *p = data;
    while (len) {
        ssize_t k = read(fd, p, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO; /* the file shrank under us */
            return -1;
        }
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* path gets head then body, atomically: a temporary file in the same directory, fsync, rename. */
static int write_atomic(const char *path, const void *head, size_t head_len, const void *body,
                        size_t body_len, char *err, size_t n)
{
    char *tmp = concat(path, ".tmp.XXXXXX");
    if (!tmp) return mc_errf(err, n, "out of memory");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        mc_errf(err, n, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    /* mkstemp makes 0600; the cache is as readable as numpy.save's files (0644 under the usual
     * umask). */
    (void)fchmod(fd, 0644);
    if (write_all(fd, head, head_len) || write_all(fd, body, body_len) || fsync(fd)) {
        mc_errf(err, n, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return -1;
    }
    if (close(fd) || rename(tmp, path)) {
        mc_errf(err, n, "%s: %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return -1;
    }
    free(tmp);
    return 0;
}

static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;
    (void)fsync(fd);
    close(fd);
}

/* =============================================================================================
 * NPY */

static const char NPY_MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

size_t mc_npy_itemsize(const char *descr)
{
    if (!strcmp(descr, "<i4") || !strcmp(descr, "<u4")) return 4;
    if (!strcmp(descr, "<i8")) return 8;
    return 0;
}

/* Elements of a shape, or -1 when negative or too many for itemsize-byte elements. */
static int64_t shape_count(int ndim, const int64_t *shape, size_t itemsize)
{
    int64_t c = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        if (shape[i] && c > (INT64_MAX / (int64_t)itemsize) / shape[i]) return -1;
        c *= shape[i];
    }
    return c;
}

void mc_npy_free(mc_npy_t *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

int mc_npy_write(const char *path, const char *descr, int ndim, const int64_t *shape,
                 const void *data, char *err, size_t n)
{
    size_t isz = mc_npy_itemsize(descr);
    if (!isz || ndim < 1 || ndim > 2) return mc_errf(err, n, "%s: unsupported array", path);
    int64_t count = shape_count(ndim, shape, isz);
    if (count < 0) return mc_errf(err, n, "%s: bad shape", path);
    /* The header numpy.save writes: 10 bytes of preamble, the dict's repr, spaces, '\n', a
     * multiple of 64 bytes in all (numpy.lib.format.ARRAY_ALIGN). */
    char dict[160];
    int dl = ndim == 1
                 ? snprintf(dict, sizeof dict,
                            "{'descr': '%s', 'fortran_order': False, 'shape': (%lld,), }", descr,
                            (long long)shape[0])
                 : snprintf(dict, sizeof dict,
                            "{'descr': '%s', 'fortran_order': False, 'shape': (%lld, %lld), }",
                            descr, (long long)shape[0], (long long)shape[1]);
    size_t total = (10 + (size_t)dl + 1 + 63) / 64 * 64;
    unsigned char head[256];
    memcpy(head, NPY_MAGIC, 6);
    head[6] = 1;
    head[7] = 0;
    size_t hlen = total - 10;
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);
    memcpy(head + 10, dict, (size_t)dl);
    memset(head + 10 + dl, ' ', total - 10 - (size_t)dl - 1);
    head[total - 1] = '\n';
    return write_atomic(path, head, total, data, (size_t)count * isz, err, n);
}

/* The header dict's parser: {'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), } with
 * any key order and spacing, nothing else. */
typedef struct {
    const char *p, *end;
} cursor_t;

static void skip_ws(cursor_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static bool take(cursor_t *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string ('...' or "...", no escapes) into out[cap]. */
static bool take_string(cursor_t *c, char *out, size_t cap)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || k + 1 >= cap) return false;
        out[k++] = *c->p++;
    }
    if (c->p >= c->end) return false;
    c->p++;
    out[k] = '\0';
    return true;
}

static bool take_word(cursor_t *c, const char *w)
{
    skip_ws(c);
    size_t l = strlen(w);
    if ((size_t)(c->end - c->p) < l || memcmp(c->p, w, l)) return false;
    c->p += l;
    return true;
}

static bool take_int(cursor_t *c, int64_t *v)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
    int64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > (INT64_MAX - 9) / 10) return false;
        x = x * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2's longs */
    *v = x;
    return true;
}

static bool parse_header(const char *h, size_t len, mc_npy_t *a, char *why, size_t n)
{
    cursor_t c = {h, h + len};
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    if (!take(&c, '{')) return mc_errf(why, n, "header is not a dict"), false;
    for (;;) {
        if (take(&c, '}')) break;
        char key[32];
        if (!take_string(&c, key, sizeof key) || !take(&c, ':'))
            return mc_errf(why, n, "malformed header"), false;
        if (!strcmp(key, "descr") && !have_descr) {
            char d[16];
            if (!take_string(&c, d, sizeof d)) return mc_errf(why, n, "malformed descr"), false;
            if (!mc_npy_itemsize(d))
                return mc_errf(why, n, "dtype '%s' (expected '<i4', '<u4' or '<i8')", d), false;
            memcpy(a->descr, d, 4);
            have_descr = true;
        } else if (!strcmp(key, "fortran_order") && !have_order) {
            if (take_word(&c, "False")) fortran = false;
            else if (take_word(&c, "True")) fortran = true;
            else return mc_errf(why, n, "malformed fortran_order"), false;
            have_order = true;
        } else if (!strcmp(key, "shape") && !have_shape) {
            if (!take(&c, '(')) return mc_errf(why, n, "malformed shape"), false;
            a->ndim = 0;
            while (!take(&c, ')')) {
                int64_t v;
                if (a->ndim == 2) return mc_errf(why, n, "more than 2 dimensions"), false;
                if (!take_int(&c, &v)) return mc_errf(why, n, "malformed shape"), false;
                a->shape[a->ndim++] = v;
                if (!take(&c, ',')) {
                    if (!take(&c, ')')) return mc_errf(why, n, "malformed shape"), false;
                    break;
                }
            }
            if (a->ndim < 1) return mc_errf(why, n, "a 0-dimensional array"), false;
            have_shape = true;
        } else {
            return mc_errf(why, n, "unexpected header key '%s'", key), false;
        }
        if (!take(&c, ',')) {
            if (!take(&c, '}')) return mc_errf(why, n, "malformed header"), false;
            break;
        }
    }
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\n' || *c.p == '\t')) c.p++;
    if (c.p != c.end) return mc_errf(why, n, "trailing bytes in the header"), false;
    if (!have_descr || !have_order || !have_shape)
        return mc_errf(why, n, "incomplete header"), false;
    if (fortran && a->ndim > 1) return mc_errf(why, n, "Fortran order"), false;
    return true;
}

int mc_npy_read(const char *path, mc_npy_t *a, char *err, size_t n)
{
    memset(a, 0, sizeof *a);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return mc_errf(err, n, "%s: %s", path, strerror(errno));
    struct stat st;
    unsigned char pre[12];
    char *h = NULL;
    char why[160];
    if (fstat(fd, &st)) {
        mc_errf(err, n, "%s: %s", path, strerror(errno));
        goto bad;
    }
    if (st.st_size < 10 || read_all(fd, pre, 10) || memcmp(pre, NPY_MAGIC, 6)) {
        mc_errf(err, n, "%s: not an NPY file", path);
        goto bad;
    }
    size_t hlen, pre_len;
    if (pre[6] == 1 && pre[7] == 0) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
        pre_len = 10;
    } else if ((pre[6] == 2 || pre[6] == 3) && pre[7] == 0 && st.st_size >= 12) {
        if (read_all(fd, pre + 10, 2)) {
            mc_errf(err, n, "%s: %s", path, strerror(errno));
            goto bad;
        }
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
        pre_len = 12;
    } else {
        mc_errf(err, n, "%s: NPY version %d.%d", path, pre[6], pre[7]);
        goto bad;
    }
    if (hlen > 1u << 20 || (off_t)(pre_len + hlen) > st.st_size) {
        mc_errf(err, n, "%s: truncated NPY header", path);
        goto bad;
    }
    h = malloc(hlen + 1);
    if (!h) {
        mc_errf(err, n, "out of memory");
        goto bad;
    }
    if (read_all(fd, h, hlen)) {
        mc_errf(err, n, "%s: %s", path, strerror(errno));
        goto bad;
    }
    if (!parse_header(h, hlen, a, why, sizeof why)) {
        mc_errf(err, n, "%s: bad NPY header: %s", path, why);
        goto bad;
    }
    size_t isz = mc_npy_itemsize(a->descr);
    int64_t count = shape_count(a->ndim, a->shape, isz);
    if (count < 0) {
        mc_errf(err, n, "%s: bad NPY shape", path);
        goto bad;
    }
    int64_t bytes = count * (int64_t)isz;
    if ((int64_t)st.st_size != (int64_t)(pre_len + hlen) + bytes) {
        mc_errf(err, n, "%s: %lld bytes, expected %lld for its header (truncated or padded)", path,
                (long long)st.st_size, (long long)(pre_len + hlen) + (long long)bytes);
        goto bad;
    }
    a->data = malloc(bytes ? (size_t)bytes : 1);
    if (!a->data) {
        mc_errf(err, n, "out of memory (%lld bytes for %s)", (long long)bytes, path);
        goto bad;
    }
    if (read_all(fd, a->data, (size_t)bytes)) {
        mc_errf(err, n, "%s: %s", path, strerror(errno));
        goto bad;
    }
    free(h);
    close(fd);
    return 0;
bad:
    free(h);
    close(fd);
    mc_npy_free(a);
    return -1;
}

/* =============================================================================================
 * Descriptions */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

char *mc_index_cache_description(const mc_index_desc_t *d)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    fprintf(f,
            "{\n    \"class\": \"GPTDataset\",\n    \"written_by\": \"megatron-c\",\n"
            "    \"cache_format_version\": %d,\n    \"dataset_path\": ",
            MC_INDEX_CACHE_FORMAT_VERSION);
    json_string(f, d->dataset_path ? d->dataset_path : "");
    fprintf(f, ",\n    \"num_sequences\": %lld,\n    \"sequence_lengths_md5\": ",
            (long long)d->num_sequences);
    json_string(f, d->sequence_lengths_md5 ? d->sequence_lengths_md5 : "");
    fputs(",\n    \"index_split\": ", f);
    json_string(f, d->split ? d->split : "");
    fprintf(f, ",\n    \"split_sequence_range\": [%lld, %lld],\n    \"num_samples\": ",
            (long long)d->begin, (long long)d->end);
    if (d->num_samples < 0) fputs("null", f);
    else fprintf(f, "%lld", (long long)d->num_samples);
    fprintf(f,
            ",\n    \"sequence_length\": %d,\n    \"random_seed\": %lld,\n"
            "    \"drop_last_partial_sequence\": %s,\n"
            "    \"add_extra_token_to_sequence\": %s\n}\n",
            d->seq_length, (long long)d->seed, d->drop_last_partial_sequence ? "true" : "false",
            d->add_extra_token_to_sequence ? "true" : "false");
    if (fclose(f)) {
        free(buf);
        return NULL;
    }
    return buf;
}

void mc_index_cache_lengths_md5(const int32_t *sequence_lengths, int64_t n, char hex[33])
{
    mc_md5_t c;
    uint8_t d[16];
    mc_md5_init(&c);
    mc_md5_update(&c, sequence_lengths, sizeof(int32_t) * (size_t)(n > 0 ? n : 0));
    mc_md5_final(&c, d);
    mc_md5_to_hex(d, hex);
}

char *mc_index_cache_default_dir(const char *prefix)
{
    return concat(prefix, "/cache/GPTDataset_indices");
}

/* =============================================================================================
 * Entries */

int mc_index_cache_entry_init(mc_index_cache_entry_t *e, const char *dir, const char *split,
                              const char *description)
{
    memset(e, 0, sizeof *e);
    mc_md5_hex(description, strlen(description), e->md5);
    e->dir = strdup(dir);
    e->description = strdup(description);
    size_t bl = strlen(dir) + 1 + 32 + strlen("-GPTDataset-") + strlen(split) + 2;
    e->base = malloc(bl);
    if (!e->dir || !e->description || !e->base) {
        mc_index_cache_entry_free(e);
        return -1;
    }
    snprintf(e->base, bl, "%s/%s-GPTDataset-%s-", dir, e->md5, split);
    return 0;
}

void mc_index_cache_entry_free(mc_index_cache_entry_t *e)
{
    free(e->dir);
    free(e->description);
    free(e->base);
    memset(e, 0, sizeof *e);
}

char *mc_index_cache_path(const mc_index_cache_entry_t *e, const char *affix)
{
    return concat(e->base, affix);
}

static const char *const ARRAY_AFFIX[3] = {"document_index.npy", "sample_index.npy",
                                           "shuffle_index.npy"};

static void warn_entry(const mc_index_cache_entry_t *e, const char *why)
{
    size_t bl = strlen(e->base);
    if (!strncmp(why, e->base, bl)) why += bl; /* "<base>shuffle_index.npy: ..." */
    stats.rejected++;
    stats.warnings++;
    mc_warn("ignoring the dataset index cache entry %s*: %s; rebuilding the indices", e->base, why);
}

void mc_index_cache_reject(const mc_index_cache_entry_t *e, const char *why) { warn_entry(e, why); }

int mc_index_cache_load(const mc_index_cache_entry_t *e, mc_npy_t out[3])
{
    memset(out, 0, 3 * sizeof *out);
    char why[4600];
    char *path = mc_index_cache_path(e, "description.txt");
    if (!path) return MC_INDEX_CACHE_MISS;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        int er = errno;
        if (er == ENOENT || er == ENOTDIR) {
            free(path);
            stats.misses++;
            return MC_INDEX_CACHE_MISS;
        }
        snprintf(why, sizeof why, "%s: %s", path, strerror(er));
        free(path);
        goto bad;
    }
    free(path);
    /* The description, byte for byte. */
    size_t want = strlen(e->description);
    struct stat st;
    if (fstat(fd, &st) || st.st_size != (off_t)want) {
        close(fd);
        snprintf(why, sizeof why, "its description differs from this run's");
        goto bad;
    }
    char *text = malloc(want + 1);
    if (!text || read_all(fd, text, want) || memcmp(text, e->description, want)) {
        free(text);
        close(fd);
        snprintf(why, sizeof why, "its description differs from this run's");
        goto bad;
    }
    free(text);
    close(fd);
    for (int k = 0; k < 3; k++) {
        path = mc_index_cache_path(e, ARRAY_AFFIX[k]);
        if (!path) {
            snprintf(why, sizeof why, "out of memory");
            goto bad;
        }
        int r = mc_npy_read(path, &out[k], why, sizeof why);
        free(path);
        if (r) goto bad;
    }
    stats.hits++;
    return MC_INDEX_CACHE_HIT;
bad:
    for (int k = 0; k < 3; k++) mc_npy_free(&out[k]);
    warn_entry(e, why);
    return MC_INDEX_CACHE_BAD;
}

int mc_index_cache_store(const mc_index_cache_entry_t *e, const mc_npy_t arrays[3])
{
    char why[4600];
    if (mc_mkdirs(e->dir, why, sizeof why)) goto bad; /* mode 0777 less the umask, as os.makedirs */
    for (int k = 0; k < 3; k++) {
        char *path = mc_index_cache_path(e, ARRAY_AFFIX[k]);
        if (!path) {
            snprintf(why, sizeof why, "out of memory");
            goto bad;
        }
        int r = mc_npy_write(path, arrays[k].descr, arrays[k].ndim, arrays[k].shape, arrays[k].data,
                             why, sizeof why);
        free(path);
        if (r) goto bad;
    }
    /* The description last: it is what marks the entry complete. */
    char *path = mc_index_cache_path(e, "description.txt");
    if (!path) {
        snprintf(why, sizeof why, "out of memory");
        goto bad;
    }
    int r = write_atomic(path, e->description, strlen(e->description), "", 0, why, sizeof why);
    free(path);
    if (r) goto bad;
    sync_dir(e->dir);
    stats.stored++;
    return 0;
bad:
    stats.store_failures++;
    if (!warned_unwritable) {
        warned_unwritable = true;
        stats.warnings++;
        mc_warn("cannot write the dataset index cache in %s (%s); building the indices in memory "
                "instead (--data-cache-path sets another directory; this is said once)",
                e->dir, why);
    }
    return -1;
}

void mc_index_cache_get_stats(mc_index_cache_stats_t *s) { *s = stats; }

void mc_index_cache_reset_stats(void)
{
    memset(&stats, 0, sizeof stats);
    warned_unwritable = false;
}
