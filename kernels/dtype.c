/* Element types (kernels/dtype.h). */
#include "kernels/dtype.h"

size_t mc_dtype_size(mc_dtype_t dt)
{
    switch (dt) {
    case MC_DT_F32: return 4;
    case MC_DT_F64: return 8;
    case MC_DT_I64: return 8;
    case MC_DT_I32: return 4;
    case MC_DT_U8: return 1;
    case MC_DT_BF16: return 2;
    case MC_DT_F16: return 2;
    }
    return 0;
}

const char *mc_dtype_name(mc_dtype_t dt)
{
    switch (dt) {
    case MC_DT_F32: return "fp32";
    case MC_DT_F64: return "fp64";
    case MC_DT_I64: return "int64";
    case MC_DT_I32: return "int32";
    case MC_DT_U8: return "uint8";
    case MC_DT_BF16: return "bf16";
    case MC_DT_F16: return "fp16";
    }
    return "unknown";
}

void mc_convert(void *dst, mc_dtype_t ddt, const void *src, mc_dtype_t sdt, long n)
{
    if (n <= 0) return;
    if (ddt == sdt) {
        if (dst != src) memmove(dst, src, (size_t)n * mc_dtype_size(ddt));
        return;
    }
    if (sdt == MC_DT_F32 && ddt == MC_DT_BF16) {
        const float *s = src;
        uint16_t *d = dst;
        for (long i = 0; i < n; i++) d[i] = mc_bf16_from_f32(s[i]);
    } else if (sdt == MC_DT_BF16 && ddt == MC_DT_F32) {
        const uint16_t *s = src;
        float *d = dst;
        for (long i = 0; i < n; i++) d[i] = mc_f32_from_bf16(s[i]);
    } else {
        for (long i = 0; i < n; i++) mc_store_f32(dst, ddt, i, mc_load_f32(src, sdt, i));
    }
}
