// First hop of RGNN's feature reconstruction (paper 000, Algorithm 1, lines 5-11) straight from
// the GRR-FS reports: per-node category counts over {v} u N(v), for a block of features.
//
// The reports of a feature block arrive as indicator bytes e (n x w uint8, e[u, c] = 1 when
// node u reported the value of column c: the values 1 .. gamma_i - 1 of each feature, value 0
// implied, the layout of the one-hot propagation in ldpfast/methods/rgnn.py), built per block,
// so no n x sum(gamma_i - 1) float matrix ever exists.  A row's output is
//
//     y[i, c] = a[i] * count[i, c],   count = e[i, c] (self loop) + sum over CSR row i of e[j, c]
//
// counted in integers and converted once.  That is bit for bit what the float one-hot
// propagation (csrc/common/propagate.h, mean with self loops) computes for the first hop: a
// float sum of 0/1 values is the exact integer count in any order (while the count stays below
// 2^24 in float32: rows of more than 16.7M neighbours, where the float sum itself would stall),
// then the same single multiplication by a[i] (skipped when a[i] == 1).  Later hops are float
// propagations (spmm_scaled) of these blocks, so every element is summed as before.
//
// Launchers: csrc/cpu/reconstruct.cpp (rows over std::thread, the block's columns in
// compile-time widths W) and csrc/cuda/reconstruct.cu (one thread per row and column chunk).
// Twin: ldpfast/_numba/reconstruct.py.
#pragma once
#include "propagate.h"

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace recon {

// a - b, a > b, a >= b in IEEE form on the device too: CuPy's -ftz=true would otherwise flush
// float32 subnormals in the estimator (see csrc/common/propagate.h for add / mul).
LDP_HD double sub(double a, double b) { return a - b; }
LDP_HD bool gt(double a, double b) { return a > b; }
LDP_HD bool ge(double a, double b) { return a >= b; }
LDP_HD float sub(float a, float b) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("sub.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a - b;
#endif
}
LDP_HD bool gt(float a, float b) {
#if defined(__CUDA_ARCH__)
    unsigned r;
    asm("{ .reg .pred p; setp.gt.f32 p, %1, %2; selp.u32 %0, 1, 0, p; }" : "=r"(r) : "f"(a), "f"(b));
    return r != 0u;
#else
    return a > b;
#endif
}
LDP_HD bool ge(float a, float b) {
#if defined(__CUDA_ARCH__)
    unsigned r;
    asm("{ .reg .pred p; setp.ge.f32 p, %1, %2; selp.u32 %0, 1, 0, p; }" : "=r"(r) : "f"(a), "f"(b));
    return r != 0u;
#else
    return a >= b;
#endif
}

// acc[0..W) = counts of columns [f0, f0 + W) over node i (self_loop) and its CSR row, in CSR
// order (the order does not matter for integers; it is kept for the prefetch hint).  hint(k)
// is called before entry k is read (the C++ launcher prefetches upcoming rows there).
// __restrict__: e is a char type, which may alias anything; without it GCC keeps acc in memory
// and falls back to a scalar loop (measured 3x slower than a float propagation of the same width).
template <int W, class C, class Hint>
LDP_HD void count_row(uint32_t* __restrict__ acc, int64_t i, int64_t f0, int64_t w, const int64_t* __restrict__ rp,
                      const C* __restrict__ col, const uint8_t* __restrict__ e, bool self_loop, Hint hint) {
    uint32_t s[W];
    for (int t = 0; t < W; ++t) s[t] = 0u;
    if (self_loop) {
        const uint8_t* __restrict__ ei = e + i * w + f0;
        for (int t = 0; t < W; ++t) s[t] += (uint32_t)ei[t];
    }
    const int64_t k1 = rp[i + 1];
    for (int64_t k = rp[i]; k < k1; ++k) {
        hint(k);
        const uint8_t* __restrict__ ej = e + (int64_t)col[k] * w + f0;
        for (int t = 0; t < W; ++t) s[t] += (uint32_t)ej[t];
    }
    for (int t = 0; t < W; ++t) acc[t] = s[t];
}

// y[0..W) = a * acc, exactly as prop::finish does with the float accumulator (acc -> T exact).
template <int W, class T>
LDP_HD void count_finish(const uint32_t* acc, T a, T* yi) {
    T f[W];
    for (int t = 0; t < W; ++t) f[t] = (T)acc[t];
    prop::finish<W>(f, a, yi);
}

// Eq. (5) and the argmax of line 19 for the features of one row of a block: lam holds their
// propagated proportions of values 1 .. gamma_t - 1 (sum(gamma_t - 1) entries), o receives
// argmax_j pi~_j.  The same float operations, in the same order, as the torch code of
// ldpfast/methods/rgnn.py (_estimate_block, "index"): pi~ = lam * a_t + b_t rounded after each
// operation; value 0 from lam0 = 1 - (lam_1 + ... ); ties go to the smallest value.  allbin
// (every feature of the input binary): o = [pi~_1 > 1/2].
template <class T>
LDP_HD void estimate_index_row(const T* lam, const int64_t* gam, const T* a, const T* b, int64_t B, bool allbin,
                               int64_t* o) {
    int64_t c = 0;
    for (int64_t t = 0; t < B; ++t) {
        if (allbin) {
            o[t] = gt(prop::add(prop::mul(lam[c], a[t]), b[t]), T(0.5)) ? 1 : 0;
            c += 1;
            continue;
        }
        const int64_t g1 = gam[t] - 1;
        T s = T(0);
        for (int64_t j = 0; j < g1; ++j) s = prop::add(s, lam[c + j]);
        const T pi0 = prop::add(prop::mul(sub(T(1), s), a[t]), b[t]);
        T rmax = prop::add(prop::mul(lam[c], a[t]), b[t]);
        int64_t rarg = 0;
        for (int64_t j = 1; j < g1; ++j) {
            const T p = prop::add(prop::mul(lam[c + j], a[t]), b[t]);
            if (gt(p, rmax)) {
                rmax = p;
                rarg = j;
            }
        }
        o[t] = ge(pi0, rmax) ? 0 : rarg + 1;
        c += g1;
    }
}

}  // namespace recon
}  // namespace ldp
