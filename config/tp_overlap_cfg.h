/* --tp-comm-overlap-cfg: Megatron's YAML of Transformer Engine's per-GEMM userbuffers settings
 * (ub_cfgs for te.module.base.initialize_ub), read where they apply to megatron-c's overlap. */
#ifndef MC_CONFIG_TP_OVERLAP_CFG_H
#define MC_CONFIG_TP_OVERLAP_CFG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    int splits; /* num_splits of the pipelined GEMMs (the chunk count); 0: not given */
} mc_tp_overlap_cfg_t;

/* Reads the file at path. Returns 0, or -1 with one line in err saying which GEMM and setting
 * (or which line of the YAML) megatron-c cannot take and why. */
int mc_tp_overlap_cfg_read(const char *path, mc_tp_overlap_cfg_t *out, char *err, size_t n);
/* The same from YAML text (tests). */
int mc_tp_overlap_cfg_parse(const char *yaml, size_t len, mc_tp_overlap_cfg_t *out, char *err,
                            size_t n);

#endif
