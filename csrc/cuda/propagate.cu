// CUDA launchers of y = diag(a) (A [+I]) diag(b) x over CSR: indexing only, the maths is the
// shared body of csrc/common/propagate.h (the one csrc/cpu/propagate.cpp runs: entry_weight,
// skips, axpy, self_term, finish).  Compile with --fmad=false.  A null `val` means unweighted.
//
// Geometry (chosen by ldpfast/_cuda/propagate.py): a warp is split into groups of G = 2^gl
// lanes, one work item (a row, or a chunk of a long row) per group, so short feature rows do
// not leave most of a warp idle.  Each lane owns V consecutive features (V = vec: 1, 2, 4 or
// 8 values, at most 16 bytes, when d % V == 0 and x, y are aligned to V values) and moves them
// with one vector load / store; G is the smallest power of two >= d / V, at most 32 (wider
// rows take several passes of G * V features).  The entries of an item are read G at a time,
// one per lane (col[k] and its weight, the only random reads besides the x rows), and handed
// to the group's lanes by shuffle; every lane then adds entry after entry in CSR order.  Per
// output feature the order is therefore the C++ build's: self loop, entries in CSR order, one
// multiplication by a[i].
// * spmm_*         : a group per row with at most `chunk` entries: bit-identical to C++.
//                    Longer rows are skipped here (their group idles).
// * spmm_chunks_*  : a group per chunk of a long row (entries [k0, min(k0 + chunk, row end))),
//                    its partial sum written to partial[q, :].  Chunk boundaries are fixed by
//                    rowptr and `chunk`, not by the launch, so results are deterministic.
// * spmm_combine_* : a warp per long row: self loop, then the row's partials in chunk order
//                    (no atomics), then the scale.  Summation order differs from the C++
//                    build for these rows only (results close, not bit-identical).
// A hub of tens of thousands of neighbours is thus spread over many warps instead of one.
//
// Collectives: every lane of a warp runs the same number of __any_sync / __shfl_sync rounds
// (loop bounds are warp-wide), lanes without work just take part; exits are warp-uniform.
#include "../common/propagate.h"

using namespace ldp;

__device__ __forceinline__ int64_t warp_index() { return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; }
__device__ __forceinline__ int lane_index() { return (int)(threadIdx.x & 31); }

constexpr unsigned FULL = 0xffffffffu;

// A lane's place in its warp for groups of 2^gl lanes: item = the group's work item
// (warp * groups per warp + group), g = rank in the group, base = the group's first lane.
struct Lanes {
    int64_t item;
    int g, base, size;
};
__device__ __forceinline__ Lanes lanes(int gl) {
    const int lane = lane_index();
    return {warp_index() * (32 >> gl) + (lane >> gl), lane & ((1 << gl) - 1), lane & ~((1 << gl) - 1), 1 << gl};
}

// acc[0..V) += entries [k0, k1) of features [f, f + V) (on: this lane owns features of a
// live item; the group's k0, k1 are the same on all its lanes).
// Reads: lane g of a group reads col[kb + g] and val[kb + g], b[col[kb + g]] (coalesced over
// the group, one random b read per entry); then every lane of the group reads the x row
// x[col[k] * d + f .. + V) of each entry k, the group's lanes covering consecutive V-value
// pieces of one row (G * V * sizeof(S) contiguous bytes per entry).
template <int V, bool VAL, class T, class S, class C>
__device__ __forceinline__ void gather(T* acc, int64_t k0, int64_t k1, int64_t f, bool on, const Lanes& L,
                                       const C* col, const T* val, const T* b, const S* x, int64_t d) {
    // Bits 0, G, 2G, ...: lane `base` of every group.  Entries of a group are lanes base ..
    // base + count - 1 of `has`, so entry s exists in some group iff has & (first << s).
    const unsigned first = (unsigned)(0xffffffffull / ((1ull << L.size) - 1));
    for (int64_t kb = k0;; kb += L.size) {
        const int64_t k = kb + L.g;
        const unsigned has = __ballot_sync(FULL, k < k1);
        if (has == 0) break;  // warp-uniform: no group has entries left
        C j = 0;
        T w = T(0);
        if (k < k1) {
            j = col[k];
            w = prop::entry_weight<false, VAL>(k, (int64_t)j, val, b);
        }
        // As many shuffle rounds as the longest group needs (not always G).
        for (int s = 0; s < L.size && (has & (first << s)); ++s) {
            const C js = __shfl_sync(FULL, j, L.base + s);
            const T ws = __shfl_sync(FULL, w, L.base + s);
            if (!on || !((has >> (L.base + s)) & 1u) || prop::skips<false>(ws)) continue;
            const prop::Pack<S, V> p = *reinterpret_cast<const prop::Pack<S, V>*>(x + (int64_t)js * d + f);
            prop::axpy<V, false>(acc, ws, p.v);
        }
    }
}

