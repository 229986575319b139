// CUDA twin of csrc/cpu/propagate.cpp: y = diag(a) (A [+I]) diag(b) x over CSR.
// One warp per row, lanes stride over features; each output element is accumulated over
// the row's neighbours in CSR order, exactly as the CPU kernel does, so float results are
// bit-identical provided FMA contraction is off (--fmad=false).
#include "../common/philox.h"

template <class T, class C>
__device__ void spmm_rows(const int64_t* rowptr, const C* col, const T* a, const T* b, const T* x, T* y,
                          int64_t n, int64_t d, int self_loop) {
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp >= n) return;
    const int64_t i = warp;
    for (int64_t f = lane; f < d; f += 32) {
        T acc = 0;
        if (self_loop && b[i] != 0) acc = acc + b[i] * x[i * d + f];
        for (int64_t k = rowptr[i]; k < rowptr[i + 1]; ++k) {
            const int64_t j = (int64_t)col[k];
            const T w = b[j];
            if (w == 0) continue;
            acc = acc + w * x[j * d + f];
        }
        if (a[i] != 1) acc = acc * a[i];
        y[i * d + f] = acc;
    }
}

extern "C" __global__ void spmm_f32_i32(const int64_t* rp, const int32_t* col, const float* a, const float* b,
                                        const float* x, float* y, int64_t n, int64_t d, int self_loop) {
    spmm_rows<float, int32_t>(rp, col, a, b, x, y, n, d, self_loop);
}
extern "C" __global__ void spmm_f64_i32(const int64_t* rp, const int32_t* col, const double* a, const double* b,
                                        const double* x, double* y, int64_t n, int64_t d, int self_loop) {
    spmm_rows<double, int32_t>(rp, col, a, b, x, y, n, d, self_loop);
}
extern "C" __global__ void spmm_f32_i64(const int64_t* rp, const int64_t* col, const float* a, const float* b,
                                        const float* x, float* y, int64_t n, int64_t d, int self_loop) {
    spmm_rows<float, int64_t>(rp, col, a, b, x, y, n, d, self_loop);
}
extern "C" __global__ void spmm_f64_i64(const int64_t* rp, const int64_t* col, const double* a, const double* b,
                                        const double* x, double* y, int64_t n, int64_t d, int self_loop) {
    spmm_rows<double, int64_t>(rp, col, a, b, x, y, n, d, self_loop);
}
