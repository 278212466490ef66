// Which attention the CUDA backend runs (issue 29): the setup that chooses between cuDNN's fused
// flash attention and the project's kernels for a run's shapes (--attention-backend, cuDNN's
// support matrix, whether cuDNN is there and builds the plans), and the op table's attention
// entries, which send each call to the chosen one (kernels/cuda/attention.h).
//
// cuDNN serves exactly the calls whose shapes match the setup's (type, sequence length, heads,
// groups, head dim, at most the planned rows, no document masks, the run's dropout or none; under
// context parallelism a2a's whole-sequence calls after the all-to-all: the heads and groups
// divided by cp, no dropout): a forward and its backward have the same shapes, so they always
// run on the same side and the state one writes is the state the other reads. Everything else
// runs the project's kernels.
#include <stdio.h>
#include <string.h>

#include <string>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda.h"
#include "kernels/cuda/cudnn_sdpa.h"

extern "C" {
#include "base/error.h"
#include "kernels/attention_choice.h"
#include "kernels/device.h"
}

namespace
{

struct Selection {
    bool cudnn;               // the setup chose cuDNN
    bool cp_whole;            // it chose cuDNN for a cp run: a2a's whole-sequence calls may use it
    mc_attention_spec_t spec; // the run's shapes
    size_t scratch;           // the most scratch the setup's plans need (and a2a's, once sized)
};
Selection g_sel;

int max_rows(const mc_attention_spec_t &s) { return s.B > s.B_eval ? s.B : s.B_eval; }

#ifdef MC_WITH_CUDNN
mc_sdpa_key key_of(mc_dtype_t dt, int S, int B, int NH, int NG, int HD, float p)
{
    return mc_sdpa_key{dt, S, B, NH, NG, HD, p, S, true, false, false};
}

// Whether a call of these shapes is a2a's whole-sequence attention of a cp run on cuDNN: after
// the all-to-all a rank holds the whole sequence, in order, of cp's share of the heads and groups
// (model/cp_attention.c), so it is plain causal attention; dropout stays on the project's
// kernels (their mask is keyed by global positions and heads, as every cp layout's).
bool a2a_whole(mc_dtype_t dt, int S, int NH, int NG, int HD, float p)
{
    const mc_attention_spec_t &s = g_sel.spec;
    return g_sel.cp_whole && s.cp > 1 && dt == s.dt && S == s.S && HD == s.HD &&
           NH * s.cp == s.NH && NG * s.cp == s.NG && p == 0;
}

// The plans and scratch layout of a call, or NULL when the project's kernels run it.
const mc_sdpa_plans *served(mc_dtype_t dt, int S, int B, int NH, int NG, int HD,
                            const int32_t *segments, float p, mc_attention_scratch_t *sc)
{
    mc_attention_spec_t s = g_sel.spec;
    const bool run = g_sel.cudnn && dt == s.dt && S == s.S && NH == s.NH && NG == s.NG &&
                     HD == s.HD && (p == 0 || p == s.dropout);
    if (segments || B > max_rows(s) || !(run || a2a_whole(dt, S, NH, NG, HD, p))) return nullptr;
    std::string why;
    const mc_sdpa_plans *plans = mc_cudnn_sdpa_plans(key_of(dt, S, B, NH, NG, HD, p), &why);
    if (!plans) return nullptr;
    s.NH = NH, s.NG = NG; // a2a's share of them
    mc_attention_cudnn_scratch(&s, B, mc_cudnn_sdpa_workspace(plans), sc);
    return sc->bytes <= g_sel.scratch ? plans : nullptr; // the model allocated that much
}

// The seed of cuDNN's dropout mask for one call (its offset is 0): the run's seed with the
// iteration, layer, site, micro-batch's first sample and this rank's first head, so every call's
// mask differs and a call's forward and backward draw the same one.
int64_t seed_of(const mc_dropout_t *d, int head_offset)
{
    const uint64_t parts[6] = {d->seed, d->iteration, d->layer,
                               d->site, d->sample0,   (uint64_t)head_offset};
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint64_t x : parts) { // splitmix64 over each part
        h += x + 0x9E3779B97F4A7C15ull;
        h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
        h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
        h ^= h >> 31;
    }
    return (int64_t)(h >> 1);
}
#endif

#ifdef MC_WITH_CUDNN
// Grouped-query attention's query heads between qkv's layout [s, b, ng (qpg + 2) hd] and a dense
// [s, b, nh hd] (to_dense) or back; 16-bit elements, one thread per element.
__global__ void att_query_heads(uint16_t *dense, uint16_t *qkv, long n, int NH, int QPG, int HD,
                                int to_dense)
{
    const long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long row = i / ((long)NH * HD);
    const int h = (int)(i / HD % NH), e = (int)(i % HD);
    const long W = (long)(NH / QPG) * (QPG + 2) * HD;
    const long at = row * W + ((long)(h / QPG) * (QPG + 2) + h % QPG) * HD + e;
    if (to_dense) dense[i] = qkv[at];
    else qkv[at] = dense[i];
}

