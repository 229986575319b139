// CUDA launchers of the HeterPoisson sampler (Alg. 2 + 3): indexing only, the bodies are in
// csrc/common/sampling.h (the ones csrc/cpu/sampling.cpp runs), so a step's batch has the
// same bits as the C++ build.  Launch shapes (ldpfast/_cuda/sampling.py): a thread per candidate
// (heter_central), per sub-graph (heter_nodes, heter_edges_*).  Compaction of the node slots
// and the prefix sums are torch ops in ldpfast/_cuda/sampling.py.  Inference sub-graphs (section 4.4):
// one thread per test node (heter_infer_*), count then fill.
#include "../common/sampling.h"

using namespace ldp;

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }

extern "C" __global__ void heter_central(const int64_t* cand, int64_t m, uint64_t seed, uint32_t step, double q,
                                         uint8_t* flags) {
    const int64_t i = thread_index();
    if (i >= m) return;
    flags[i] = heter::central_trial(seed, step, cand[i], q) ? 1 : 0;
}

template <class C>
__device__ void nodes_k(const int64_t* rp, const C* col, const int64_t* deg, const int64_t* centers, int64_t B,
                        const uint8_t* cand, const uint8_t* allow, uint64_t seed, uint32_t step, double q, double M,
                        int drop, const int64_t* ub_ptr, int64_t* counts, int64_t* n_id, uint8_t* zeroed) {
    const int64_t b = thread_index();
    if (b >= B) return;
    const int64_t out = ub_ptr[b];
    counts[b] = heter::nodes_row(rp, col, deg, centers[b], cand, allow, seed, step, q, M, drop != 0, n_id + out,
                                 zeroed + out);
}

// allow: null = every node may be peripheral.
extern "C" __global__ void heter_nodes_i32(const int64_t* rp, const int32_t* col, const int64_t* deg,
                                           const int64_t* centers, int64_t B, const uint8_t* cand,
                                           const uint8_t* allow, uint64_t seed, uint32_t step, double q, double M,
                                           int drop, const int64_t* ub_ptr, int64_t* counts, int64_t* n_id,
                                           uint8_t* zeroed) {
    nodes_k(rp, col, deg, centers, B, cand, allow, seed, step, q, M, drop, ub_ptr, counts, n_id, zeroed);
}
extern "C" __global__ void heter_nodes_i64(const int64_t* rp, const int64_t* col, const int64_t* deg,
                                           const int64_t* centers, int64_t B, const uint8_t* cand,
                                           const uint8_t* allow, uint64_t seed, uint32_t step, double q, double M,
                                           int drop, const int64_t* ub_ptr, int64_t* counts, int64_t* n_id,
                                           uint8_t* zeroed) {
    nodes_k(rp, col, deg, centers, B, cand, allow, seed, step, q, M, drop, ub_ptr, counts, n_id, zeroed);
}

// Count (fill = 0: counts[b]) or fill (fill = 1: src / dst at edge_ptr[b]) of every sub-graph.
template <class C>
__device__ void edges_k(const int64_t* rp, const C* col, const int64_t* n_id, const int64_t* node_ptr, int64_t B,
                        int induced, const int64_t* edge_ptr, int64_t* counts, int64_t* src, int64_t* dst,
                        int fill) {
    const int64_t b = thread_index();
    if (b >= B) return;
    const int64_t p0 = node_ptr[b], L = node_ptr[b + 1] - p0;
    const int64_t base = fill ? edge_ptr[b] : 0;
    int64_t k = 0;
    const int64_t cnt = heter::edges_row(rp, col, n_id, p0, L, induced != 0, [&](int64_t ls, int64_t lt) {
        if (fill) {
            src[base + k] = p0 + ls;
            dst[base + k] = p0 + lt;
        }
        ++k;
    });
    if (!fill) counts[b] = cnt;
}

extern "C" __global__ void heter_edges_i32(const int64_t* rp, const int32_t* col, const int64_t* n_id,
                                           const int64_t* node_ptr, int64_t B, int induced,
                                           const int64_t* edge_ptr, int64_t* counts, int64_t* src, int64_t* dst,
                                           int fill) {
    edges_k(rp, col, n_id, node_ptr, B, induced, edge_ptr, counts, src, dst, fill);
}
extern "C" __global__ void heter_edges_i64(const int64_t* rp, const int64_t* col, const int64_t* n_id,
                                           const int64_t* node_ptr, int64_t B, int induced,
                                           const int64_t* edge_ptr, int64_t* counts, int64_t* src, int64_t* dst,
                                           int fill) {
    edges_k(rp, col, n_id, node_ptr, B, induced, edge_ptr, counts, src, dst, fill);
}

// Inference sub-graphs: fill = 0 writes counts[b] (1 + kept neighbours); fill = 1 writes the
// node list of test node centers[b] at node_ptr[b].  allow: null = every node admissible.
template <class C>
__device__ void infer_k(const int64_t* rp, const C* col, const int64_t* centers, int64_t B, const uint8_t* allow,
                        uint64_t seed, uint32_t step, int64_t n_test, int64_t* counts, const int64_t* node_ptr,
                        int64_t* n_id, int fill) {
    const int64_t b = thread_index();
    if (b >= B) return;
    if (fill)
        heter::infer_row(rp, col, centers[b], allow, seed, step, n_test, n_id + node_ptr[b]);
    else
        counts[b] = heter::infer_count(rp, col, centers[b], allow, n_test);
}

extern "C" __global__ void heter_infer_i32(const int64_t* rp, const int32_t* col, const int64_t* centers, int64_t B,
                                           const uint8_t* allow, uint64_t seed, uint32_t step, int64_t n_test,
                                           int64_t* counts, const int64_t* node_ptr, int64_t* n_id, int fill) {
    infer_k(rp, col, centers, B, allow, seed, step, n_test, counts, node_ptr, n_id, fill);
}
extern "C" __global__ void heter_infer_i64(const int64_t* rp, const int64_t* col, const int64_t* centers, int64_t B,
                                           const uint8_t* allow, uint64_t seed, uint32_t step, int64_t n_test,
                                           int64_t* counts, const int64_t* node_ptr, int64_t* n_id, int fill) {
    infer_k(rp, col, centers, B, allow, seed, step, n_test, counts, node_ptr, n_id, fill);
}
