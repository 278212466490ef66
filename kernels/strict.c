/* The strict backend, a test double for a GPU: the CPU backend's arithmetic (bit for bit) on
 * memory the host cannot touch. Each allocation is a memfd mapped twice: the pointer handed out
 * is a PROT_NONE view, so model, optimizer, checkpoint or comm code that reads or writes a
 * tensor on the host instead of through the op table (which would read garbage or crash on a
 * GPU) dies with SIGSEGV here; the ops translate their pointers to the writable view. An op given
 * a host pointer where the table wants device memory stops with one line naming the op. Its name
 * is not "cpu", so every "is this host memory" branch takes the device path, and the comm layer
 * stages its buffers through mc_devmem_t as for CUDA.
 *
 * Chosen instead of the cpu backend when MC_TEST_STRICT_DEVICE=1 (tests only:
 * test/integration/test_strict.sh). */
#define _GNU_SOURCE /* memfd_create */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"
#include "kernels/memstats.h"
#include "kernels/device.h"

typedef struct {
    char *dev, *host; /* the PROT_NONE view handed out, and the writable one */
    size_t bytes;     /* mapped length (whole pages) */
} region_t;

static region_t *g_reg; /* sorted by dev */
static int g_n, g_cap;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* The region holding p (one past its end included: an empty tensor at the end), or -1. Under g_mu. */
static int find(const void *p)
{
    int lo = 0, hi = g_n - 1;
    const char *c = p;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < g_reg[mid].dev) hi = mid - 1;
        else if (c > g_reg[mid].dev + g_reg[mid].bytes) lo = mid + 1;
        else return mid;
    }
    return -1;
}

int mc_strict_owns(const void *p)
{
    if (!p) return 0;
    pthread_mutex_lock(&g_mu);
    int i = find(p);
    pthread_mutex_unlock(&g_mu);
    return i >= 0;
}

/* The writable view of device pointer p; NULL stays NULL; a host pointer is fatal. */
static void *T(const void *p, const char *op)
{
    if (!p) return NULL;
    pthread_mutex_lock(&g_mu);
    int i = find(p);
    char *h = i >= 0 ? g_reg[i].host + ((const char *)p - g_reg[i].dev) : NULL;
    pthread_mutex_unlock(&g_mu);
    if (!h)
        mc_fatal(
            "strict device: %s was given host memory %p where the op table wants device memory", op,
            p);
    return h;
}

void *mc_strict_view(const void *p, const char *op) { return T(p, op); }

static void host_only(const void *p, const char *op)
{
    if (mc_strict_owns(p))
        mc_fatal("strict device: %s was given device memory %p where it wants host memory", op, p);
}

static const mc_backend_t *cpu(void) { return mc_backend_cpu(); }

/* ---- memory ---- */

static void *s_alloc(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t len =
        (bytes + page - 1) / page * page + page; /* + a page: one past the end stays inside */
    int fd = memfd_create("mc-strict", MFD_CLOEXEC);
    if (fd < 0) return NULL;
    if (ftruncate(fd, (off_t)len) != 0) {
        close(fd);
        return NULL;
    }
    char *dev = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
    char *host =
        dev == MAP_FAILED ? MAP_FAILED : mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (dev == MAP_FAILED || host == MAP_FAILED) {
        if (dev != MAP_FAILED) munmap(dev, len);
        return NULL;
    }
    pthread_mutex_lock(&g_mu);
    if (g_n == g_cap) {
        int cap = g_cap ? 2 * g_cap : 64;
        region_t *r = realloc(g_reg, (size_t)cap * sizeof(*r));
        if (!r) mc_fatal("out of host memory");
        g_reg = r, g_cap = cap;
    }
    int at = 0;
    while (at < g_n && g_reg[at].dev < dev) at++;
    memmove(&g_reg[at + 1], &g_reg[at], (size_t)(g_n - at) * sizeof(*g_reg));
    g_reg[at] = (region_t){dev, host, len - page};
    g_n++;
    pthread_mutex_unlock(&g_mu);
    mc_memstats_alloc(dev, bytes);
    return dev; /* memfd pages read as zero: zero-filled as the table promises */
}