void query_heads(const mc_backend_t *be, void *dense, const void *qkv, int S, int B, int NH, int NG,
                 int HD, int to_dense)
{
    const long n = (long)S * B * NH * HD;
    MC_LAUNCH(mc_cuda_blocks(n, 256), 256, 0, mc_cuda_stream(be), att_query_heads)
    ((uint16_t *)dense, (uint16_t *)qkv, n, NH, NH / NG, HD, to_dense);
    MC_CUDA_LAUNCHED();
}
#endif

#ifdef MC_WITH_CUDNN
// The start-up line of context parallelism on cuDNN, naming what stays on the project's kernels.
void cp_line(const mc_attention_spec_t *s, const char *version, const char *choice, char *line,
             size_t n)
{
    char drops[192] = "";
    if (s->dropout > 0)
        snprintf(drops, sizeof(drops),
                 "; training calls with attention dropout %g on the project's kernels (their mask "
                 "is keyed by global positions)",
                 (double)s->dropout);
    snprintf(line, n,
             "cuDNN %s fused flash attention on context parallelism's attention (%s, head dim "
             "%d, %d heads over %d groups): p2p's ring blocks (the diagonals causal, the others "
             "unmasked, log-sum-exp statistics out for the merge, the backward from the merged "
             "output and statistics), all_gather's blocks (each query chunk against its prefix "
             "of keys, causal aligned bottom-right), a2a's whole-sequence causal attention of "
             "its heads%s (--attention-backend %s)",
             version, mc_dtype_name(s->dt), s->HD, s->NH, s->NG, drops, choice);
}
#endif

} // namespace

extern "C" void mc_cuda_attention_setup(const mc_backend_t *be, const mc_attention_spec_t *s,
                                        char *line, size_t n)
{
    g_sel = Selection{false, false, *s, 0};
    mc_cuda_cp_cudnn_setup(nullptr, nullptr, 0); // no blocks on cuDNN unless chosen below
    char why[768] = "";
    const char *no = mc_attention_cudnn_refusal(s, mc_cuda(be)->prop.major, why, sizeof(why));
    const char *choice = mc_attention_backend_name(s->backend);
#ifndef MC_WITH_CUDNN
    if (!no)
        no =
            "this megatron-c was built without cuDNN (no cudnn_graph.h and libcudnn under CUDNN_HOME)";
#else
    char version[32] = "?";
    if (!no && mc_cudnn_start(be, version, sizeof(version), why, sizeof(why)) != 0) no = why;
    // context parallelism: the blocks (a2a's whole sequence: sized later)
    if (!no && s->cp > 1) {
        no = mc_cuda_cp_cudnn_setup(s, why, sizeof(why));
        if (!no) {
            g_sel.cp_whole = true; // a2a's plans are built when the model sizes its scratch
            cp_line(s, version, choice, line, n);
            return;
        }
    }
    // the run's plans, once: training rows with the run's dropout, evaluation rows without
    const int rows[2] = {s->B, s->B_eval};
    const float drop[2] = {s->dropout, 0.0f};
    for (int i = 0; i < 2 && !no && s->cp <= 1; i++) {
        std::string w;
        const mc_sdpa_plans *p =
            mc_cudnn_sdpa_plans(key_of(s->dt, s->S, rows[i], s->NH, s->NG, s->HD, drop[i]), &w);
        if (!p) {
            snprintf(why, sizeof(why), "cuDNN %s refuses the shape: %s", version, w.c_str());
            no = why;
            break;
        }
        mc_attention_scratch_t sc;
        mc_attention_cudnn_scratch(s, rows[i], mc_cudnn_sdpa_workspace(p), &sc);
        if (sc.bytes > g_sel.scratch) g_sel.scratch = sc.bytes;
    }
    if (!no) {
        g_sel.cudnn = true;
        char drops[96] = "";
        if (s->dropout > 0)
            snprintf(drops, sizeof(drops),
                     ", dropout %g from cuDNN's generator (not the CPU's masks)",
                     (double)s->dropout);
        snprintf(
            line, n,
            "cuDNN %s fused flash attention (%s, head dim %d, %d heads over %d groups, causal%s; "
            "%.1f MiB of scratch; --attention-backend %s)",
            version, mc_dtype_name(s->dt), s->HD, s->NH, s->NG, drops,
            (double)g_sel.scratch / (1 << 20), choice);
        return;
    }
#endif
    snprintf(line, n, "the project's kernels: %s (--attention-backend %s)", no, choice);
}

