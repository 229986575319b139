// CUDA launchers of y = diag(a) (A [+I]) diag(b) x over CSR: indexing only, the maths is the
// shared body of csrc/common/propagate.h (the one csrc/cpu/propagate.cpp runs).  Compile with
// --fmad=false.  A null `val` means unweighted.
//
// Launch shapes (ldpfast/_cuda/propagate.py), a warp per work item, lanes over features:
// * spmm_*         : a warp per row with at most `chunk` entries: the whole row in CSR order,
//                    so its bits equal the C++ build's.  Longer rows are skipped here.
// * spmm_chunks_*  : a warp per chunk of a long row (entries [k0, min(k0 + chunk, row end))),
//                    its partial sum written to partial[q, :].  Chunk boundaries are fixed by
//                    rowptr and `chunk`, not by the launch, so results are deterministic.
// * spmm_combine_* : a warp per long row: self loop, then the row's partials in chunk order
//                    (no atomics), then the scale.  Summation order differs from the C++
//                    build for these rows only (results close, not bit-identical).
// A hub of tens of thousands of neighbours is thus spread over many warps instead of one.
#include "../common/propagate.h"

using namespace ldp;

__device__ __forceinline__ int64_t warp_index() { return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; }
__device__ __forceinline__ int lane_index() { return (int)(threadIdx.x & 31); }

// T: arithmetic (a, b, val, partials); S: storage of x and y (T, or Bf16 with T = float).
template <class T, class S, class C>
__device__ void spmm_k(const int64_t* rp, const C* col, const T* val, const T* a, const T* b, const S* x, S* y,
                       int64_t n, int64_t d, int self_loop, int64_t chunk) {
    const int64_t i = warp_index();
    if (i >= n) return;
    const int64_t k0 = rp[i], k1 = rp[i + 1];
    if (k1 - k0 > chunk) return;
    auto no_hint = [](int64_t) {};  // long row: spmm_chunks + spmm_combine
    for (int64_t f = lane_index(); f < d; f += 32) {
        T acc[1];
        prop::self_term<1, false>(acc, i, f, d, b, x, self_loop != 0);
        if (val) prop::accumulate<1, false, true>(acc, k0, k1, f, d, col, val, b, x, no_hint);
        else prop::accumulate<1, false, false>(acc, k0, k1, f, d, col, val, b, x, no_hint);
        prop::finish<1>(acc, a[i], y + i * d + f);
    }
}

template <class T, class S, class C>
__device__ void spmm_chunks_k(const int64_t* rp, const C* col, const T* val, const T* b, const S* x,
                              const int64_t* chunk_row, const int64_t* chunk_k0, T* partial, int64_t nchunks,
                              int64_t d, int64_t chunk) {
    const int64_t q = warp_index();
    if (q >= nchunks) return;
    const int64_t i = chunk_row[q], k0 = chunk_k0[q];
    const int64_t k1 = k0 + chunk < rp[i + 1] ? k0 + chunk : rp[i + 1];
    auto no_hint = [](int64_t) {};
    for (int64_t f = lane_index(); f < d; f += 32) {
        T acc[1] = {T(0)};
        if (val) prop::accumulate<1, false, true>(acc, k0, k1, f, d, col, val, b, x, no_hint);
        else prop::accumulate<1, false, false>(acc, k0, k1, f, d, col, val, b, x, no_hint);
        partial[q * d + f] = acc[0];
    }
}

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
                                        int self_loop, int64_t chunk) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk);
}
extern "C" __global__ void spmm_f64_i32(const int64_t* rp, const int32_t* col, const double* val, const double* a,
                                        const double* b, const double* x, double* y, int64_t n, int64_t d,
                                        int self_loop, int64_t chunk) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk);
}
extern "C" __global__ void spmm_f32_i64(const int64_t* rp, const int64_t* col, const float* val, const float* a,
                                        const float* b, const float* x, float* y, int64_t n, int64_t d,
                                        int self_loop, int64_t chunk) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk);
}
extern "C" __global__ void spmm_f64_i64(const int64_t* rp, const int64_t* col, const double* val, const double* a,
                                        const double* b, const double* x, double* y, int64_t n, int64_t d,
                                        int self_loop, int64_t chunk) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk);
}

extern "C" __global__ void spmm_chunks_f32_i32(const int64_t* rp, const int32_t* col, const float* val,
                                               const float* b, const float* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                               int64_t chunk) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk);
}
extern "C" __global__ void spmm_chunks_f64_i32(const int64_t* rp, const int32_t* col, const double* val,
                                               const double* b, const double* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, double* partial, int64_t nchunks,
                                               int64_t d, int64_t chunk) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk);
}
extern "C" __global__ void spmm_chunks_f32_i64(const int64_t* rp, const int64_t* col, const float* val,
                                               const float* b, const float* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                               int64_t chunk) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk);
}
extern "C" __global__ void spmm_chunks_f64_i64(const int64_t* rp, const int64_t* col, const double* val,
                                               const double* b, const double* x, const int64_t* chunk_row,
                                               const int64_t* chunk_k0, double* partial, int64_t nchunks,
                                               int64_t d, int64_t chunk) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk);
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
                                         int self_loop, int64_t chunk) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk);
}
extern "C" __global__ void spmm_bf16_i64(const int64_t* rp, const int64_t* col, const float* val, const float* a,
                                         const float* b, const Bf16* x, Bf16* y, int64_t n, int64_t d,
                                         int self_loop, int64_t chunk) {
    spmm_k(rp, col, val, a, b, x, y, n, d, self_loop, chunk);
}
extern "C" __global__ void spmm_chunks_bf16_i32(const int64_t* rp, const int32_t* col, const float* val,
                                                const float* b, const Bf16* x, const int64_t* chunk_row,
                                                const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                                int64_t chunk) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk);
}
extern "C" __global__ void spmm_chunks_bf16_i64(const int64_t* rp, const int64_t* col, const float* val,
                                                const float* b, const Bf16* x, const int64_t* chunk_row,
                                                const int64_t* chunk_k0, float* partial, int64_t nchunks, int64_t d,
                                                int64_t chunk) {
    spmm_chunks_k(rp, col, val, b, x, chunk_row, chunk_k0, partial, nchunks, d, chunk);
}
extern "C" __global__ void spmm_combine_bf16(const int64_t* long_row, const int64_t* long_first, const float* partial,
                                             const float* a, const float* b, const Bf16* x, Bf16* y, int64_t nlong,
                                             int64_t d, int self_loop) {
    spmm_combine_k(long_row, long_first, partial, a, b, x, y, nlong, d, self_loop);
}