static void s_free(const mc_backend_t *be, void *p)
{
    (void)be;
    if (!p) return;
    pthread_mutex_lock(&g_mu);
    int i = find(p);
    if (i < 0 || g_reg[i].dev != (char *)p) {
        pthread_mutex_unlock(&g_mu);
        mc_fatal("strict device: free of %p, which alloc did not return", p);
    }
    region_t r = g_reg[i];
    memmove(&g_reg[i], &g_reg[i + 1], (size_t)(g_n - i - 1) * sizeof(*g_reg));
    g_n--;
    pthread_mutex_unlock(&g_mu);
    mc_memstats_free(p);
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    munmap(r.dev, r.bytes + page);
    munmap(r.host, r.bytes + page);
}

static void s_h2d(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    host_only(src, "memcpy_h2d's source");
    if (bytes) memcpy(T(dst, "memcpy_h2d"), src, bytes);
}

static void s_d2h(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    host_only(dst, "memcpy_d2h's destination");
    if (bytes) memcpy(dst, T(src, "memcpy_d2h"), bytes);
}

/* Host memory for the asynchronous copies: plain host memory (the copies are done on return) */
static void *s_alloc_host(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    return malloc(bytes ? bytes : 1);
}

static void s_free_host(const mc_backend_t *be, void *p)
{
    (void)be;
    host_only(p, "free_host");
    free(p);
}

static void s_d2d(const mc_backend_t *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (bytes) memmove(T(dst, "memcpy_d2d"), T(src, "memcpy_d2d"), bytes);
}

static void s_memset0(const mc_backend_t *be, void *p, size_t bytes)
{
    (void)be;
    if (bytes) memset(T(p, "memset0"), 0, bytes);
}

static void s_sync(const mc_backend_t *be) { (void)be; }

/* ---- the ops: pointers translated, then the CPU's op ---- */

#define D(p) T((p), __func__ + 2)

static void s_convert(const mc_backend_t *be, void *dst, mc_dtype_t ddt, const void *src,
                      mc_dtype_t sdt, long n)
{
    (void)be;
    cpu()->convert(cpu(), D(dst), ddt, D(src), sdt, n);
}

static void s_gemm(const mc_backend_t *be, int ta, int tb, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    (void)be;
    cpu()->gemm(cpu(), ta, tb, M, N, K, alpha, D(A), lda, D(B), ldb, beta, D(C), ldc);
}

static void s_linear_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *in,
                             const void *W, const void *bias, int N, int in_f, int out_f)
{
    (void)be;
    cpu()->linear_forward(cpu(), dt, D(out), D(in), D(W), D(bias), N, in_f, out_f);
}

static void s_linear_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                              void *dW, void *dbias, const void *dout, const void *in,
                              const void *W, int N, int in_f, int out_f)
{
    (void)be;
    cpu()->linear_backward(cpu(), dt, gdt, D(din), D(dW), D(dbias), D(dout), D(in), D(W), N, in_f,
                           out_f);
}

static void s_linear_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *act, void *pre,
                                  const void *in, const void *W, const void *bias, int N, int in_f,
                                  int out_f, mc_act_t activation)
{
    (void)be;
    cpu()->linear_gelu_forward(cpu(), dt, D(act), D(pre), D(in), D(W), D(bias), N, in_f, out_f,
                               activation);
}

static void s_linear_backward_gelu(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *din,
                                   void *dW, void *dbias, const void *dout, const void *act,
                                   const void *W, const void *pre, int N, int in_f, int out_f,
                                   mc_act_t activation)
{
    (void)be;
    cpu()->linear_backward_gelu(cpu(), dt, gdt, D(din), D(dW), D(dbias), D(dout), D(act), D(W),
                                D(pre), N, in_f, out_f, activation);
}

static void s_embedding_forward(const mc_backend_t *be, mc_dtype_t dt, void *out,
                                const int32_t *tokens, const int32_t *positions, const void *wte,
                                const void *wpe, int S, int B, int H, int vocab_start, int V)
{
    (void)be;
    cpu()->embedding_forward(cpu(), dt, D(out), D(tokens), D(positions), D(wte), D(wpe), S, B, H,
                             vocab_start, V);
}

static void s_embedding_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dwte,
                                 void *dwpe, const void *dout, const int32_t *tokens,
                                 const int32_t *positions, int S, int B, int H, int vocab_start,
                                 int V)
{
    (void)be;
    cpu()->embedding_backward(cpu(), dt, gdt, D(dwte), D(dwpe), D(dout), D(tokens), D(positions), S,
                              B, H, vocab_start, V);
}

