// CUDA launchers of the graph-structure kernels the edge mechanisms need on the device:
// indexing only, bodies in csrc/common/graph.h (the C++ check in csrc/cpu/edges.cpp runs the
// same check_row and sorted_entry).  COO -> CSR, sort / dedup and transpose stay torch-native on CUDA
// (ldpfast/graph.py: stable sorts, deterministic, and as fast as a hand-written radix sort).
// Launch shapes (ldpfast/_cuda/graph.py): one thread per row.
#include "../common/graph.h"

using namespace ldp;
using namespace ldp::graph;

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }

// out[0] |= flags of the CSR, out[1] += symmetry fingerprint (mod 2^64; both commute, so the
// result does not depend on the thread order).  out must be zeroed before the launch.
template <class C>
__device__ void check_k(const int64_t* rp, const C* col, int64_t n, unsigned long long* out) {
    const int64_t i = thread_index();
    if (i >= n) return;
    uint64_t h = 0;
    const int64_t f = check_row(i, n, col + rp[i], rp[i + 1] - rp[i], h);
    if (f) atomicOr(out, (unsigned long long)f);
    if (h) atomicAdd(out + 1, (unsigned long long)h);
}

extern "C" __global__ void check_csr_i32(const int64_t* rp, const int32_t* col, int64_t n, unsigned long long* out) {
    check_k(rp, col, n, out);
}
extern "C" __global__ void check_csr_i64(const int64_t* rp, const int64_t* col, int64_t n, unsigned long long* out) {
    check_k(rp, col, n, out);
}

// (2, nnz) int64 edge_index of a CSR: layout 0 gives (col, row), 1 gives (row, col).
template <class C>
__device__ void to_ei_k(const int64_t* rp, const C* col, int64_t n, int64_t* ei, int layout) {
    const int64_t i = thread_index();
    if (i >= n) return;
    const int64_t nnz = rp[n];
    int64_t* e_col = ei + (layout == 0 ? 0 : nnz);
    int64_t* e_row = ei + (layout == 0 ? nnz : 0);
    for (int64_t k = rp[i]; k < rp[i + 1]; ++k) {
        e_col[k] = (int64_t)col[k];
        e_row[k] = i;
    }
}

extern "C" __global__ void csr_to_edge_index_i32(const int64_t* rp, const int32_t* col, int64_t n, int64_t* ei,
                                                 int layout) {
    to_ei_k(rp, col, n, ei, layout);
}
extern "C" __global__ void csr_to_edge_index_i64(const int64_t* rp, const int64_t* col, int64_t n, int64_t* ei,
                                                 int layout) {
    to_ei_k(rp, col, n, ei, layout);
}

// CSR of an edge_index sorted by (source, target), checked in the same pass (edges_sorted_csr
// of the C++ build): each thread takes SORTED_CHUNK consecutive edges, writes col and the row
// starts of the rows beginning at its edges, and adds its flags (OR) and fingerprint terms
// (sum mod 2^64) to out[0], out[1] once (zeroed before the launch).  The rows after the last
// source are written by the thread of edge E - 1.  With FLAG_RANGE or FLAG_ORDER set the
// outputs are partial and the caller discards them.
#define SORTED_CHUNK 32

template <class I, class C>
__device__ void sorted_k(const I* src, const I* dst, int64_t E, int64_t n, int64_t* rp, C* col,
                         unsigned long long* out) {
    const int64_t e0 = thread_index() * SORTED_CHUNK;
    if (e0 >= E) return;
    const int64_t e1 = e0 + SORTED_CHUNK < E ? e0 + SORTED_CHUNK : E;
    int64_t f = 0;
    uint64_t h = 0;
    for (int64_t e = e0; e < e1; ++e) {
        int64_t r, c, pr;
        const int64_t fe = sorted_entry(n, e, src, dst, r, c, pr);
        f |= fe;
        if (fe & (FLAG_RANGE | FLAG_ORDER)) break;
        col[e] = (C)c;
        for (int64_t rr = pr + 1 > 0 ? pr + 1 : 0; rr <= r; ++rr) rp[rr] = e;  // rows (pr, r] start here
        if (e == E - 1)
            for (int64_t rr = r + 1; rr <= n; ++rr) rp[rr] = E;
        h += sym_term(r, c);
    }
    if (f) atomicOr(out, (unsigned long long)f);
    if (h) atomicAdd(out + 1, (unsigned long long)h);
}

extern "C" __global__ void sorted_csr_i32_i32(const int32_t* src, const int32_t* dst, int64_t E, int64_t n,
                                              int64_t* rp, int32_t* col, unsigned long long* out) {
    sorted_k(src, dst, E, n, rp, col, out);
}
extern "C" __global__ void sorted_csr_i32_i64(const int32_t* src, const int32_t* dst, int64_t E, int64_t n,
                                              int64_t* rp, int64_t* col, unsigned long long* out) {
    sorted_k(src, dst, E, n, rp, col, out);
}
extern "C" __global__ void sorted_csr_i64_i32(const int64_t* src, const int64_t* dst, int64_t E, int64_t n,
                                              int64_t* rp, int32_t* col, unsigned long long* out) {
    sorted_k(src, dst, E, n, rp, col, out);
}
extern "C" __global__ void sorted_csr_i64_i64(const int64_t* src, const int64_t* dst, int64_t E, int64_t n,
                                              int64_t* rp, int64_t* col, unsigned long long* out) {
    sorted_k(src, dst, E, n, rp, col, out);
}
