// nvcuda::wmma on the emulated device (test/emu): the m16n16k16 shape with fp16/bf16 inputs and
// an fp32 accumulator, which is all the kernels use. Each lane holds its eight elements of a
// fragment (the mapping is unspecified by CUDA; here lane l holds elements l, l + 32, ... of the
// tile in row-major order). load_matrix_sync, store_matrix_sync and mma_sync are warp
// collectives with CUDA's documented rules checked (CUDA C++ Programming Guide, "Warp Matrix
// Functions"): every lane of the warp calls them at the same call site with the same pointer,
// ldm and layout; the pointer is 256-bit aligned; ldm is a multiple of 16 bytes (8 16-bit
// elements, 4 floats). The product of two 16-bit values is exact in fp32, so mma_sync differs
// from a tensor core only in the order of its fp32 sums (here: C, then k = 0..15 in turn).
#ifndef MC_TEST_EMU_MMA_H
#define MC_TEST_EMU_MMA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "test/emu/emu.h"

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulation has the m16n16k16 shape only");
    static_assert(std::is_same<Use, accumulator>::value ? std::is_same<T, float>::value
                                                        : std::is_same<T, __half>::value ||
                                                              std::is_same<T, __nv_bfloat16>::value,
                  "inputs of fp16 or bf16, an fp32 accumulator");
    enum { num_elements = 8 };
    T x[num_elements];
};

namespace emu {
template <typename T> static inline float f32(T v) { return (float)v; }
static inline float f32(__half v) { return __half2float(v); }
static inline float f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// Element e of lane l is (r, c) = divmod(l + 32 e, 16) of the tile.
struct Access {
    void *frag;
    const void *ptr;
    unsigned ldm;
    int col; // column-major in memory
};

static inline void check(void *const *args, const char *what, size_t elem)
{
    const Access *a0 = (const Access *)args[0];
    for (int l = 1; l < 32; l++) {
        const Access *a = (const Access *)args[l];
        if (a->ptr != a0->ptr || a->ldm != a0->ldm || a->col != a0->col)
            mc_emu::fail("%s: lane %d passes pointer %p, ldm %u, layout %d; lane 0 %p, %u, %d (all lanes must agree)",
                         what, l, a->ptr, a->ldm, a->col, a0->ptr, a0->ldm, a0->col);
    }
    if ((uintptr_t)a0->ptr % 32)
        mc_emu::fail("%s: pointer %p is not 256-bit aligned", what, a0->ptr);
    if ((a0->ldm * elem) % 16)
        mc_emu::fail("%s: ldm %u is not a multiple of %zu elements (16 bytes)", what, a0->ldm, 16 / elem);
}

// Memory index of tile element (r, c) for a fragment of role Use stored with layout `col`.
// matrix_a is M x K (r = m, c = k), matrix_b K x N (r = k, c = n), the accumulator M x N.
static inline long index(int r, int c, unsigned ldm, int col) { return col ? (long)c * ldm + r : (long)r * ldm + c; }

template <typename Frag, typename T> static void load_op(void *const *args, void *)
{
    check(args, "wmma::load_matrix_sync", sizeof(T));
    for (int l = 0; l < 32; l++) {
        const Access *a = (const Access *)args[l];
        Frag *f = (Frag *)a->frag;
        for (int e = 0; e < 8; e++) {
            const int idx = l + 32 * e;
            f->x[e] = ((const T *)a->ptr)[index(idx / 16, idx % 16, a->ldm, a->col)];
        }
    }
}

template <typename Frag> static void store_op(void *const *args, void *)
{
    check(args, "wmma::store_matrix_sync", sizeof(float));
    for (int l = 0; l < 32; l++) {
        const Access *a = (const Access *)args[l];
        const Frag *f = (const Frag *)a->frag;
        for (int e = 0; e < 8; e++) {
            const int idx = l + 32 * e;
            ((float *)a->ptr)[index(idx / 16, idx % 16, a->ldm, a->col)] = f->x[e];
        }
    }
}

struct Mma {
    void *d;
    const void *a, *b, *c;
};

template <typename FA, typename FB, typename FC> static void mma_op(void *const *args, void *)
{
    float A[16][16], B[16][16], C[16][16];
    for (int l = 0; l < 32; l++) {
        const Mma *m = (const Mma *)args[l];
        for (int e = 0; e < 8; e++) {
            const int idx = l + 32 * e, r = idx / 16, c = idx % 16;
            A[r][c] = f32(((const FA *)m->a)->x[e]);
            B[r][c] = f32(((const FB *)m->b)->x[e]);
            C[r][c] = ((const FC *)m->c)->x[e];
        }
    }
    float D[16][16];
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) {
            float acc = C[r][c];
            for (int k = 0; k < 16; k++) acc += A[r][k] * B[k][c];
            D[r][c] = acc;
        }
    for (int l = 0; l < 32; l++)
        for (int e = 0; e < 8; e++) {
            const int idx = l + 32 * e;
            ((FC *)((const Mma *)args[l])->d)->x[e] = D[idx / 16][idx % 16];
        }
}
} // namespace emu

template <typename Use, typename T, typename Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p, unsigned ldm,
                                    const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load names its memory layout");
    emu::Access a = {&f, p, ldm, std::is_same<Layout, col_major>::value};
    mc_emu::warp_collective("wmma::load_matrix_sync", file, line, 0xffffffffu, &a,
                            emu::load_op<fragment<Use, 16, 16, 16, T, Layout>, T>, nullptr);
}

static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm,
                                    layout_t layout, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    emu::Access a = {&f, p, ldm, layout == mem_col_major};
    mc_emu::warp_collective("wmma::load_matrix_sync", file, line, 0xffffffffu, &a,
                            emu::load_op<fragment<accumulator, 16, 16, 16, float>, float>, nullptr);
}

static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm,
                                     layout_t layout, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    emu::Access a = {(void *)&f, p, ldm, layout == mem_col_major};
    mc_emu::warp_collective("wmma::store_matrix_sync", file, line, 0xffffffffu, &a,
                            emu::store_op<fragment<accumulator, 16, 16, 16, float>>, nullptr);
}

// Not a synchronising function in CUDA: each lane fills its own elements.
template <typename Use, typename T, typename Layout>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, T v)
{
    for (int e = 0; e < 8; e++) f.x[e] = v;
}

template <typename T, typename LA, typename LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c, const char *file = __builtin_FILE(),
                            int line = __builtin_LINE())
{
    emu::Mma m = {&d, &a, &b, &c};
    mc_emu::warp_collective("wmma::mma_sync", file, line, 0xffffffffu, &m,
                            emu::mma_op<fragment<matrix_a, 16, 16, 16, T, LA>, fragment<matrix_b, 16, 16, 16, T, LB>,
                                        fragment<accumulator, 16, 16, 16, float>>,
                            nullptr);
}

} // namespace wmma
} // namespace nvcuda

#endif
