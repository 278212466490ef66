/* The dataset index cache (--data-cache-path; MEGATRON.md 2.9's last bullet).
 *
 * Layout, Megatron's (GPTDataset._build_document_sample_shuffle_indices):
 *
 *   <dir>/<md5>-GPTDataset-<split>-description.txt    the JSON description; md5 = its MD5
 *   <dir>/<md5>-GPTDataset-<split>-document_index.npy int32 [E * documents]
 *   <dir>/<md5>-GPTDataset-<split>-sample_index.npy   int32 or int64 [samples + 1, 2]
 *   <dir>/<md5>-GPTDataset-<split>-shuffle_index.npy  uint32 or int64 [samples]
 *
 * with <split> one of train, valid, test and <dir> the --data-cache-path, or by default
 * <prefix>/cache/GPTDataset_indices (what Megatron's code does: os.path.join(path_prefix,
 * "cache", "GPTDataset_indices"), a directory named like the prefix, beside its .bin and .idx).
 * The arrays are real NPY v1.0 files: numpy.load reads them.
 *
 * The description is megatron-c's own JSON (mc_index_cache_description), not Megatron's: it
 * names everything the three arrays depend on, including an MD5 of the dataset's sequence
 * lengths, and a format version. Its md5 therefore never equals one Megatron computes, so the
 * two programs can share a cache directory without ever reading each other's entries;
 * megatron-c does not try to reuse Megatron's caches.
 *
 * Trust: an entry is used only when its description.txt equals the expected description byte
 * for byte and every array has the right header, dtype, shape and exact file size (the caller
 * then range-checks the values). Anything else is a warning and a rebuild, never an error.
 * Writes are atomic (a temporary name in the same directory, fsync, rename; the description
 * last, so its presence marks a complete entry), which makes ranks that build the same entry
 * at once safe: they write identical bytes. A directory that cannot be written is one warning
 * (per process) and the indices stay in memory: the cache never fails a run. */
#ifndef MC_DATA_INDEX_CACHE_H
#define MC_DATA_INDEX_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bumped whenever what megatron-c writes, or how the indices are built, changes. */
#define MC_INDEX_CACHE_FORMAT_VERSION 1

/* ---------------------------------------------------------------------------------------------
 * NPY (numpy.lib.format v1.0; v2.0 is read too) for little-endian integer arrays in C order. */
typedef struct {
    char descr[4]; /* "<i4", "<u4" or "<i8" */
    int ndim;      /* 1 or 2 */
    int64_t shape[2];
    void *data; /* malloc'd, row-major */
} mc_npy_t;

/* Writes an array atomically: <path>.tmp.XXXXXX, fsync, rename onto path. descr: "<i4", "<u4"
 * or "<i8"; ndim 1 or 2. Returns 0, or -1 with one line in err. */
int mc_npy_write(const char *path, const char *descr, int ndim, const int64_t *shape,
                 const void *data, char *err, size_t n);
/* Reads one, checking the magic, version, header dict (descr one of the three above,
 * fortran_order False, 1 or 2 dimensions) and that the file is exactly header + data long.
 * Returns 0 with a->data allocated, or -1 with one line in err (a zeroed). */
int mc_npy_read(const char *path, mc_npy_t *a, char *err, size_t n);
void mc_npy_free(mc_npy_t *a);
/* Bytes per element of a descr above (0 for any other). */
size_t mc_npy_itemsize(const char *descr);

/* ---------------------------------------------------------------------------------------------
 * Descriptions */

/* Everything a GPTDataset's three index arrays depend on. */
typedef struct {
    const char *dataset_path; /* the prefix, as given */
    int64_t num_sequences;
    const char *sequence_lengths_md5; /* mc_index_cache_lengths_md5 of all the sequences */
    const char *split;                /* "train", "valid" or "test" */
    int64_t begin, end;               /* the split's sequence range */
    int64_t num_samples;              /* requested; -1 = None */
    int seq_length;
    int64_t seed;
    bool drop_last_partial_sequence;
    bool add_extra_token_to_sequence;
} mc_index_desc_t;

/* The description as JSON text (4-space indent, keys in a fixed order, ending in a newline);
 * malloc'd, NULL when out of memory. */
char *mc_index_cache_description(const mc_index_desc_t *d);
/* MD5 of sequence_lengths[0..n) as little-endian int32 bytes (the .idx's own layout), hex. */
void mc_index_cache_lengths_md5(const int32_t *sequence_lengths, int64_t n, char hex[33]);
/* Megatron's default directory for a prefix: <prefix>/cache/GPTDataset_indices (malloc'd). */
char *mc_index_cache_default_dir(const char *prefix);

/* ---------------------------------------------------------------------------------------------
 * Entries */
typedef struct {
    char *dir;
    char *description;
    char md5[33]; /* md5 of description */
    char *base;   /* <dir>/<md5>-GPTDataset-<split>- */
} mc_index_cache_entry_t;

enum { MC_INDEX_CACHE_DOCUMENT, MC_INDEX_CACHE_SAMPLE, MC_INDEX_CACHE_SHUFFLE };

/* Names the entry of a description (takes a copy of both strings). 0, or -1 out of memory. */
int mc_index_cache_entry_init(mc_index_cache_entry_t *e, const char *dir, const char *split,
                              const char *description);
void mc_index_cache_entry_free(mc_index_cache_entry_t *e);
/* <base><affix> (affix "description.txt", "document_index.npy", ...), malloc'd. */
char *mc_index_cache_path(const mc_index_cache_entry_t *e, const char *affix);

enum { MC_INDEX_CACHE_MISS = 0, MC_INDEX_CACHE_HIT = 1, MC_INDEX_CACHE_BAD = 2 };
/* Looks the entry up. MISS: no description file (nothing said). HIT: out[document, sample,
 * shuffle] read (their format checked, not their shapes or values: the caller checks those and
 * calls mc_index_cache_reject if they do not fit). BAD: the entry exists but cannot be trusted
 * (a description that differs, a missing, truncated or malformed array): warned, out zeroed. */
int mc_index_cache_load(const mc_index_cache_entry_t *e, mc_npy_t out[3]);
/* Warns that a loaded entry does not fit (why) and counts it as rejected. */
void mc_index_cache_reject(const mc_index_cache_entry_t *e, const char *why);
/* Writes the entry (creating the directory): the three arrays, then the description. 0, or -1
 * when it could not (warned once per process; the caller goes on without the cache). */
int mc_index_cache_store(const mc_index_cache_entry_t *e, const mc_npy_t arrays[3]);

/* Counters since the start or the last reset (tests; one builder thread at a time). */
typedef struct {
    int64_t hits;           /* entries loaded (before the caller's checks) */
    int64_t misses;         /* no entry */
    int64_t rejected;       /* BAD entries plus mc_index_cache_reject calls */
    int64_t stored;         /* entries written */
    int64_t store_failures; /* entries that could not be written */
    int64_t warnings;       /* mc_warn lines printed */
} mc_index_cache_stats_t;

void mc_index_cache_get_stats(mc_index_cache_stats_t *s);
/* Zeroes the counters and re-arms the once-per-process warning about unwritable caches. */
void mc_index_cache_reset_stats(void);

#endif