extern "C" int mc_cuda_attention_uses_cudnn(mc_dtype_t dt, int S, int B, int NH, int NG, int HD,
                                            float p)
{
#ifdef MC_WITH_CUDNN
    mc_attention_scratch_t sc;
    return served(dt, S, B, NH, NG, HD, nullptr, p, &sc) != nullptr;
#else
    (void)dt, (void)S, (void)B, (void)NH, (void)NG, (void)HD, (void)p;
    return 0;
#endif
}

extern "C" void mc_cuda_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH,
                                        int HD, size_t *state_bytes, size_t *scratch_bytes)
{
    mc_flash_attention_sizes(be, dt, S, B, NH, HD, state_bytes, scratch_bytes);
    mc_attention_spec_t s = g_sel.spec;
#ifdef MC_WITH_CUDNN
    // a2a's whole-sequence calls (model/cp_attention.c sizes them): their plans, once
    if (s.cp > 1 && s.NG % s.cp == 0 && a2a_whole(dt, S, NH, s.NG / s.cp, HD, 0.0f) &&
        B <= max_rows(s)) {
        std::string why;
        const mc_sdpa_plans *p =
            mc_cudnn_sdpa_plans(key_of(dt, S, B, NH, s.NG / s.cp, HD, 0), &why);
        if (!p) return; // the project's kernels run them
        mc_attention_scratch_t sc;
        s.NH = NH, s.NG /= s.cp;
        mc_attention_cudnn_scratch(&s, B, mc_cudnn_sdpa_workspace(p), &sc);
        if (sc.bytes > g_sel.scratch) g_sel.scratch = sc.bytes;
        if (sc.bytes > *scratch_bytes) *scratch_bytes = sc.bytes;
        return;
    }
#endif
    if (g_sel.cudnn && dt == s.dt && S == s.S && NH == s.NH && HD == s.HD && B <= max_rows(s) &&
        g_sel.scratch > *scratch_bytes)
        *scratch_bytes = g_sel.scratch;
}

extern "C" void mc_cuda_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                          void *state, void *scratch, const void *qkv, int S, int B,
                                          int NH, int NG, int HD, const int32_t *segments,
                                          float scale, const mc_dropout_t *d, int head_offset,
                                          int NH_full)
{
    if (S <= 0 || B <= 0 || NH <= 0 || HD <= 0) return;
#ifdef MC_WITH_CUDNN
    mc_attention_scratch_t sc;
    const mc_sdpa_plans *p =
        served(dt, S, B, NH, NG, HD, segments, d && d->p > 0 ? d->p : 0.0f, &sc);
    if (p) {
        if (!scratch) mc_fatal("internal error: cuDNN's attention forward was given no scratch");
        mc_sdpa_call c = {};
        c.qkv = qkv, c.q = qkv, c.out = out, c.stats = (float *)state, c.scratch = scratch,
        c.scale = scale;
        c.seed = d && d->p > 0 ? seed_of(d, head_offset) : 0;
        if (NG != NH) {
            c.q = (char *)scratch + sc.q;
            query_heads(be, (void *)c.q, qkv, S, B, NH, NG, HD, 1);
        }
        mc_cudnn_sdpa_forward(be, p, c);
        return;
    }
#endif
    mc_cuda_local_attention_forward(be, dt, out, state, qkv, S, B, NH, NG, HD, segments, scale, d,
                                    head_offset, NH_full);
}

extern "C" void mc_cuda_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv,
                                           void *scratch, const void *dout, const void *qkv,
                                           const void *out, const void *state, int S, int B, int NH,
                                           int NG, int HD, const int32_t *segments, float scale,
                                           const mc_dropout_t *d, int head_offset, int NH_full)
{
    if (S <= 0 || B <= 0 || NH <= 0 || HD <= 0) return;
#ifdef MC_WITH_CUDNN
    mc_attention_scratch_t sc;
    const mc_sdpa_plans *p =
        served(dt, S, B, NH, NG, HD, segments, d && d->p > 0 ? d->p : 0.0f, &sc);
    if (p) {
        mc_sdpa_call c = {};
        c.qkv = qkv, c.q = qkv, c.out = (void *)out, c.dout = dout, c.stats = (float *)state;
        c.dqkv = dqkv, c.dq = dqkv, c.scratch = scratch, c.scale = scale;
        c.seed = d && d->p > 0 ? seed_of(d, head_offset) : 0;
        if (NG != NH) {
            c.q = (char *)scratch + sc.q, c.dq = (char *)scratch + sc.dq;
            query_heads(be, (void *)c.q, qkv, S, B, NH, NG, HD, 1);
        }
        mc_cudnn_sdpa_backward(be, p, c);
        if (NG != NH) query_heads(be, c.dq, dqkv, S, B, NH, NG, HD, 0);
        return;
    }
#endif
    mc_cuda_local_attention_backward(be, dt, dqkv, scratch, dout, qkv, out, state, S, B, NH, NG, HD,
                                     segments, scale, d, head_offset, NH_full);
}