static void s_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                                float *rstd, const void *x, const void *w, const void *b, int N,
                                int C, float eps)
{
    (void)be;
    cpu()->layernorm_forward(cpu(), dt, D(out), D(mean), D(rstd), D(x), D(w), D(b), N, C, eps);
}

static void s_add_layernorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                    float *mean, float *rstd, const void *a, const void *b,
                                    const void *w, const void *bias, int N, int C, float eps)
{
    (void)be;
    cpu()->add_layernorm_forward(cpu(), dt, D(sum), D(out), D(mean), D(rstd), D(a), D(b), D(w),
                                 D(bias), N, C, eps);
}

static void s_layernorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt,
                                     void *dx, void *dw, void *db, const void *dout, const void *x,
                                     const void *w, const float *mean, const float *rstd, int N,
                                     int C)
{
    (void)be;
    cpu()->layernorm_backward_acc(cpu(), dt, gdt, D(dx), D(dw), D(db), D(dout), D(x), D(w), D(mean),
                                  D(rstd), N, C);
}

static void s_gelu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, long n,
                           mc_act_t act)
{
    (void)be;
    cpu()->gelu_forward(cpu(), dt, D(out), D(x), n, act);
}

static void s_gelu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                            const void *x, long n, mc_act_t act)
{
    (void)be;
    cpu()->gelu_backward(cpu(), dt, D(dx), D(dout), D(x), n, act);
}

/* ---- the Llama block: RMSNorm and SwiGLU ---- */

static void s_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *rstd,
                              const void *x, const void *w, int N, int C, float eps)
{
    (void)be;
    cpu()->rmsnorm_forward(cpu(), dt, D(out), D(rstd), D(x), D(w), N, C, eps);
}

static void s_add_rmsnorm_forward(const mc_backend_t *be, mc_dtype_t dt, void *sum, void *out,
                                  float *rstd, const void *a, const void *b, const void *w, int N,
                                  int C, float eps)
{
    (void)be;
    cpu()->add_rmsnorm_forward(cpu(), dt, D(sum), D(out), D(rstd), D(a), D(b), D(w), N, C, eps);
}

static void s_rmsnorm_backward_acc(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dx,
                                   void *dw, const void *dout, const void *x, const void *w,
                                   const float *rstd, int N, int C)
{
    (void)be;
    cpu()->rmsnorm_backward_acc(cpu(), dt, gdt, D(dx), D(dw), D(dout), D(x), D(w), D(rstd), N, C);
}

static void s_rope(const mc_backend_t *be, mc_dtype_t dt, void *qkv, const float *cos_t,
                   const float *sin_t, int S, int B, int NG, int QPG, int HD, int rot_dim,
                   int interleaved, int inverse)
{
    (void)be;
    cpu()->rope(cpu(), dt, D(qkv), D(cos_t), D(sin_t), S, B, NG, QPG, HD, rot_dim, interleaved,
                inverse);
}

static void s_qk_norm_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, float *mean,
                              float *rstd, const void *x, const void *wq, const void *bq,
                              const void *wk, const void *bk, int rows, int NG, int QPG, int HD,
                              float eps, int rms)
{
    (void)be;
    cpu()->qk_norm_forward(cpu(), dt, D(out), D(mean), D(rstd), D(x), D(wq), D(bq), D(wk), D(bk),
                           rows, NG, QPG, HD, eps, rms);
}

static void s_qk_norm_backward(const mc_backend_t *be, mc_dtype_t dt, mc_dtype_t gdt, void *dqkv,
                               void *dwq, void *dbq, void *dwk, void *dbk, const void *x,
                               const void *wq, const void *wk, const float *mean, const float *rstd,
                               int rows, int NG, int QPG, int HD, int rms)
{
    (void)be;
    cpu()->qk_norm_backward(cpu(), dt, gdt, D(dqkv), D(dwq), D(dbq), D(dwk), D(dbk), D(x), D(wq),
                            D(wk), D(mean), D(rstd), rows, NG, QPG, HD, rms);
}

static void s_swiglu_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x, int N,
                             int F)
{
    (void)be;
    cpu()->swiglu_forward(cpu(), dt, D(out), D(x), N, F);
}

static void s_swiglu_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                              const void *x, int N, int F)
{
    (void)be;
    cpu()->swiglu_backward(cpu(), dt, D(dx), D(dout), D(x), N, F);
}

