// HeterPoisson sampling, the per-item bodies shared by csrc/cpu/sampling.cpp (std::thread over
// sub-graphs) and csrc/cuda/sampling.cu (one CUDA thread per candidate / sub-graph): the same
// counter-addressed CellRng trials and the same integer logic, so a step's batch has the same
// bits on both (see sampling.cpp for the randomness contract).  Integer and exact double
// maths only (bernoulli compares words with exact scalings), so -ftz does not matter.
#pragma once
#include "rng.h"

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace heter {

LDP_HD bool central_trial(uint64_t seed, uint32_t step, int64_t v, double q) {
    CellRng g(seed, STREAM_HETER_CENTRAL, (uint64_t)v, step);
    return g.bernoulli(q);
}

// First index of sorted a[0..n) with a[i] >= x (std::lower_bound, usable on the device).
template <class T>
LDP_HD int64_t lower_index(const T* a, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)a[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

template <class T>
LDP_HD bool sorted_has(const T* a, int64_t n, int64_t x) {
    const int64_t i = lower_index(a, n, x);
    return i != n && (int64_t)a[i] == x;
}

// Node list of the sub-graph of centre v (Alg. 2 + 3) into n_id[0..], zeroed[0..] (room for
// 1 + deg(v)): v first, then its sampled peripherals in ascending id order; returns the size.
template <class C>
LDP_HD int64_t nodes_row(const int64_t* rp, const C* col, const int64_t* deg, int64_t v, const uint8_t* cand,
                         const uint8_t* allow, uint64_t seed, uint32_t step, double q, double M, bool drop,
                         int64_t* n_id, uint8_t* zeroed) {
    int64_t cnt = 1;
    n_id[0] = v;
    zeroed[0] = 0;
    for (int64_t e = rp[v]; e < rp[v + 1]; ++e) {
        const int64_t j = (int64_t)col[e];
        if (j == v) continue;
        if (allow && !allow[j]) continue;
        CellRng g(seed, STREAM_HETER_PERIPHERAL, (uint64_t)e, step);
        if (!g.bernoulli(M / (double)deg[j])) continue;
        const bool cen = cand[j] && central_trial(seed, step, j, q);
        if (cen && drop) continue;
        n_id[cnt] = j;
        zeroed[cnt] = cen ? 1 : 0;
        ++cnt;
    }
    return cnt;
}

// Edges of one sub-graph (nodes n_id[p0 .. p0 + L), centre first, peripherals ascending): for
// each target t in local order, sources s in local order with (s -> t) in E, i.e. global(s)
// in NB(global(t)); star (!induced): only pairs involving the centre.  emit(ls, lt) is
// called per edge, in that order; returns the count.
template <class C, class Emit>
LDP_HD int64_t edges_row(const int64_t* rp, const C* col, const int64_t* n_id, int64_t p0, int64_t L, bool induced,
                         Emit emit) {
    const int64_t v = n_id[p0];
    const int64_t* P = n_id + p0 + 1;  // peripherals, ascending
    const int64_t s = L - 1;
    int64_t cnt = 0;
    for (int64_t lt = 0; lt < L; ++lt) {
        const int64_t gt = n_id[p0 + lt];
        const C* R = col + rp[gt];
        const int64_t d = rp[gt + 1] - rp[gt];
        if (lt == 0) {
            if (s == 0 || d == 0) continue;  // sources among the peripherals
        } else {
            if (gt != v && sorted_has(R, d, v)) { emit(0, lt); ++cnt; }
            if (!induced || s == 0 || d == 0) continue;
        }
        // intersect P (size s, ascending) with R (size d, ascending)
        if (s * 8 < d) {
            for (int64_t i = 0; i < s; ++i)
                if (P[i] != gt && sorted_has(R, d, P[i])) { emit(1 + i, lt); ++cnt; }
        } else if (d * 8 < s) {
            for (int64_t r = 0; r < d; ++r) {
                const int64_t x = (int64_t)R[r];
                if (x == gt || x == v) continue;
                const int64_t q = lower_index(P, s, x);
                if (q != s && P[q] == x) { emit(1 + q, lt); ++cnt; }
            }
        } else {
            int64_t i = 0, r = 0;
            while (i < s && r < d) {
                const int64_t a = P[i], x = (int64_t)R[r];
                if (a < x) {
                    ++i;
                } else if (x < a) {
                    ++r;
                } else {
                    if (a != gt) { emit(1 + i, lt); ++cnt; }
                    ++i;
                    ++r;
                }
            }
        }
    }
    return cnt;
}

}  // namespace heter
}  // namespace ldp
