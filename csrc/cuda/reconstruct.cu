// CUDA launchers of the report-count hop and the fused estimator of RGNN's feature
// reconstruction: indexing only, the maths is the shared body of csrc/common/reconstruct.h (the
// one csrc/cpu/reconstruct.cpp runs).  Compile with --fmad=false.
//
// * fs_counts_*         : a warp per row, lanes over the block's columns; the whole row is
//                         counted by one lane per column.  Counts are integers, so the result
//                         is bit-identical to the C++ build for every row, long ones included.
// * fs_estimate_index_* : a thread per row.
#include "../common/reconstruct.h"

using namespace ldp;

__device__ __forceinline__ int64_t warp_index() { return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; }
__device__ __forceinline__ int lane_index() { return (int)(threadIdx.x & 31); }

template <class T, class C>
__device__ void fs_counts_k(const int64_t* rp, const C* col, const uint8_t* e, const T* a, T* y, int64_t n, int64_t w,
                            int self_loop) {
    const int64_t i = warp_index();
    if (i >= n) return;
    auto no_hint = [](int64_t) {};
    for (int64_t f = lane_index(); f < w; f += 32) {
        uint32_t acc[1];
        recon::count_row<1>(acc, i, f, w, rp, col, e, self_loop != 0, no_hint);
        recon::count_finish<1>(acc, a[i], y + i * w + f);
    }
}

template <class T>
__device__ void fs_estimate_k(const T* lam, const int64_t* gam, const T* a, const T* b, int64_t n, int64_t w, int64_t B,
                              int allbin, int64_t* out, int64_t d, int64_t c0) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    recon::estimate_index_row(lam + i * w, gam, a, b, B, allbin != 0, out + i * d + c0);
}

extern "C" __global__ void fs_counts_f32_i32(const int64_t* rp, const int32_t* col, const uint8_t* e, const float* a,
                                             float* y, int64_t n, int64_t w, int self_loop) {
    fs_counts_k(rp, col, e, a, y, n, w, self_loop);
}
extern "C" __global__ void fs_counts_f64_i32(const int64_t* rp, const int32_t* col, const uint8_t* e, const double* a,
                                             double* y, int64_t n, int64_t w, int self_loop) {
    fs_counts_k(rp, col, e, a, y, n, w, self_loop);
}
extern "C" __global__ void fs_counts_f32_i64(const int64_t* rp, const int64_t* col, const uint8_t* e, const float* a,
                                             float* y, int64_t n, int64_t w, int self_loop) {
    fs_counts_k(rp, col, e, a, y, n, w, self_loop);
}
extern "C" __global__ void fs_counts_f64_i64(const int64_t* rp, const int64_t* col, const uint8_t* e, const double* a,
                                             double* y, int64_t n, int64_t w, int self_loop) {
    fs_counts_k(rp, col, e, a, y, n, w, self_loop);
}
extern "C" __global__ void fs_estimate_index_f32(const float* lam, const int64_t* gam, const float* a, const float* b,
                                                 int64_t n, int64_t w, int64_t B, int allbin, int64_t* out, int64_t d,
                                                 int64_t c0) {
    fs_estimate_k(lam, gam, a, b, n, w, B, allbin, out, d, c0);
}
extern "C" __global__ void fs_estimate_index_f64(const double* lam, const int64_t* gam, const double* a, const double* b,
                                                 int64_t n, int64_t w, int64_t B, int allbin, int64_t* out, int64_t d,
                                                 int64_t c0) {
    fs_estimate_k(lam, gam, a, b, n, w, B, allbin, out, d, c0);
}