// f(Width<V>()) for the run-time vector width `vec` (1, 2, 4, 8; V * sizeof(S) <= 16).
template <int V>
struct Width {
    static constexpr int value = V;
};
template <class S, class F>
__device__ __forceinline__ void with_width(int vec, F f) {
    if constexpr (8 * sizeof(S) <= 16)
        if (vec == 8) return f(Width<8>());
    if constexpr (4 * sizeof(S) <= 16)
        if (vec == 4) return f(Width<4>());
    if (vec == 2) return f(Width<2>());
    f(Width<1>());
}

// T: arithmetic (a, b, val, partials); S: storage of x and y (T, or Bf16 with T = float).
// Reads (besides gather): rp[i], rp[i + 1] by every lane of row i's group (one broadcast
// transaction), a[i], b[i] and x[i * d + f .. + V) (self loop) by the lane owning f; writes
// y[i * d + f .. + V) with one vector store, the group writing G * V contiguous values.
template <class T, class S, class C>
__device__ void spmm_k(const int64_t* rp, const C* col, const T* val, const T* a, const T* b, const S* x, S* y,
                       int64_t n, int64_t d, int self_loop, int64_t chunk, int vec, int gl) {
    const Lanes L = lanes(gl);
    const int64_t i = L.item;
    bool live = i < n;
    int64_t k0 = 0, k1 = 0;
    if (live) {
        k0 = rp[i];
        k1 = rp[i + 1];
        if (k1 - k0 > chunk) live = false;  // long row: spmm_chunks + spmm_combine
    }
    if (!live) k1 = k0;
    if (!__any_sync(FULL, live)) return;  // warp-uniform
    with_width<S>(vec, [&](auto width) {
        constexpr int V = decltype(width)::value;
        for (int64_t f0 = 0; f0 < d; f0 += (int64_t)L.size * V) {  // same passes on every lane
            const int64_t f = f0 + (int64_t)L.g * V;
            const bool on = live && f < d;
            T acc[V];
            if (on) prop::self_term<V, false>(acc, i, f, d, b, x, self_loop != 0);
            if (val) gather<V, true>(acc, k0, k1, f, on, L, col, val, b, x, d);
            else gather<V, false>(acc, k0, k1, f, on, L, col, val, b, x, d);
            if (!on) continue;
            prop::Pack<S, V> out;
            prop::finish<V>(acc, a[i], out.v);
            *reinterpret_cast<prop::Pack<S, V>*>(y + i * d + f) = out;
        }
    });
}

// Reads (besides gather): chunk_row[q], chunk_k0[q], rp[i + 1] by every lane of chunk q's
// group; writes partial[q * d + f .. + V), the group's lanes covering consecutive values.
template <class T, class S, class C>
__device__ void spmm_chunks_k(const int64_t* rp, const C* col, const T* val, const T* b, const S* x,
                              const int64_t* chunk_row, const int64_t* chunk_k0, T* partial, int64_t nchunks,
                              int64_t d, int64_t chunk, int vec, int gl) {
    const Lanes L = lanes(gl);
    const int64_t q = L.item;
    const bool live = q < nchunks;
    int64_t k0 = 0, k1 = 0;
    if (live) {
        k0 = chunk_k0[q];
        const int64_t end = rp[chunk_row[q] + 1];
        k1 = k0 + chunk < end ? k0 + chunk : end;
    }
    if (!__any_sync(FULL, live)) return;  // warp-uniform
    with_width<S>(vec, [&](auto width) {
        constexpr int V = decltype(width)::value;
        for (int64_t f0 = 0; f0 < d; f0 += (int64_t)L.size * V) {
            const int64_t f = f0 + (int64_t)L.g * V;
            const bool on = live && f < d;
            T acc[V];
            for (int t = 0; t < V; ++t) acc[t] = T(0);
            if (val) gather<V, true>(acc, k0, k1, f, on, L, col, val, b, x, d);
            else gather<V, false>(acc, k0, k1, f, on, L, col, val, b, x, d);
            if (on)
                for (int t = 0; t < V; ++t) partial[q * d + f + t] = acc[t];
        }
    });
}

// Lane l of the warp of long row r owns features l, l + 32, ...: reads partial[q * d + f] of
// the row's chunks q in order (coalesced over the warp), x[i * d + f] for the self loop, and
// writes y[i * d + f].
template <class T, class S>
__device__ void spmm_combine_k(const int64_t* long_row, const int64_t* long_first, const T* partial, const T* a,
                               const T* b, const S* x, S* y, int64_t nlong, int64_t d, int self_loop) {
    const int64_t r = warp_index();
    if (r >= nlong) return;
    const int64_t i = long_row[r];
    for (int64_t f = lane_index(); f < d; f += 32) {
        T acc[1];
        prop::self_term<1, false>(acc, i, f, d, b, x, self_loop != 0);
        for (int64_t q = long_first[r]; q < long_first[r + 1]; ++q) acc[0] = prop::add(acc[0], partial[q * d + f]);
        prop::finish<1>(acc, a[i], y + i * d + f);
    }
}