static void s_dropout_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *x,
                              const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                              int inner_full, int inner_offset)
{
    (void)be;
    host_only(d, "dropout_forward's key");
    cpu()->dropout_forward(cpu(), dt, D(out), D(x), d, d0, B, inner, d0_offset, inner_full,
                           inner_offset);
}

static void s_dropout_backward(const mc_backend_t *be, mc_dtype_t dt, void *dx, const void *dout,
                               const mc_dropout_t *d, int d0, int B, int inner, int d0_offset,
                               int inner_full, int inner_offset)
{
    (void)be;
    host_only(d, "dropout_backward's key");
    cpu()->dropout_backward(cpu(), dt, D(dx), D(dout), d, d0, B, inner, d0_offset, inner_full,
                            inner_offset);
}

static void s_attention_forward(const mc_backend_t *be, mc_dtype_t dt, void *out, void *state,
                                void *scratch, const void *qkv, int S, int B, int NH, int NG,
                                int HD, const int32_t *segments, float scale, const mc_dropout_t *d,
                                int head_offset, int NH_full)
{
    (void)be;
    host_only(d, "attention_forward's dropout key");
    cpu()->attention_forward(cpu(), dt, D(out), D(state), D(scratch), D(qkv), S, B, NH, NG, HD,
                             D(segments), scale, d, head_offset, NH_full);
}

static void s_attention_backward(const mc_backend_t *be, mc_dtype_t dt, void *dqkv, void *scratch,
                                 const void *dout, const void *qkv, const void *out,
                                 const void *state, int S, int B, int NH, int NG, int HD,
                                 const int32_t *segments, float scale, const mc_dropout_t *d,
                                 int head_offset, int NH_full)
{
    (void)be;
    host_only(d, "attention_backward's dropout key");
    cpu()->attention_backward(cpu(), dt, D(dqkv), D(scratch), D(dout), D(qkv), D(out), D(state), S,
                              B, NH, NG, HD, D(segments), scale, d, head_offset, NH_full);
}

static void s_attention_sizes(const mc_backend_t *be, mc_dtype_t dt, int S, int B, int NH, int HD,
                              size_t *state_bytes, size_t *scratch_bytes)
{
    (void)be;
    cpu()->attention_sizes(cpu(), dt, S, B, NH, HD, state_bytes, scratch_bytes);
}

static void s_attention_block_forward(const mc_backend_t *be, mc_dtype_t dt, float *out, float *lse,
                                      void *scratch, const void *qkv, const void *kv, int Sq,
                                      int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                      int S_full, int mask, float scale, const mc_dropout_t *d,
                                      int head_offset, int NH_full)
{
    (void)be;
    host_only(d, "attention_block_forward's dropout key");
    cpu()->attention_block_forward(cpu(), dt, D(out), D(lse), D(scratch), D(qkv), D(kv), Sq, Sk, B,
                                   NH, NG, HD, q_pos, k_pos, S_full, mask, scale, d, head_offset,
                                   NH_full);
}

static void s_attention_lse_merge(const mc_backend_t *be, float *out, float *lse, const float *part,
                                  const float *part_lse, long rows, int NH, int HD)
{
    (void)be;
    cpu()->attention_lse_merge(cpu(), D(out), D(lse), D(part), D(part_lse), rows, NH, HD);
}

static void s_attention_block_backward(const mc_backend_t *be, mc_dtype_t dt, float *dq, float *dkv,
                                       void *scratch, const void *dout, const void *qkv,
                                       const void *kv, const void *out, const float *lse, int Sq,
                                       int Sk, int B, int NH, int NG, int HD, int q_pos, int k_pos,
                                       int S_full, int mask, float scale, const mc_dropout_t *d,
                                       int head_offset, int NH_full)
{
    (void)be;
    host_only(d, "attention_block_backward's dropout key");
    cpu()->attention_block_backward(cpu(), dt, D(dq), D(dkv), D(scratch), D(dout), D(qkv), D(kv),
                                    D(out), D(lse), Sq, Sk, B, NH, NG, HD, q_pos, k_pos, S_full,
                                    mask, scale, d, head_offset, NH_full);
}

