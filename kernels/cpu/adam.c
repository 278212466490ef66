/* Adam with decoupled weight decay and bias correction (Apex/TE FusedAdam, adam_w_mode):
 *   m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 *   p -= lr * ((m / bc1) / (sqrt(v / bc2) + eps) + wd * p)
 * bc1 = 1 - b1^step and bc2 = 1 - b2^step are computed in double (as Python does before it hands
 * them to the fused kernel) and rounded to fp32; the per-element math is fp32, like the kernel,
 * four elements at a time (the tail zero-padded through the same vector code). The op takes a
 * list of tensors (backend.h). */
#include <math.h>

#include "kernels/cpu/cpu.h"

typedef struct {
    float lr, b1, b2, omb1, omb2, bc1, bc2, eps, wd;
} adam_k;

static inline void adam4(const adam_k *k, mc_v4f *p, mc_v4f g, mc_v4f *m, mc_v4f *v)
{
    const mc_v4f mi = k->b1 * *m + k->omb1 * g;
    const mc_v4f vi = k->b2 * *v + k->omb2 * g * g;
    const mc_v4f denom = mc_v4_sqrt(vi / k->bc2) + k->eps;
    const mc_v4f upd = (mi / k->bc1) / denom + k->wd * *p;
    *m = mi;
    *v = vi;
    *p = *p - k->lr * upd;
}

static void adam_tensor(const adam_k *k, float *p, const float *g, float *m, float *v, long n)
{
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        mc_v4f pv = mc_v4_load(p + i), mv = mc_v4_load(m + i), vv = mc_v4_load(v + i);
        adam4(k, &pv, mc_v4_load(g + i), &mv, &vv);
        mc_v4_store(p + i, pv);
        mc_v4_store(m + i, mv);
        mc_v4_store(v + i, vv);
    }
    if (i < n) {
        const int r = (int)(n - i);
        mc_v4f pv = mc_v4_load_part(p + i, r), mv = mc_v4_load_part(m + i, r),
               vv = mc_v4_load_part(v + i, r);
        adam4(k, &pv, mc_v4_load_part(g + i, r), &mv, &vv);
        mc_v4_store_part(p + i, pv, r);
        mc_v4_store_part(m + i, mv, r);
        mc_v4_store_part(v + i, vv, r);
    }
}

/* The list in order, each tensor updated and then copied (rounded) to the model: on the CPU
 * there is no launch to save, and this keeps the master params in cache for the copy. */
void mc_cpu_adam_step(const mc_backend_t *be, const mc_adam_tensor_t *t, int count,
                      mc_dtype_t model_dt, float lr, float beta1, float beta2, float eps, int step)
{
    adam_k k = {
        .lr = lr,
        .b1 = beta1,
        .b2 = beta2,
        .omb1 = 1.0f - beta1,
        .omb2 = 1.0f - beta2,
        .bc1 = (float)(1.0 - pow((double)beta1, (double)step)),
        .bc2 = (float)(1.0 - pow((double)beta2, (double)step)),
        .eps = eps,
    };
    for (int i = 0; i < count; i++) {
        if (t[i].n <= 0) continue;
        k.wd = t[i].wd;
        adam_tensor(&k, t[i].p, t[i].g, t[i].m, t[i].v, t[i].n);
        if (t[i].model) mc_cpu_convert(be, t[i].model, model_dt, t[i].p, MC_DT_F32, t[i].n);
    }
}