extern "C" __global__ void spmm_f32_i32(const int64_t* rp, const int32_t* col, const float* val, const float* a,
                                        const float* b, const float* x, float* y, int64_t n, int64_t d,
                                        int self_loop, int64_t chunk, int vec, int gl) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk, vec, gl);
}
extern "C" __global__ void spmm_f64_i32(const int64_t* rp, const int32_t* col, const double* val, const double* a,
                                        const double* b, const double* x, double* y, int64_t n, int64_t d,
                                        int self_loop, int64_t chunk, int vec, int gl) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk, vec, gl);
}
extern "C" __global__ void spmm_f32_i64(const int64_t* rp, const int64_t* col, const float* val, const float* a,
                                        const float* b, const float* x, float* y, int64_t n, int64_t d,
                                        int self_loop, int64_t chunk, int vec, int gl) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk, vec, gl);
}
extern "C" __global__ void spmm_f64_i64(const int64_t* rp, const int64_t* col, const double* val, const double* a,
                                        const double* b, const double* x, double* y, int64_t n, int64_t d,
                                        int self_loop, int64_t chunk, int vec, int gl) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk, vec, gl);
}

extern "C" __global__ void spmm_chunks_f32_i32(const int64_t* rp, const int32_t* col, const float* val,
                                               const float* b, const float* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                               int64_t chunk, int vec, int gl) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk, vec, gl);
}
extern "C" __global__ void spmm_chunks_f64_i32(const int64_t* rp, const int32_t* col, const double* val,
                                               const double* b, const double* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, double* partial, int64_t nchunks,
                                               int64_t d, int64_t chunk, int vec, int gl) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk, vec, gl);
}
extern "C" __global__ void spmm_chunks_f32_i64(const int64_t* rp, const int64_t* col, const float* val,
                                               const float* b, const float* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                               int64_t chunk, int vec, int gl) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk, vec, gl);
}
extern "C" __global__ void spmm_chunks_f64_i64(const int64_t* rp, const int64_t* col, const double* val,
                                               const double* b, const double* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, double* partial, int64_t nchunks,
                                               int64_t d, int64_t chunk, int vec, int gl) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk, vec, gl);
}

extern "C" __global__ void spmm_combine_f32(const int64_t* long_row, const int64_t* long_first, const float* partial,
                                            const float* a, const float* b, const float* x, float* y, int64_t nlong,
                                            int64_t d, int self_loop) {
    spmm_combine_k(long_row, long_first, partial, a, b, x, y, nlong, d, self_loop);
}
extern "C" __global__ void spmm_combine_f64(const int64_t* long_row, const int64_t* long_first,
                                            const double* partial, const double* a, const double* b,
                                            const double* x, double* y, int64_t nlong, int64_t d, int self_loop) {
    spmm_combine_k(long_row, long_first, partial, a, b, x, y, nlong, d, self_loop);
}

// bfloat16 storage (x, y as bf16 bits; a, b, val and the partials float32).
extern "C" __global__ void spmm_bf16_i32(const int64_t* rp, const int32_t* col, const float* val, const float* a,
                                         const float* b, const Bf16* x, Bf16* y, int64_t n, int64_t d,
                                         int self_loop, int64_t chunk, int vec, int gl) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk, vec, gl);
}
extern "C" __global__ void spmm_bf16_i64(const int64_t* rp, const int64_t* col, const float* val, const float* a,
                                         const float* b, const Bf16* x, Bf16* y, int64_t n, int64_t d,
                                         int self_loop, int64_t chunk, int vec, int gl) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk, vec, gl);
}
extern "C" __global__ void spmm_chunks_bf16_i32(const int64_t* rp, const int32_t* col, const float* val,
                                                const float* b, const Bf16* x, const int64_t* chunk_row,
                                                const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                                int64_t chunk, int vec, int gl) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk, vec, gl);
}
extern "C" __global__ void spmm_chunks_bf16_i64(const int64_t* rp, const int64_t* col, const float* val,
                                                const float* b, const Bf16* x, const int64_t* chunk_row,
                                                const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                                int64_t chunk, int vec, int gl) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk, vec, gl);
}
extern "C" __global__ void spmm_combine_bf16(const int64_t* long_row, const int64_t* long_first, const float* partial,
                                             const float* a, const float* b, const Bf16* x, Bf16* y, int64_t nlong,
                                             int64_t d, int self_loop) {
    spmm_combine_k(long_row, long_first, partial, a, b, x, y, nlong, d, self_loop);
}