static void s_attention_block_sizes(const mc_backend_t *be, mc_dtype_t dt, int Sq, int Sk, int B,
                                    int NH, int HD, size_t *fwd_scratch, size_t *bwd_scratch)
{
    (void)be;
    cpu()->attention_block_sizes(cpu(), dt, Sq, Sk, B, NH, HD, fwd_scratch, bwd_scratch);
}

static void s_copy_2d(const mc_backend_t *be, void *dst, mc_dtype_t ddt, long ld_dst,
                      const void *src, mc_dtype_t sdt, long ld_src, long rows, long cols)
{
    (void)be;
    cpu()->copy_2d(cpu(), D(dst), ddt, ld_dst, D(src), sdt, ld_src, rows, cols);
}

static void s_ce_max(const mc_backend_t *be, mc_dtype_t dt, float *rowmax, const void *logits,
                     int N, int V)
{
    (void)be;
    cpu()->ce_max(cpu(), dt, D(rowmax), D(logits), N, V);
}

static void s_ce_sums(const mc_backend_t *be, mc_dtype_t dt, float *sumexp, float *target_logit,
                      const void *logits, const float *rowmax, const int32_t *targets, int S, int B,
                      int V, int vocab_start)
{
    (void)be;
    cpu()->ce_sums(cpu(), dt, D(sumexp), D(target_logit), D(logits), D(rowmax), D(targets), S, B, V,
                   vocab_start);
}

static void s_ce_loss(const mc_backend_t *be, float *losses, const float *rowmax,
                      const float *sumexp, const float *target_logit, int S, int B)
{
    (void)be;
    cpu()->ce_loss(cpu(), D(losses), D(rowmax), D(sumexp), D(target_logit), S, B);
}

static void s_ce_backward(const mc_backend_t *be, mc_dtype_t dt, void *dlogits, const void *logits,
                          const float *rowmax, const float *sumexp, const int32_t *targets,
                          const float *dloss, int S, int B, int V, int vocab_start)
{
    (void)be;
    cpu()->ce_backward(cpu(), dt, D(dlogits), D(logits), D(rowmax), D(sumexp), D(targets), D(dloss),
                       S, B, V, vocab_start);
}

static void s_ce_fused(const mc_backend_t *be, mc_dtype_t dt, float *losses, void *logits,
                       const float *rowmax, const float *sumexp, const float *target_logit,
                       const int32_t *targets, const float *loss_mask, float grad_scale, int S,
                       int B, int V, int vocab_start)
{
    (void)be;
    cpu()->ce_fused(cpu(), dt, D(losses), D(logits), D(rowmax), D(sumexp), D(target_logit),
                    D(targets), D(loss_mask), grad_scale, S, B, V, vocab_start);
}

static void s_add(const mc_backend_t *be, mc_dtype_t dt, void *out, const void *a, const void *b,
                  long n)
{
    (void)be;
    cpu()->add(cpu(), dt, D(out), D(a), D(b), n);
}

static void s_add_inplace(const mc_backend_t *be, mc_dtype_t dt, void *acc, const void *x, long n)
{
    (void)be;
    cpu()->add_inplace(cpu(), dt, D(acc), D(x), n);
}

static void s_scale(const mc_backend_t *be, mc_dtype_t dt, void *x, float s, long n)
{
    (void)be;
    cpu()->scale(cpu(), dt, D(x), s, n);
}

static double s_sumsq(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    (void)be;
    return cpu()->sumsq(cpu(), dt, D(x), n);
}

static void s_sumsq_multi(const mc_backend_t *be, mc_dtype_t dt, const void *const *x,
                          const long *n, int count, double *out)
{
    (void)be;
    host_only(x, "sumsq_multi's list"), host_only(out, "sumsq_multi's results");
    const void **h = malloc((size_t)(count > 0 ? count : 1) * sizeof(*h));
    if (!h) mc_fatal("out of host memory");
    for (int i = 0; i < count; i++) h[i] = D(x[i]);
    cpu()->sumsq_multi(cpu(), dt, h, n, count, out);
    free(h);
}

static long s_count_zeros(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    (void)be;
    return cpu()->count_zeros(cpu(), dt, D(x), n);
}

static int s_has_nonfinite(const mc_backend_t *be, mc_dtype_t dt, const void *x, long n)
{
    (void)be;
    return cpu()->has_nonfinite(cpu(), dt, D(x), n);
}

