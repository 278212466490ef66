/* --tp-comm-overlap-cfg through libyaml. Megatron loads the file with yaml.safe_load and hands the
 * mapping to Transformer Engine's initialize_ub as ub_cfgs: GEMM name -> settings, each setting
 * overriding get_default_config's (TE, pytorch/module/base.py). megatron-c's overlap
 * (model/tp_overlap.c) pipelines qkv_fprop, fc1_fprop, proj_dgrad and fc2_dgrad (the
 * all-gathers) and proj_fprop and fc2_fprop (the reduce-scatters) in one chunk count, and runs
 * qkv_dgrad, fc1_dgrad, qkv_wgrad and fc1_wgrad as bulk overlaps. So:
 *   method: ring_exchange or pipeline for a pipelined GEMM, bulk for a bulk one; else refused;
 *   num_splits: a pipelined GEMM's chunk count, one for all of them; a bulk GEMM has no splits
 *     (TE does not read it there either);
 *   fp8_buf: an fp8 buffer, meaningless without fp8, as in TE;
 *   aggregate, atomic_gemm, pipeline_rs_overlap_first_gemm: refused when true (not implemented);
 *   num_sm, cga_size, set_sm_margin, use_ce, comm_priority, gemm_priority: userbuffers' kernels
 *     on the GPU, which megatron-c does not have (its chunks are the communicator's collectives):
 *     refused by name. */
#include "config/tp_overlap_cfg.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static const char *const PIPELINED[] = {"qkv_fprop", "fc1_fprop",  "proj_dgrad",
                                        "fc2_dgrad", "proj_fprop", "fc2_fprop"};
static const char *const BULK[] = {"qkv_dgrad", "fc1_dgrad", "qkv_wgrad", "fc1_wgrad"};
/* TE's later GEMM names megatron-c has no overlap for */
static const char *const OTHER[] = {"proj_wgrad", "fc2_wgrad"};

static bool in(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}
#define IN(s, list) in(s, list, sizeof(list) / sizeof(list[0]))

static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *scalar(yaml_document_t *d, yaml_node_t *node)
{
    return node && node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value : NULL;
}

static bool yaml_true(const char *v)
{
    return strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0;
}

/* One setting of GEMM `gemm`. */
static int setting(const char *gemm, const char *key, const char *v, bool pipelined,
                   mc_tp_overlap_cfg_t *out, char *err, size_t n)
{
    if (strcmp(key, "method") == 0) {
        const bool ok = pipelined ? strcmp(v, "ring_exchange") == 0 || strcmp(v, "pipeline") == 0
                                  : strcmp(v, "bulk") == 0;
        if (!ok)
            return fail(err, n, "%s: method %s is not implemented (megatron-c %s; use %s)", gemm, v,
                        pipelined ? "pipelines this GEMM with its collective in chunks"
                                  : "overlaps this GEMM's whole collective (bulk)",
                        pipelined ? "ring_exchange or pipeline" : "bulk");
        return 0;
    }
    if (strcmp(key, "num_splits") == 0) {
        char *end;
        const long s = strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || s < 1 || s > 1024)
            return fail(err, n, "%s: num_splits %s is not a positive integer", gemm, v);
        if (!pipelined) return 0;
        if (out->splits && out->splits != s)
            return fail(err, n,
                        "%s: num_splits %ld differs from another GEMM's %d (megatron-c runs one "
                        "chunk count for every pipelined GEMM: give them the same)",
                        gemm, s, out->splits);
        out->splits = (int)s;
        return 0;
    }
    if (strcmp(key, "fp8_buf") == 0) return 0;
    if (strcmp(key, "aggregate") == 0 || strcmp(key, "atomic_gemm") == 0 ||
        strcmp(key, "pipeline_rs_overlap_first_gemm") == 0) {
        if (yaml_true(v))
            return fail(err, n, "%s: %s is not implemented (set it false or remove it)", gemm, key);
        return 0;
    }
    if (strcmp(key, "num_sm") == 0 || strcmp(key, "cga_size") == 0 ||
        strcmp(key, "set_sm_margin") == 0 || strcmp(key, "use_ce") == 0 ||
        strcmp(key, "comm_priority") == 0 || strcmp(key, "gemm_priority") == 0)
        return fail(err, n,
                    "%s: %s does not apply (it sets Transformer Engine's userbuffers kernels; "
                    "megatron-c's chunks are the communicator's collectives: remove it)",
                    gemm, key);
    return fail(err, n, "%s: unknown setting %s", gemm, key);
}

static int gemm_cfg(yaml_document_t *d, const char *gemm, yaml_node_t *m, mc_tp_overlap_cfg_t *out,
                    char *err, size_t n)
{
    const bool pipelined = IN(gemm, PIPELINED);
    if (!pipelined && !IN(gemm, BULK))
        return fail(err, n,
                    IN(gemm, OTHER) ? "%s: megatron-c has no overlap for this GEMM"
                                    : "unknown GEMM %s (Transformer Engine's names: "
                                      "qkv_fprop, proj_fprop, fc1_dgrad, ...)",
                    gemm);
    if (!m || m->type != YAML_MAPPING_NODE)
        return fail(err, n, "%s: its settings must be a mapping (method: ..., num_splits: ...)",
                    gemm);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(d, yaml_document_get_node(d, p->key));
        const char *v = scalar(d, yaml_document_get_node(d, p->value));
        if (!k || !v) return fail(err, n, "%s: settings are scalars (key: value)", gemm);
        if (setting(gemm, k, v, pipelined, out, err, n)) return -1;
    }
    return 0;
}

int mc_tp_overlap_cfg_parse(const char *yaml, size_t len, mc_tp_overlap_cfg_t *out, char *err,
                            size_t n)
{
    memset(out, 0, sizeof(*out));
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return fail(err, n, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&parser, &doc)) {
        fail(err, n, "line %zu: %s", parser.problem_mark.line + 1,
             parser.problem ? parser.problem : "not YAML");
        yaml_parser_delete(&parser);
        return -1;
    }
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
             p < root->data.mapping.pairs.top && !rc; p++) {
            const char *gemm = scalar(&doc, yaml_document_get_node(&doc, p->key));
            rc = gemm ? gemm_cfg(&doc, gemm, yaml_document_get_node(&doc, p->value), out, err, n)
                      : fail(err, n, "a GEMM's name must be a scalar");
        }
    } else if (root) {
        rc = fail(err, n, "the file must be a mapping of GEMM names to their settings");
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

int mc_tp_overlap_cfg_read(const char *path, mc_tp_overlap_cfg_t *out, char *err, size_t n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, n, "cannot open %s", path);
    char *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len + 4096 > cap) {
            cap = cap ? 2 * cap : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0 && len < (1u << 20));
    fclose(f);
    if (!buf) return fail(err, n, "cannot read %s", path);
    const int rc = mc_tp_overlap_cfg_parse(buf, len, out, err, n);
    free(buf);
    return rc;
}
