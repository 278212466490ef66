/* PyTorch Distributed Checkpoint (torch.distributed.checkpoint, "DCP") files as Megatron-LM's
 * torch_dist format writes them (../shared/data/megatron-ref/torch_dist/FORMAT.md, sections 2-3):
 *
 *   DIR/__<rank>_<n>.distcp   items packed back to back, each a complete torch.save archive
 *                             (archive folder "archive"): one tensor chunk (contiguous, shape =
 *                             the chunk's sizes) or one pickled object list (a ShardedObject)
 *   DIR/.metadata             one pickle of torch's Metadata: every key's global shape, dtype
 *                             and chunks, and where each chunk's item lies
 *
 * This layer knows files, not models: keys, global tensors and their chunks. Which key holds
 * what (Megatron's sharded state dict) is ckpt/'s business.
 *
 * Writing: each rank collects its items in a writer (mc_dcp_writer_*), which writes them into
 * its two files and returns the records of what it wrote; rank 0 merges every rank's records
 * (mc_dcp_records_*: a flat byte form, for gathering) into the .metadata (mc_dcp_meta_write).
 * The .metadata written is a plain torch.distributed.checkpoint.metadata.Metadata with 5-item
 * TensorProperties, which every torch >= 2.3 and Megatron read (FORMAT.md, section 2).
 *
 * Reading: mc_dcp_meta_read parses a .metadata (Megatron's MCoreMetadata or torch's Metadata,
 * 5- or 6-item TensorProperties; anything malformed is a one-line error, never a crash), and a
 * reader (mc_dcp_reader_*) fetches any box of a global tensor from the chunks that cover it,
 * and byte items as objects. Errors are one line naming the file. */
#ifndef MC_TORCHFMT_DCP_H
#define MC_TORCHFMT_DCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "torchfmt/pyobj.h"

#define MC_DCP_MAX_DIMS 8

/* ---- what a checkpoint holds ------------------------------------------------------------- */

/* One chunk of a global tensor (or the single item of a byte key) and where it is stored. */
typedef struct {
    int64_t offsets[MC_DCP_MAX_DIMS]; /* in the global tensor (unused for byte items) */
    int64_t sizes[MC_DCP_MAX_DIMS];
    char file[64];   /* relative path: "__0_1.distcp" */
    uint64_t offset; /* of the item's archive in the file */
    uint64_t length; /* of the item's archive */
} mc_dcp_chunk_t;

/* One key: a global tensor (TensorStorageMetadata) or a byte item (BytesStorageMetadata: ndim
 * 0, dtype uint8, one chunk whose offsets and sizes are unused). */
typedef struct {
    char *key;
    bool bytes;
    mc_torch_dtype_t dtype; /* tensors */
    int ndim;
    int64_t shape[MC_DCP_MAX_DIMS]; /* global shape */
    mc_dcp_chunk_t *chunks;
    size_t n_chunks;
} mc_dcp_entry_t;

typedef struct {
    mc_dcp_entry_t *entries; /* in the file's order */
    size_t n;
    uint32_t *index; /* hash of keys (internal) */
    size_t index_cap;
} mc_dcp_meta_t;

/* Parses DIR/.metadata (path is the .metadata file). Checks what a reader relies on: every
 * tensor's chunks lie inside its shape, tile it exactly once (no gap, no overlap), and every
 * chunk has a storage record; byte keys have exactly one item. Errors start with the path. */
int mc_dcp_meta_read(const char *path, mc_dcp_meta_t *m, char *err, size_t errn);
/* The same from memory (fuzzing); name is used in errors. */
int mc_dcp_meta_read_mem(const void *buf, size_t len, const char *name, mc_dcp_meta_t *m, char *err,
                         size_t errn);
const mc_dcp_entry_t *mc_dcp_meta_find(const mc_dcp_meta_t *m, const char *key);
void mc_dcp_meta_free(mc_dcp_meta_t *m);

/* Writes m as DIR/.metadata's pickle (path: the .metadata file, created or truncated, written
 * in place; the caller publishes the directory atomically). checkpoint_id: the directory named
 * in StorageMeta (NULL: storage_meta None). Returns 0, or -1 with one line. */
int mc_dcp_meta_write(const char *path, const mc_dcp_meta_t *m, const char *checkpoint_id,
                      char *err, size_t errn);

/* ---- records: what one rank wrote, as bytes to gather on rank 0 --------------------------- */

/* One written item: its key, its tensor's global shape and dtype (or bytes), its chunk. */
typedef struct {
    char *key;
    bool bytes;
    mc_torch_dtype_t dtype;
    int ndim;
    int64_t shape[MC_DCP_MAX_DIMS];
    mc_dcp_chunk_t chunk;
} mc_dcp_record_t;

typedef struct {
    mc_dcp_record_t *items;
    size_t n, cap;
} mc_dcp_records_t;