static void s_adam_step(const mc_backend_t *be, const mc_adam_tensor_t *t, int count,
                        mc_dtype_t model_dt, float lr, float beta1, float beta2, float eps,
                        int step)
{
    (void)be;
    host_only(t, "adam_step's list");
    mc_adam_tensor_t *h = malloc((size_t)(count > 0 ? count : 1) * sizeof(*h));
    if (!h) mc_fatal("out of host memory");
    for (int i = 0; i < count; i++)
        h[i] = (mc_adam_tensor_t){.p = D(t[i].p),
                                  .g = D(t[i].g),
                                  .m = D(t[i].m),
                                  .v = D(t[i].v),
                                  .model = D(t[i].model),
                                  .n = t[i].n,
                                  .wd = t[i].wd};
    cpu()->adam_step(cpu(), h, count, model_dt, lr, beta1, beta2, eps, step);
    free(h);
}

#undef D

extern const struct mc_moe_ops mc_strict_moe_ops; /* kernels/strict_moe.c */

/* Its memory told apart by address; plain host memory for staging. */
static int s_is_device(const mc_backend_t *be, const void *p)
{
    (void)be;
    return mc_strict_owns(p);
}

static void *s_pinned_alloc(const mc_backend_t *be, size_t bytes)
{
    (void)be;
    return malloc(bytes ? bytes : 1);
}

static void s_pinned_free(const mc_backend_t *be, void *p)
{
    (void)be;
    free(p);
}

const mc_backend_t *mc_backend_strict(void)
{
    static const mc_backend_t be = {
        .name = "strict",
        .device_memory = true,
        .gpu = -1,
        .alloc = s_alloc,
        .free = s_free,
        .memcpy_h2d = s_h2d,
        .memcpy_d2h = s_d2h,
        .memcpy_d2d = s_d2d,
        .memset0 = s_memset0,
        .synchronize = s_sync,
        .alloc_host = s_alloc_host,
        .free_host = s_free_host,
        .memcpy_h2d_async = s_h2d,
        .memcpy_d2h_async = s_d2h,
        .convert = s_convert,
        .gemm = s_gemm,
        .linear_forward = s_linear_forward,
        .linear_backward = s_linear_backward,
        .linear_gelu_forward = s_linear_gelu_forward,
        .linear_backward_gelu = s_linear_backward_gelu,
        .embedding_forward = s_embedding_forward,
        .embedding_backward = s_embedding_backward,
        .layernorm_forward = s_layernorm_forward,
        .add_layernorm_forward = s_add_layernorm_forward,
        .layernorm_backward_acc = s_layernorm_backward_acc,
        .gelu_forward = s_gelu_forward,
        .gelu_backward = s_gelu_backward,
        .rmsnorm_forward = s_rmsnorm_forward,
        .add_rmsnorm_forward = s_add_rmsnorm_forward,
        .rmsnorm_backward_acc = s_rmsnorm_backward_acc,
        .rope = s_rope,
        .qk_norm_forward = s_qk_norm_forward,
        .qk_norm_backward = s_qk_norm_backward,
        .swiglu_forward = s_swiglu_forward,
        .swiglu_backward = s_swiglu_backward,
        .dropout_forward = s_dropout_forward,
        .dropout_backward = s_dropout_backward,
        .attention_forward = s_attention_forward,
        .attention_backward = s_attention_backward,
        .attention_sizes = s_attention_sizes,
        .attention_block_forward = s_attention_block_forward,
        .attention_lse_merge = s_attention_lse_merge,
        .attention_block_backward = s_attention_block_backward,
        .attention_block_sizes = s_attention_block_sizes,
        .copy_2d = s_copy_2d,
        .ce_max = s_ce_max,
        .ce_sums = s_ce_sums,
        .ce_loss = s_ce_loss,
        .ce_backward = s_ce_backward,
        .ce_fused = s_ce_fused,
        .add = s_add,
        .add_inplace = s_add_inplace,
        .scale = s_scale,
        .sumsq = s_sumsq,
        .sumsq_multi = s_sumsq_multi,
        .count_zeros = s_count_zeros,
        .has_nonfinite = s_has_nonfinite,
        .adam_step = s_adam_step,
        .moe = &mc_strict_moe_ops,
        .is_device = s_is_device,
        .pinned_alloc = s_pinned_alloc,
        .pinned_free = s_pinned_free,
    };
    return &be;
}
