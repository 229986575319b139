// CUDA launchers of the user-keyed edge randomisers (bodies and the privacy argument in
// csrc/common/edges_keyed.h, the ones csrc/cpu/edges_keyed.cpp runs): the same cells, read in
// the same order, so the same bits as the C++ build.  Where the C++ launcher walks a row at a
// time (its fields, a sort of the hits, then the coins), the work here is split so that every
// thread's share is independent (ldpfast/_cuda/edges_keyed.py drives it):
// * keyed_hits: a thread per (row, field) walks one skip field (mode 0: a row's one field;
//   mode 1: level L_TOP - f of DPRR's nested levels, nothing below the row's level of q; the
//   levels' geometric parameters, the same for every row, made once per block in shared
//   memory), count launch then fill launch at the prefix-summed offsets.  A hit is written as k 64 + (63 - L),
//   so that sorting a row's hits ascending orders them by (key, level descending): the C++
//   sort's order, each position's top level first.
// * (torch) the hits sorted by (row, key, level) (mode 1 only: mode 0's one field is already in
//   key order).
// * keyed_pick: a thread per true edge (its pair coin, or kept when the user is public) and a
//   thread per sorted hit (the first of its position only: candidate, then false_keep's level
//   test and band coin), each writing row N + j for an output j, or KEYED_NONE.
// * (torch) one sort of those values gives every row's output in row-index order (the C++
//   std::sort of the row), searchsorted the row pointers.
// * keyed_dlap: a thread per user (DPRR's degree noise).
#include "../common/edges_keyed.h"
#include "../common/search.h"

using namespace ldp;
using namespace ldp::keyed;

constexpr int64_t KEYED_NONE = 9223372036854775807ll;  // no output: sorts after every row N + j

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }

__device__ __forceinline__ KeyedArgs<int64_t> keyed_args(const int64_t* keys, const int64_t* row_of_key, int64_t S,
                                                         const uint64_t* seeds, uint32_t st_t, uint32_t st_f, int mode,
                                                         const double* pt, const double* pf, double pm,
                                                         const uint8_t* pub, int64_t row0) {
    KeyedArgs<int64_t> A;
    A.keys = keys;
    A.row_of_key = row_of_key;
    A.S = S;
    A.seeds = seeds;
    A.st_t = st_t;
    A.st_f = st_f;
    A.mode = mode;
    A.pt = pt;
    A.pf = pf;
    A.pm = pm;
    A.pub = pub;
    A.row0 = row0;
    return A;
}

// Fill = 0: counts[t] = the hits of (row t / F, field t % F), F = 1 (mode 0) or L_TOP + 1;
// fill = 1: those hits at hkl[hoff[t]..], in increasing key.  Public rows have none.
extern "C" __global__ void keyed_hits(const int64_t* keys, const int64_t* row_of_key, int64_t S, const uint64_t* seeds,
                                      uint32_t st_t, uint32_t st_f, int mode, const double* pt, const double* pf,
                                      double pm, const uint8_t* pub, int64_t row0, int64_t m, int64_t* counts,
                                      const int64_t* hoff, int64_t* hkl, int fill) {
    // Mode 1: each level's geometric parameters depend on pm alone: once per block, not per thread.
    __shared__ GeomParams level_gp[L_TOP + 1];
    if (mode == 1) {
        for (int L = (int)threadIdx.x; L <= L_TOP; L += (int)blockDim.x) level_gp[L] = geom_params(level_rate(L, pm));
        __syncthreads();
    }
    const int F = mode == 0 ? 1 : L_TOP + 1;
    const int64_t t = thread_index();
    if (t >= m * F) return;
    const KeyedArgs<int64_t> A = keyed_args(keys, row_of_key, S, seeds, st_t, st_f, mode, pt, pf, pm, pub, row0);
    const int64_t i = t / F;
    const int f = mode == 0 ? 0 : L_TOP - (int)(t - i * F);
    int64_t o = 0;
    if (!(pub && pub[i]) && f >= lowest_field(A, i)) {
        int64_t* w = fill ? hkl + hoff[t] : nullptr;
        const auto push = [&](int64_t k, int L) {
            if (w) w[o] = k * 64 + (63 - L);
            ++o;
        };
        if (mode == 0)
            field_hits(A, i, f, push);
        else
            level_hits(A, i, f, level_gp[f], push);
    }
    if (!fill) counts[t] = o;
}

