/* The files of a checkpoint directory in Megatron's legacy layout (MEGATRON.md section 9), and
 * the filesystem steps that make a save atomic:
 *
 *   DIR/latest_checkpointed_iteration.txt            the tracker: "100" or "release"
 *   DIR/iter_0000100/mp_rank_TT/model_optim_rng.pt   pp == 1
 *   DIR/iter_0000100/mp_rank_TT_PPP/...              pp > 1 (+ distrib_optim.pt alongside)
 *
 * A save writes iter_N.tmp-<token>/ first, renames it to iter_N/ once every rank is done, and
 * replaces the tracker last (temporary file, fsync, rename), so a process killed at any moment
 * leaves the tracker naming a complete checkpoint. Filesystem code: no communication. */
#ifndef MC_CKPT_FILES_H
#define MC_CKPT_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "torchfmt/pyobj.h"

#define MC_CKPT_PATH_MAX 4352 /* the --save/--load directory (4096) plus what follows it */
#define MC_CKPT_TRACKER "latest_checkpointed_iteration.txt"

/* "iter_0000100" (or "release") under dir; with a non-empty tmp suffix "iter_0000100.tmp-<tmp>". */
void mc_ckpt_iter_dir(char *buf, size_t n, const char *dir, int64_t iteration, bool release,
                      const char *tmp);
/* "mp_rank_TT" for pp == 1, "mp_rank_TT_PPP" otherwise, with "_EEE" (the expert-parallel rank)
 * after either when ep > 1 (Megatron's get_checkpoint_name). */
void mc_ckpt_rank_name(char *buf, size_t n, int tp_rank, int pp_size, int pp_rank, int ep_size,
                       int ep_rank);

/* Writes obj as torch.save(obj, path) would (the records' folder named after the file) and
 * makes the bytes durable (fsync). Returns 0, or -1 with "<path>: <why>" in err. */
int mc_ckpt_write_file(const char *path, const mc_pyobj_t *obj, char *err, size_t n);

/* The first rank's model_optim_rng.pt of the checkpoint in dir that a load would read (the
 * tracker's iteration, or step when > 0): mp_rank_00 or mp_rank_00_000 (Megatron's
 * find_checkpoint_rank_0), or a torch_dist checkpoint's common.pt, into *ck (mapped, see
 * mc_torch_load). *ck is NULL when dir has no tracker or the iteration no such file. path
 * receives the file. Errors: a malformed tracker, an unreadable file (one line naming it). */
int mc_ckpt_load_rank0(const char *dir, int64_t step, char *path, size_t pn, mc_pyobj_t **ck,
                       char *err, size_t n);

/* fsync of a file or directory (a directory's fsync makes the names in it durable). */
int mc_ckpt_fsync(const char *path, char *err, size_t n);
/* Removes a directory tree (or a file); 0, or -1 with err. A missing path is fine. */
int mc_ckpt_rmtree(const char *path, char *err, size_t n);

/* Makes staging appear as final in one step: rename(2) when final does not exist, else an atomic
 * exchange of the two (renameat2 RENAME_EXCHANGE; a plain rename-aside on filesystems without
 * it) and removal of the old tree. The parent directory is fsynced. */
int mc_ckpt_publish_dir(const char *staging, const char *final, char *err, size_t n);

/* Replaces dir's tracker with text: a temporary file, fsync, rename, fsync of dir. */
int mc_ckpt_write_tracker(const char *dir, const char *text, const char *tmp, char *err, size_t n);

/* Reads dir's tracker (Megatron's read_metadata): *found false when there is none; otherwise the
 * iteration, or release (iteration 0). A malformed tracker is an error naming it. */
int mc_ckpt_read_tracker(const char *dir, bool *found, int64_t *iteration, bool *release, char *err,
                         size_t n);

/* Removes leftovers of interrupted saves in dir (iter_*.tmp-* and the tracker's temporary
 * files). Returns how many it removed. */
int mc_ckpt_remove_stale(const char *dir);

/* Names in dir starting with prefix, comma-separated into buf (for "the checkpoint holds ..."
 * hints); empty when none or dir is unreadable. */
void mc_ckpt_list(const char *dir, const char *prefix, char *buf, size_t n);

#endif
