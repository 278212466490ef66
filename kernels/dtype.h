/* Element types of tensors and messages, and the host conversions between fp32 and the 16-bit
 * formats (DESIGN decision 7). The conversions round to nearest even, keep NaN a NaN and
 * overflow to infinity, as CUDA's __float2bfloat16_rn / __float2half_rn do, so the CPU backend's
 * 16-bit storage gives the values a GPU stores. */
#ifndef MC_KERNELS_DTYPE_H
#define MC_KERNELS_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The conversions below are host and device code (the MoE routing math of kernels/moe_route.h
 * runs the same on both). */
#ifndef MC_HD
#ifdef __CUDACC__
#define MC_HD __host__ __device__ static inline
#else
#define MC_HD static inline
#endif
#endif

typedef enum {
    MC_DT_F32,
    MC_DT_F64,
    MC_DT_I64,
    MC_DT_I32,
    MC_DT_U8,
    MC_DT_BF16,
    MC_DT_F16
} mc_dtype_t;

size_t mc_dtype_size(mc_dtype_t dt);
/* "fp32", "bf16", "fp16", ... for messages and the memory plan. */
const char *mc_dtype_name(mc_dtype_t dt);
static inline int mc_dtype_is_16bit(mc_dtype_t dt) { return dt == MC_DT_BF16 || dt == MC_DT_F16; }

/* Element i of a buffer of type dt. */
static inline void *mc_elem(void *base, mc_dtype_t dt, long i)
{
    return base ? (char *)base + (size_t)i * mc_dtype_size(dt) : NULL;
}
static inline const void *mc_celem(const void *base, mc_dtype_t dt, long i)
{
    return base ? (const char *)base + (size_t)i * mc_dtype_size(dt) : NULL;
}

MC_HD uint32_t mc_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
MC_HD float mc_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

MC_HD uint16_t mc_bf16_from_f32(float x)
{
    uint32_t u = mc_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflows into inf */
    return (uint16_t)(u >> 16);
}
MC_HD float mc_f32_from_bf16(uint16_t h) { return mc_bits_f32((uint32_t)h << 16); }

/* IEEE binary16: 5 exponent bits (bias 15), 10 mantissa bits, subnormals below 2^-14. */
MC_HD uint16_t mc_f16_from_f32(float x)
{
    uint32_t u = mc_f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a >= 0x38800000u) { /* normal: rebias the exponent, round the 13 dropped bits */
        uint32_t r = a - 0x38000000u;
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a < 0x33000000u) return sign; /* below half the smallest subnormal: zero */
    /* subnormal: the value in units of 2^-24, rounded to nearest even */
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    int shift = 126 - (int)(a >> 23); /* 14..24 */
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}
MC_HD float mc_f32_from_f16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return mc_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24 */
        float v = (float)m * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return mc_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* Element i of a floating-point buffer of type dt (F32, BF16 or F16), as fp32. */
static inline float mc_load_f32(const void *p, mc_dtype_t dt, long i)
{
    if (dt == MC_DT_BF16) return mc_f32_from_bf16(((const uint16_t *)p)[i]);
    if (dt == MC_DT_F16) return mc_f32_from_f16(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
static inline void mc_store_f32(void *p, mc_dtype_t dt, long i, float x)
{
    if (dt == MC_DT_BF16) ((uint16_t *)p)[i] = mc_bf16_from_f32(x);
    else if (dt == MC_DT_F16) ((uint16_t *)p)[i] = mc_f16_from_f32(x);
    else ((float *)p)[i] = x;
}
/* x rounded to dt and back (the value a 16-bit buffer would hold). */
static inline float mc_round_to(mc_dtype_t dt, float x)
{
    if (dt == MC_DT_BF16) return mc_f32_from_bf16(mc_bf16_from_f32(x));
    if (dt == MC_DT_F16) return mc_f32_from_f16(mc_f16_from_f32(x));
    return x;
}

/* dst[0..n) of type ddt = src[0..n) of type sdt (floating types; rounds to nearest even).
 * dst and src may be the same buffer when the types have the same size, or to narrow fp32 to a
 * 16-bit type in place (element i is read before anything at or after it is written). */
void mc_convert(void *dst, mc_dtype_t ddt, const void *src, mc_dtype_t sdt, long n);

#endif
