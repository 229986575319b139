// CUDA launchers of the feature and label randomisers and input checks: indexing only.  Every
// body is in csrc/common/features.h, the same code the C++ launchers (csrc/cpu/features.cpp)
// run, so the bits are identical for one seed.  Compile with --fmad=false.
// Launch shapes (ldpfast/_cuda/features.py): one thread per row (grr, grr_fs, multibit with m < d),
// per Philox block of 4 columns (onebit, multibit with m = d), per node (labels), per cell
// (checks).
#include "../common/features.h"

using namespace ldp;
using namespace ldp::feat;

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }

template <class I>
__device__ void grr_k(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, const uint64_t* seeds) {
    const int64_t i = thread_index();
    if (i >= n) return;
    grr_row<Cell>(x + i * d, out + i * d, d, k, T, seeds[i], 0);
}

extern "C" __global__ void grr_i32(const int32_t* x, int32_t* out, int64_t n, int64_t d, const int64_t* k,
                                   const uint64_t* T, const uint64_t* seeds) {
    grr_k(x, out, n, d, k, T, seeds);
}
extern "C" __global__ void grr_i64(const int64_t* x, int64_t* out, int64_t n, int64_t d, const int64_t* k,
                                   const uint64_t* T, const uint64_t* seeds) {
    grr_k(x, out, n, d, k, T, seeds);
}

// One thread: the per-call GRR-FS flags (fs_flags) into flags[0..1], read by grr_fs_*.
extern "C" __global__ void grr_fs_flags(const int64_t* k, int64_t d, int32_t* flags) {
    if (thread_index() != 0) return;
    const FsFlags f = fs_flags(k, d);
    flags[0] = f.uniform_b;
    flags[1] = f.pow2;
}

template <class I>
__device__ void grr_fs_k(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, int64_t m,
                         const uint64_t* seeds, const int32_t* flags) {
    const int64_t i = thread_index();
    if (i >= n) return;
    const FsFlags f = {flags[0], flags[1]};
    I* o = out + i * d;
    if (m != d) {
        fs_slots(o, d, k, f, seeds[i], 0);
        fs_select<Cell>(o, d, m, seeds[i], 0, [](int64_t) {});
    }
    fs_finish<Cell>(x + i * d, o, d, m, k, T, f, seeds[i], 0);
}

extern "C" __global__ void grr_fs_i32(const int32_t* x, int32_t* out, int64_t n, int64_t d, const int64_t* k,
                                      const uint64_t* T, int64_t m, const uint64_t* seeds, const int32_t* flags) {
    grr_fs_k(x, out, n, d, k, T, m, seeds, flags);
}
extern "C" __global__ void grr_fs_i64(const int64_t* x, int64_t* out, int64_t n, int64_t d, const int64_t* k,
                                      const uint64_t* T, int64_t m, const uint64_t* seeds, const int32_t* flags) {
    grr_fs_k(x, out, n, d, k, T, m, seeds, flags);
}

// 1-bit (sub = SUB_ONEBIT) and multi-bit with m = d (sub = SUB_MULTIBIT): thread = (row, block).
template <class F>
__device__ void onebit_k(const F* x, int8_t* out, int64_t n, int64_t d, double alpha, double beta, uint64_t T_lo,
                         double span, const uint64_t* seeds, uint32_t sub) {
    const int64_t nq = (d + 3) / 4;
    const int64_t t = thread_index();
    if (t >= n * nq) return;
    const int64_t i = t / nq, q = t % nq;
    onebit_block(x + i * d, out + i * d, d, q, alpha, beta, T_lo, span, seeds[i], sub, 0);
}

extern "C" __global__ void onebit_f32(const float* x, int8_t* out, int64_t n, int64_t d, double alpha, double beta,
                                      uint64_t T_lo, double span, const uint64_t* seeds, uint32_t sub) {
    onebit_k(x, out, n, d, alpha, beta, T_lo, span, seeds, sub);
}
extern "C" __global__ void onebit_f64(const double* x, int8_t* out, int64_t n, int64_t d, double alpha,
                                      double beta, uint64_t T_lo, double span, const uint64_t* seeds, uint32_t sub) {
    onebit_k(x, out, n, d, alpha, beta, T_lo, span, seeds, sub);
}

template <class F>
__device__ void multibit_k(const F* x, int8_t* out, int64_t n, int64_t d, int64_t m, double alpha, double beta,
                           uint64_t T_lo, double span, const uint64_t* seeds) {
    const int64_t i = thread_index();
    if (i >= n) return;
    multibit_row<Cell>(x + i * d, out + i * d, d, m, alpha, beta, T_lo, span, seeds[i], 0);
}

extern "C" __global__ void multibit_f32(const float* x, int8_t* out, int64_t n, int64_t d, int64_t m, double alpha,
                                        double beta, uint64_t T_lo, double span, const uint64_t* seeds) {
    multibit_k(x, out, n, d, m, alpha, beta, T_lo, span, seeds);
}
extern "C" __global__ void multibit_f64(const double* x, int8_t* out, int64_t n, int64_t d, int64_t m,
                                        double alpha, double beta, uint64_t T_lo, double span, const uint64_t* seeds) {
    multibit_k(x, out, n, d, m, alpha, beta, T_lo, span, seeds);
}

template <class I>
__device__ void rr_labels_k(const I* y, const bool* mask, I* out, int64_t n, uint64_t c, uint64_t T, const uint64_t* seeds) {
    const int64_t i = thread_index();
    if (i >= n) return;
    out[i] = rr_label(y[i], mask[i], c, T, seeds[i], 0);
}

extern "C" __global__ void rr_labels_i32(const int32_t* y, const bool* mask, int32_t* out, int64_t n, uint64_t c,
                                         uint64_t T, const uint64_t* seeds) {
    rr_labels_k(y, mask, out, n, c, T, seeds);
}
extern "C" __global__ void rr_labels_i64(const int64_t* y, const bool* mask, int64_t* out, int64_t n, uint64_t c,
                                         uint64_t T, const uint64_t* seeds) {
    rr_labels_k(y, mask, out, n, c, T, seeds);
}

// Checks: first[0] (all ones on entry) becomes the smallest bad flat index, whatever the
// thread order (atomicMin), as the C++ check returns.
template <class I>
__device__ void check_categorical_k(const I* x, int64_t n, int64_t d, const int64_t* k, unsigned long long* first) {
    const int64_t t = thread_index();
    if (t >= n * d) return;
    if (outside_domain(x[t], k[t % d])) atomicMin(first, (unsigned long long)t);
}

extern "C" __global__ void check_categorical_i32(const int32_t* x, int64_t n, int64_t d, const int64_t* k,
                                                 unsigned long long* first) {
    check_categorical_k(x, n, d, k, first);
}
extern "C" __global__ void check_categorical_i64(const int64_t* x, int64_t n, int64_t d, const int64_t* k,
                                                 unsigned long long* first) {
    check_categorical_k(x, n, d, k, first);
}

template <class F>
__device__ void check_range_k(const F* x, int64_t N, double alpha, double beta, unsigned long long* first) {
    const int64_t t = thread_index();
    if (t >= N) return;
    if (outside_range(x[t], alpha, beta)) atomicMin(first, (unsigned long long)t);
}

extern "C" __global__ void check_range_f32(const float* x, int64_t N, double alpha, double beta,
                                           unsigned long long* first) {
    check_range_k(x, N, alpha, beta, first);
}
extern "C" __global__ void check_range_f64(const double* x, int64_t N, double alpha, double beta,
                                           unsigned long long* first) {
    check_range_k(x, N, alpha, beta, first);
}