// Threads [0, nnz): true edge e (row i: rp[i] <= e < rp[i + 1]); threads [nnz, nnz + nh): sorted
// hit h (row i: hrp[i] <= h < hrp[i + 1]).  okey[t] = i N + j for an output j of row i, else
// KEYED_NONE.
template <class C>
__device__ void keyed_pick_k(const int64_t* rp, const C* col, int64_t m, const int64_t* keys, const int64_t* row_of_key,
                             int64_t S, const uint64_t* seeds, uint32_t st_t, uint32_t st_f, int mode, const double* pt,
                             const double* pf, double pm, const uint8_t* pub, int64_t row0, const int64_t* hrp,
                             const int64_t* hkl, int64_t nh, int64_t N, int64_t* okey) {
    const int64_t t = thread_index();
    const int64_t nnz = rp[m];
    if (t >= nnz + nh) return;
    const KeyedArgs<int64_t> A = keyed_args(keys, row_of_key, S, seeds, st_t, st_f, mode, pt, pf, pm, pub, row0);
    int64_t out = KEYED_NONE;
    if (t < nnz) {
        const int64_t i = upper_index(rp, m + 1, t) - 1;  // -1: an entry before rp[0], in no row
        if (i >= 0) {
            const int64_t j = (int64_t)col[t];
            if ((pub && pub[i]) || keep_pair(A, i, j)) out = i * N + j;
        }
    } else {
        const int64_t h = t - nnz;
        const int64_t i = upper_index(hrp, m + 1, h) - 1;
        const int64_t k = hkl[h] >> 6;
        if (h == hrp[i] || (hkl[h - 1] >> 6) != k) {  // the position's top level (a lower one: seen)
            const int64_t j = candidate(A, i, col + rp[i], rp[i + 1] - rp[i], k);
            if (j >= 0 && false_keep(A, i, k, 63 - (int)(hkl[h] & 63))) out = i * N + j;
        }
    }
    okey[t] = out;
}

extern "C" __global__ void keyed_pick_i32(const int64_t* rp, const int32_t* col, int64_t m, const int64_t* keys,
                                          const int64_t* row_of_key, int64_t S, const uint64_t* seeds, uint32_t st_t,
                                          uint32_t st_f, int mode, const double* pt, const double* pf, double pm,
                                          const uint8_t* pub, int64_t row0, const int64_t* hrp, const int64_t* hkl,
                                          int64_t nh, int64_t N, int64_t* okey) {
    keyed_pick_k(rp, col, m, keys, row_of_key, S, seeds, st_t, st_f, mode, pt, pf, pm, pub, row0, hrp, hkl, nh, N,
                 okey);
}
extern "C" __global__ void keyed_pick_i64(const int64_t* rp, const int64_t* col, int64_t m, const int64_t* keys,
                                          const int64_t* row_of_key, int64_t S, const uint64_t* seeds, uint32_t st_t,
                                          uint32_t st_f, int mode, const double* pt, const double* pf, double pm,
                                          const uint8_t* pub, int64_t row0, const int64_t* hrp, const int64_t* hkl,
                                          int64_t nh, int64_t N, int64_t* okey) {
    keyed_pick_k(rp, col, m, keys, row_of_key, S, seeds, st_t, st_f, mode, pt, pf, pm, pub, row0, hrp, hkl, nh, N,
                 okey);
}

// DPRR's degree noise of each user (keyed_dlap of the C++ build).
extern "C" __global__ void keyed_dlap(const uint64_t* seeds, int64_t n, uint64_t t, uint64_t s, int64_t* out) {
    const int64_t i = thread_index();
    if (i >= n) return;
    out[i] = degree_noise(seeds[i], t, s);
}
