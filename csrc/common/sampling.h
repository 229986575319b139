// HeterPoisson sampling, the per-item bodies shared by csrc/cpu/sampling.cpp (std::thread over
// sub-graphs) and csrc/cuda/sampling.cu (one CUDA thread per candidate / sub-graph): the same
// counter-addressed CellRng trials and the same integer logic, so a step's batch has the same
// bits on both (see sampling.cpp for the randomness contract).  Integer and exact double
// maths only (bernoulli compares words with exact scalings), so -ftz does not matter.
#pragma once
#include "rng.h"
#include "search.h"  // lower_index, sorted_has

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace heter {

LDP_HD bool central_trial(uint64_t seed, uint32_t step, int64_t v, double q) {
    CellRng g(seed, STREAM_HETER_CENTRAL, (uint64_t)v, step);
    return g.bernoulli(q);
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

// ---- inference sub-graphs (section 4.4) ------------------------------------------------------
// Neighbour j = col[e] of test node v is admissible when j != v and allow (null: all) allows it;
// its rank key is CellRng(seed, STREAM_HETER_INFERENCE, e, step).next_u64(), and the
// min(n_test, #admissible) smallest (key, j) pairs are kept: a uniform sample without
// replacement.  The kept set is defined by the keys alone, so any selection algorithm that
// finds it gives the same output (the C++ build uses nth_element on long rows).
LDP_HD bool infer_admissible(int64_t j, int64_t v, const uint8_t* allow) { return j != v && (!allow || allow[j]); }

LDP_HD uint64_t infer_key(uint64_t seed, uint32_t step, int64_t e) {
    CellRng g(seed, STREAM_HETER_INFERENCE, (uint64_t)e, step);
    return g.next_u64();
}

// (key, id) pairs in lexicographic order (ids are distinct in a row, so the order is total).
LDP_HD bool pair_less(uint64_t ka, int64_t ja, uint64_t kb, int64_t jb) { return ka < kb || (ka == kb && ja < jb); }

// Size 1 + k of test node v's sub-graph, k = min(n_test, #admissible).
template <class C>
LDP_HD int64_t infer_count(const int64_t* rp, const C* col, int64_t v, const uint8_t* allow, int64_t n_test) {
    int64_t avail = 0;
    for (int64_t e = rp[v]; e < rp[v + 1]; ++e) avail += infer_admissible((int64_t)col[e], v, allow) ? 1 : 0;
    return 1 + (avail < n_test ? avail : n_test);
}

// Node list of test node v into n_id[0 .. 1 + k): v, then the kept neighbours in ascending id
// order, with no scratch: the k-th smallest pair is found by k scans (each takes the smallest
// pair above the previous one), then the row (sorted by id) is scanned once for the pairs up to
// it.  O(k d) key evaluations: for the small n_test of inference (the paper's 13).
template <class C>
LDP_HD int64_t infer_row(const int64_t* rp, const C* col, int64_t v, const uint8_t* allow, uint64_t seed,
                         uint32_t step, int64_t n_test, int64_t* n_id) {
    const int64_t size = infer_count(rp, col, v, allow, n_test), k = size - 1;
    n_id[0] = v;
    int64_t avail = 0;
    for (int64_t e = rp[v]; e < rp[v + 1]; ++e) avail += infer_admissible((int64_t)col[e], v, allow) ? 1 : 0;
    bool all = k == avail;
    uint64_t tk = 0;  // the k-th smallest pair (tk, tj)
    int64_t tj = -1;
    for (int64_t r = 0; r < k && !all; ++r) {
        bool found = false;
        uint64_t bk = 0;
        int64_t bj = 0;
        for (int64_t e = rp[v]; e < rp[v + 1]; ++e) {
            const int64_t j = (int64_t)col[e];
            if (!infer_admissible(j, v, allow)) continue;
            const uint64_t key = infer_key(seed, step, e);
            if (r > 0 && !pair_less(tk, tj, key, j)) continue;  // not above the previous one
            if (!found || pair_less(key, j, bk, bj)) {
                bk = key;
                bj = j;
                found = true;
            }
        }
        tk = bk;
        tj = bj;
    }
    int64_t c = 1;
    for (int64_t e = rp[v]; e < rp[v + 1] && c < size; ++e) {
        const int64_t j = (int64_t)col[e];
        if (!infer_admissible(j, v, allow)) continue;
        if (all || !pair_less(tk, tj, infer_key(seed, step, e), j)) n_id[c++] = j;
    }
    return size;
}

}  // namespace heter
}  // namespace ldp