/* A flat, self-describing little-endian form of recs (malloc'ed, *len bytes). */
int mc_dcp_records_pack(const mc_dcp_records_t *recs, uint8_t **buf, size_t *len);
/* Appends the records packed in buf to recs (bounds-checked). */
int mc_dcp_records_unpack(const uint8_t *buf, size_t len, mc_dcp_records_t *recs, char *err,
                          size_t errn);
void mc_dcp_records_free(mc_dcp_records_t *recs);
/* Appends src's records to dst (their keys move with them) and empties src. 0, or -1 when out
 * of memory (the records not moved stay in src). */
int mc_dcp_records_move(mc_dcp_records_t *dst, mc_dcp_records_t *src);
/* Every rank's records merged into a checkpoint index: keys in the order first met, chunks in
 * the order given. Fails (one line naming the key) when two records of one key disagree on
 * shape, dtype or kind, when a byte key has two items, or when a tensor's chunks do not tile
 * it exactly once. */
int mc_dcp_meta_from_records(const mc_dcp_records_t *recs, mc_dcp_meta_t *m, char *err,
                             size_t errn);

/* ---- writing one rank's files ------------------------------------------------------------- */

typedef struct mc_dcp_writer mc_dcp_writer_t;

/* Items of rank `rank` go to DIR/__<rank>_0.distcp and __<rank>_1.distcp (created when the
 * writer finishes). NULL when out of memory. */
mc_dcp_writer_t *mc_dcp_writer_new(const char *dir, int rank);
/* A tensor chunk: t (contiguous, any dtype of pyobj.h that torch.save writes) is the chunk, of
 * shape t's shape, at `offsets` of the global tensor key of shape global_shape (t's ndim
 * dimensions). A reference to t is taken; its bytes are read when the writer finishes. */
int mc_dcp_writer_add_tensor(mc_dcp_writer_t *w, const char *key, const mc_pyobj_t *t,
                             const int64_t *global_shape, const int64_t *offsets);
/* A byte item: obj (a list, as Megatron's ShardedObject saves [value]) pickled by torch.save. A
 * reference is taken. */
int mc_dcp_writer_add_object(mc_dcp_writer_t *w, const char *key, const mc_pyobj_t *obj);
/* Every object the writer holds, in the order added (tensors and objects): what an
 * asynchronous save must snapshot before training goes on. */
size_t mc_dcp_writer_count(const mc_dcp_writer_t *w);
mc_pyobj_t **mc_dcp_writer_objects(mc_dcp_writer_t *w);
/* Writes the items as torch DCP's FileSystemWriter does (byte items round-robin over the two
 * files, tensors largest first, each to the lighter file), fsyncs the files, appends one record
 * per item to recs, and frees w (also on error). Any thread; no communication. Returns 0, or -1
 * with one line naming the file. */
int mc_dcp_writer_finish(mc_dcp_writer_t *w, mc_dcp_records_t *recs, char *err, size_t errn);
void mc_dcp_writer_free(mc_dcp_writer_t *w);

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct mc_dcp_reader mc_dcp_reader_t;

/* A reader of the checkpoint in dir, indexed by m (which must outlive it). Files are mapped on
 * first use. NULL when out of memory. */
mc_dcp_reader_t *mc_dcp_reader_new(const char *dir, const mc_dcp_meta_t *m);
void mc_dcp_reader_free(mc_dcp_reader_t *r);

/* Copies the box [start, start + sizes) of key's global tensor (ndim must be the key's) into
 * dst, contiguous, converted to dst_dtype (float32, bfloat16 or float16 from any of those;
 * rounding to nearest even, as torch's copy_; dst_dtype equal to the key's dtype copies the bytes
 * of any dtype). Reads every chunk overlapping the box; each chunk item is checked
 * (its archive, CRC, its tensor's dtype and shape = the chunk's sizes) on first use. Errors:
 * unknown key, a box outside the tensor, a bad item (naming its file and offset). */
int mc_dcp_read_box(mc_dcp_reader_t *r, const char *key, int ndim, const int64_t *start,
                    const int64_t *sizes, mc_torch_dtype_t dst_dtype, void *dst, char *err,
                    size_t errn);
/* Copies where the box (src_off, src_sizes) of a global tensor, held contiguously in src as
 * sdt, overlaps the box (dst_off, dst_sizes) held in dst as ddt: a copy, or between the float
 * types with one rounding to nearest even. Nothing when they do not overlap. */
void mc_dcp_copy_overlap(int ndim, const int64_t *src_off, const int64_t *src_sizes,
                         const void *src, mc_torch_dtype_t sdt, const int64_t *dst_off,
                         const int64_t *dst_sizes, void *dst, mc_torch_dtype_t ddt);
/* A byte item's object (what torch.load of its archive gives: Megatron's one-element list). New
 * reference. */
int mc_dcp_read_object(mc_dcp_reader_t *r, const char *key, mc_pyobj_t **out, char *err,
                       size_t errn);

#endif
