// CUDA launchers of the synthetic-graph generator: indexing only.  The bodies are in
// csrc/common/synthetic.h, the ones csrc/cpu/synthetic.cpp runs, so the sampled upper
// triangle, the trim priorities and the features are the same bits as the C++ build for one
// seed.  Launch shapes (ldpfast/_cuda/synthetic.py): one thread per row (synth_edges, synth_priorities),
// per (class, feature) prototype (synth_proto) or per feature cell (synth_features_*).
// Output size: a count launch writes each row's edge count, ldpfast/_cuda/synthetic.py prefix-sums them
// on the device and reads the total once to allocate, then a fill launch writes each row at
// its offset (the edge list never goes through the host).  The trim (a stable device sort of
// the priorities) and the symmetric CSR (a device sort of 64-bit keys) are torch ops in
// ldpfast/datasets/synthetic.py.  Compile with --fmad=false (det_log must round as on the CPU).
#include "../common/synthetic.h"

using namespace ldp;
using namespace ldp::synth;

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }

// Miller-Hagberg walk of row s (walk_row): fill = 0 writes counts[s]; fill = 1 writes the
// accepted positions of row s at col[rowptr[s] ..] in ascending order.
extern "C" __global__ void synth_edges(const double* W, const int32_t* cls, const int64_t* seg, const double* fmat,
                                       const double* wmax, const double* wmin, int64_t n, int64_t C, double scale,
                                       uint64_t seed, int64_t attempt, int64_t* counts, const int64_t* rowptr,
                                       int32_t* col, int fill) {
    const int64_t s = thread_index();
    if (s >= n) return;
    const View V = {W, cls, seg, fmat, wmax, wmin, n, C, scale};
    if (fill) {
        int32_t* w = col + rowptr[s];
        walk_row(V, seed, attempt, s, [&](int64_t t) { *w++ = (int32_t)t; });
    } else {
        int64_t m = 0;
        walk_row(V, seed, attempt, s, [&](int64_t) { ++m; });
        counts[s] = m;
    }
}

// Trim priority of every upper-triangle edge of row s (as int64, for a torch sort).
extern "C" __global__ void synth_priorities(const int64_t* rowptr, int64_t n, uint64_t seed, int64_t* prio) {
    const int64_t s = thread_index();
    if (s >= n) return;
    CellRng g = trim_rng(seed, s);
    for (int64_t j = rowptr[s]; j < rowptr[s + 1]; ++j) prio[j] = (int64_t)g.next_u32();
}

// Prototype table q (C * d) of the features.
extern "C" __global__ void synth_proto(uint64_t seed, int64_t C, int64_t d, double signal, double* q) {
    const int64_t i = thread_index();
    if (i >= C * d) return;
    q[i] = feature_proto(seed, i / d, i % d, signal);
}

template <class T>
__device__ void features_k(uint64_t seed, const int64_t* y, int64_t n, int64_t d, const double* q, int kind, T* x) {
    const int64_t i = thread_index();
    if (i >= n * d) return;
    const int64_t v = i / d, j = i % d;
    x[i] = to_out(feature_value(seed, v, j, q[y[v] * d + j], kind), (T*)nullptr);
}

extern "C" __global__ void synth_features_f32(uint64_t seed, const int64_t* y, int64_t n, int64_t d, const double* q,
                                              int kind, float* x) {
    features_k(seed, y, n, d, q, kind, x);
}
extern "C" __global__ void synth_features_u8(uint64_t seed, const int64_t* y, int64_t n, int64_t d, const double* q,
                                             int kind, uint8_t* x) {
    features_k(seed, y, n, d, q, kind, x);
}
