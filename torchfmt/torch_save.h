/* torch.save and torch.load for the objects of torchfmt/pyobj.h: PyTorch checkpoint files that
 * torch.load(path, weights_only=False) opens, and files torch.save wrote (torch >= 1.6, the zip
 * format; MEGATRON.md section 9 for the legacy Megatron checkpoints built from them).
 *
 *   mc_pyobj_t *ckpt = mc_py_dict();
 *   mc_py_dict_set_str(ckpt, "iteration", mc_py_int(100));
 *   mc_py_dict_set_str(ckpt, "weight", mc_py_tensor_wrap(MC_TORCH_FLOAT32, 2, shape, w));
 *   if (mc_torch_save("model_optim_rng.pt", ckpt, err, sizeof err)) ...
 *   mc_py_decref(ckpt);
 *
 *   mc_pyobj_t *ck;
 *   if (mc_torch_load("model_optim_rng.pt", 0, &ck, err, sizeof err)) ...
 *   mc_pyobj_t *w = mc_py_path(ck, "model/weight");   // tensors point into the mapped file
 *   mc_py_decref(ck);                                 // unmaps once no tensor needs it
 *
 * A file holds the records torch 2.6+ writes, in its order: data.pkl, .format_version ("1"),
 * .storage_alignment ("64"), byteorder ("little"), data/0, data/1, ... (storages in key order),
 * version ("3\n"), .data/serialization_id. */
#ifndef MC_TORCHFMT_TORCH_SAVE_H
#define MC_TORCHFMT_TORCH_SAVE_H

#include "torchfmt/pyobj.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Writes obj to path as torch.save(obj, path) would: the archive folder is the file's basename
 * without its extension ("model_optim_rng" for .../model_optim_rng.pt). Creates or truncates
 * path and writes it in place (no rename; a failed save removes the file). Returns 0, or -1 with
 * one line in err starting with the path. */
int mc_torch_save(const char *path, const mc_pyobj_t *obj, char *err, size_t errn);

typedef struct {
    const char *archive_name; /* the records' folder; NULL: "archive", as torch names a stream */
    bool force_zip64;         /* zip64 fields everywhere (tests; see torchzip.h) */
} mc_torch_save_opts_t;

/* The same onto f, which must be positioned at the start of an empty file or stream; f is
 * flushed, not closed. opts may be NULL. */
int mc_torch_save_stream(FILE *f, const mc_pyobj_t *obj, const mc_torch_save_opts_t *opts,
                         char *err, size_t errn);

enum {
    /* Copy tensor data to the heap instead of pointing into the file's mapping, which is then
     * released before returning (costs the memory of every tensor). */
    MC_TORCH_LOAD_COPY = 1,
    /* Skip checking every record's CRC-32 (a full read of the file). Also what reading files
     * that torch saved with compute_crc32 off needs. */
    MC_TORCH_LOAD_NO_CRC = 2,
};

/* Reads a torch.save file. The file is mapped (private, copy-on-write: tensors may be
 * modified in memory without touching the file) and every record's CRC-32 is checked; tensors
 * point into the mapping, which stays until the last tensor of the file is released. Errors
 * (one line, starting with the path): not a zip or truncated, CRC mismatch naming the record,
 * records missing, a malformed or unsupported pickle (with the byte it is at), storages of the
 * wrong size. The file must not be truncated by someone else while mapped (SIGBUS). */
int mc_torch_load(const char *path, unsigned flags, mc_pyobj_t **out, char *err, size_t errn);

/* The same from memory. Without MC_TORCH_LOAD_COPY the tensors point into buf, which must
 * outlive them (records start at multiples of 64 bytes from buf, so the data is as aligned as
 * buf is). */
int mc_torch_load_mem(const void *buf, size_t len, unsigned flags, mc_pyobj_t **out, char *err,
                      size_t errn);

#endif
