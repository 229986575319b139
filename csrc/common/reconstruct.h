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

// acc[0..W) = counts of columns [f0, f0 + W) over node i (self_loop) and its CSR row, in CSR
// order (the order does not matter for integers; it is kept for the prefetch hint).  hint(k)
// is called before entry k is read (the C++ launcher prefetches upcoming rows there).
template <int W, class C, class Hint>
LDP_HD void count_row(uint32_t* acc, int64_t i, int64_t f0, int64_t w, const int64_t* rp, const C* col,
                      const uint8_t* e, bool self_loop, Hint hint) {
    for (int t = 0; t < W; ++t) acc[t] = 0u;
    if (self_loop) {
        const uint8_t* ei = e + i * w + f0;
        for (int t = 0; t < W; ++t) acc[t] += (uint32_t)ei[t];
    }
    const int64_t k1 = rp[i + 1];
    for (int64_t k = rp[i]; k < k1; ++k) {
        hint(k);
        const uint8_t* ej = e + (int64_t)col[k] * w + f0;
        for (int t = 0; t < W; ++t) acc[t] += (uint32_t)ej[t];
    }
}

// y[0..W) = a * acc, exactly as prop::finish does with the float accumulator (acc -> T exact).
template <int W, class T>
LDP_HD void count_finish(const uint32_t* acc, T a, T* yi) {
    T f[W];
    for (int t = 0; t < W; ++t) f[t] = (T)acc[t];
    prop::finish<W>(f, a, yi);
}

}  // namespace recon
}  // namespace ldp
