// Scaled sparse propagation, one output row:
//
//     y[i, :] = a[i] * ( [self_loop] b[i] x[i, :]  +  sum_{k in row i} w_k x[col[k], :] )
//
// with w_k = b[j] (unweighted) or val[k] * b[j] (weighted), j = col[k].  The pieces below are
// __host__ __device__ (LDP_HD) and are called unchanged by csrc/cpu/propagate.cpp (a row's
// features in compile-time blocks of W, through accumulate) and csrc/cuda/propagate.cu (a
// group of lanes per row, W = 1..8 consecutive features per lane, through entry_weight / skips
// / axpy with the entries broadcast by shuffle), so both add, per output element, in the same
// order: self loop, then neighbours in CSR order, then one multiplication by a[i] (skipped
// when a[i] == 1).
// Entries with weight 0 are skipped (adds nothing but avoids 0 * inf = NaN from a masked
// node's row).  The CUDA launcher splits rows longer than its chunk size into fixed chunks
// whose partial sums are added in chunk order (see propagate.cu): only those rows are summed
// in a different order from the C++ build.
//
// Float32 on the GPU: CuPy compiles with -ftz=true, which turns a + b, a * b and a == 0 into
// their flush-to-zero forms (subnormals read and written as 0).  add / mul / is_zero / is_one
// below use the IEEE forms on the device (inline PTX without .ftz; .rn also forbids FMA
// contraction), so float32 results keep subnormals exactly as the C++ build does.
//
// Storage type S of x and y: T itself, or bf16 (S = Bf16, T = float, opt-in: half the bytes
// gathered, and propagation is memory bound).  A bf16 value widens to float exactly (a
// shift), the sums run in float as above, and each output element is rounded once to the
// nearest bf16 (ties to even; NaN -> 0x7FC0, as torch's BFloat16): so the bf16 result is
// exactly the float kernel's result on the widened x, rounded.
#pragma once
#include "philox.h"

namespace ldp {

struct Bf16 {
    unsigned short bits;  // (NVRTC has no <cstdint>: philox.h typedefs only the 32/64-bit types)
};

namespace prop {

// W consecutive values of S as one aligned object, so that a launcher can move a lane's
// features with one vector load / store (16 bytes at most: float x4, double x2, bf16 x8).
template <class S, int W>
struct alignas(sizeof(S) * W) Pack {
    S v[W];
};

LDP_HD double load(double v) { return v; }
LDP_HD float load(float v) { return v; }
LDP_HD float load(Bf16 v) {
    const uint32_t u = (uint32_t)v.bits << 16;
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
#endif
}
LDP_HD void store(double v, double* out) { *out = v; }
LDP_HD void store(float v, float* out) { *out = v; }
LDP_HD void store(float v, Bf16* out) {
#if defined(__CUDA_ARCH__)
    const uint32_t u = __float_as_uint(v);
#else
    uint32_t u;
    __builtin_memcpy(&u, &v, 4);
#endif
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        out->bits = 0x7fc0u;
    } else {
        out->bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

LDP_HD double add(double a, double b) { return a + b; }
LDP_HD double mul(double a, double b) { return a * b; }
LDP_HD bool is_zero(double v) { return v == 0.0; }
LDP_HD bool is_one(double v) { return v == 1.0; }

LDP_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a + b;
#endif
}
LDP_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a * b;
#endif
}
// Compared by bits on the device: setp.ftz would call a subnormal zero.
LDP_HD bool is_zero(float v) {
#if defined(__CUDA_ARCH__)
    return (__float_as_uint(v) << 1) == 0u;  // +0 or -0
#else
    return v == 0.0f;
#endif
}
LDP_HD bool is_one(float v) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(v) == 0x3f800000u;
#else
    return v == 1.0f;
#endif
}

// acc[0..W) = the self-loop term of features [f0, f0 + W) of row i (0 without self loop).
// UNIT_B: b is all ones (1 * x == x exactly, so it only saves the load).
template <int W, bool UNIT_B, class T, class S>
LDP_HD void self_term(T* acc, int64_t i, int64_t f0, int64_t d, const T* bs, const S* x, bool self_loop) {
    for (int t = 0; t < W; ++t) acc[t] = T(0);
    if (self_loop && (UNIT_B || !is_zero(bs[i]))) {
        const T w = UNIT_B ? T(1) : bs[i];
        const S* xi = x + i * d + f0;
        for (int t = 0; t < W; ++t) acc[t] = add(acc[t], mul(w, load(xi[t])));
    }
}

// The per-entry step, split so that a launcher may fetch the pieces its own way (the CUDA
// one reads col and the weight with one lane per entry, broadcasts them, and gathers x rows
// with vector loads) and still add exactly what accumulate() adds:
// * entry_weight: the factor w of entry k, j = col[k] (1 when PLAIN: unweighted, unit b);
// * skips: the entry adds nothing (w == 0, which also keeps 0 * inf = NaN out of the sum);
// * axpy: acc[t] += w * xj[t] for t in [0, W), in feature order (PLAIN: acc[t] += xj[t]).
template <bool UNIT_B, bool VAL, class T>
LDP_HD T entry_weight(int64_t k, int64_t j, const T* val, const T* bs) {
    // val[k] * 1 == val[k] exactly, so UNIT_B changes nothing but the load.
    if (VAL) return UNIT_B ? val[k] : mul(val[k], bs[j]);
    return UNIT_B ? T(1) : bs[j];
}
template <bool PLAIN, class T>
LDP_HD bool skips(T w) {
    return !PLAIN && is_zero(w);
}
template <int W, bool PLAIN, class T, class S>
LDP_HD void axpy(T* acc, T w, const S* xj) {
    if (PLAIN)
        for (int t = 0; t < W; ++t) acc[t] = add(acc[t], load(xj[t]));
    else
        for (int t = 0; t < W; ++t) acc[t] = add(acc[t], mul(w, load(xj[t])));
}

// acc[0..W) += the entries k in [k0, k1) of features [f0, f0 + W), in order.  hint(k) is
// called before entry k is read (the C++ launcher prefetches upcoming rows of x there).
template <int W, bool UNIT_B, bool VAL, class T, class S, class C, class Hint>
LDP_HD void accumulate(T* acc, int64_t k0, int64_t k1, int64_t f0, int64_t d, const C* col, const T* val,
                       const T* bs, const S* x, Hint hint) {
    constexpr bool PLAIN = !VAL && UNIT_B;
    for (int64_t k = k0; k < k1; ++k) {
        hint(k);
        const int64_t j = (int64_t)col[k];
        const T w = entry_weight<UNIT_B, VAL>(k, j, val, bs);
        if (skips<PLAIN>(w)) continue;
        axpy<W, PLAIN>(acc, w, x + j * d + f0);
    }
}

// y[i, f0 .. f0 + W) = acc * s (s == 1: acc itself), stored as S.
template <int W, class T, class S>
LDP_HD void finish(const T* acc, T s, S* yi) {
    if (!is_one(s))
        for (int t = 0; t < W; ++t) store(mul(acc[t], s), yi + t);
    else
        for (int t = 0; t < W; ++t) store(acc[t], yi + t);
}

}  // namespace prop
}  // namespace ldp
