/* Internals shared by the dcp_*.c files (torchfmt/dcp.h): the checks every index passes
 * (mc_dcp_meta_read and mc_dcp_meta_from_records build the same structure), the key index. */
#ifndef MC_TORCHFMT_DCP_INT_H
#define MC_TORCHFMT_DCP_INT_H

#include "torchfmt/dcp.h"

/* Elements in a box of ndim sizes (1 for ndim 0); -1 when the product overflows int64. */
int64_t dcp_volume(int ndim, const int64_t *sizes);
/* Checks that an entry's chunks lie inside its shape and tile it exactly once (byte entries:
 * exactly one item). One line naming the key. */
int dcp_entry_check(const mc_dcp_entry_t *e, char *err, size_t errn);
/* Appends an entry (key copied; no chunks yet) and indexes it; its index in *at. Fails on a
 * duplicate key. */
int dcp_meta_add(mc_dcp_meta_t *m, const char *key, size_t *at, char *err, size_t errn);
/* Appends a chunk to entry e. */
int dcp_entry_add_chunk(mc_dcp_entry_t *e, const mc_dcp_chunk_t *c);
/* Index of key in m, or -1. */
ptrdiff_t dcp_meta_lookup(const mc_dcp_meta_t *m, const char *key);
/* A file name as stored in a chunk: plain (no '/', not "." or ".."), under 64 bytes. */
int dcp_check_file_name(const char *name, char *err, size_t errn);
/* Appends a copy of r (its key pointer taken over) to recs, growing it. 0, or -1 out of memory. */
int dcp_records_push(mc_dcp_records_t *recs, const mc_dcp_record_t *r);

#endif
