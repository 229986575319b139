// CUDA launchers of the edge-LDP kernels: indexing only.  The bodies are in
// csrc/common/edges.h, the ones csrc/cpu/edges.cpp runs, so the noisy lists, LocalLap values
// and server-side combinations are the same bits as the C++ build for one seed.
// Launch shapes (ldpfast/_cuda/edges.py): one thread per node (dprr_probs) or per row (everything
// else).  Output sizes: a count launch writes each row's size, ldpfast/_cuda/edges.py prefix-sums
// them on the device (torch.cumsum) and reads the total once to allocate, then a fill launch
// writes each row at its offset.  Compile with --fmad=false (dprr_probs rounds like NumPy).
#include "../common/edges.h"

using namespace ldp;
using namespace ldp::edges;

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }

// DPRR lines 2-7 per user: d_star, q, p_true, p_false from the degree and the noise draw.
extern "C" __global__ void dprr_probs(const int64_t* rowptr, const int64_t* noise, int64_t n, double g, double p,
                                      double pm, double* d_star, double* q, double* p_true, double* p_false) {
    const int64_t i = thread_index();
    if (i >= n) return;
    const DprrProbs r = edges::dprr_probs(rowptr[i + 1] - rowptr[i], noise[i], g, n, p, pm);
    d_star[i] = r.d_star;
    q[i] = r.q;
    p_true[i] = r.p_true;
    p_false[i] = r.p_false;
}

// Sparse RR: fill = 0 writes counts[i]; fill = 1 writes row i at out_rowptr[i] (pub: null = nobody public).
template <class C>
__device__ void rr_k(const int64_t* rp, const C* col, int64_t n, uint64_t seed, uint32_t st_t, uint32_t c_t,
                     uint32_t st_f, uint32_t c_f, const double* pt, const double* pf, const uint8_t* pub,
                     int64_t* counts, const int64_t* orp, C* ocol, int fill) {
    const int64_t i = thread_index();
    if (i >= n) return;
    const RRArgs A = {seed, st_t, c_t, st_f, c_f, pt, pf, pub, n};
    const C* nb = col + rp[i];
    const int64_t d = rp[i + 1] - rp[i];
    if (fill)
        rr_row_fill(A, i, nb, d, ocol + orp[i]);
    else
        counts[i] = rr_row_count(A, i, nb, d);
}

extern "C" __global__ void rr_edges_i32(const int64_t* rp, const int32_t* col, int64_t n, uint64_t seed,
                                        uint32_t st_t, uint32_t c_t, uint32_t st_f, uint32_t c_f, const double* pt,
                                        const double* pf, const uint8_t* pub, int64_t* counts, const int64_t* orp,
                                        int32_t* ocol, int fill) {
    rr_k(rp, col, n, seed, st_t, c_t, st_f, c_f, pt, pf, pub, counts, orp, ocol, fill);
}
extern "C" __global__ void rr_edges_i64(const int64_t* rp, const int64_t* col, int64_t n, uint64_t seed,
                                        uint32_t st_t, uint32_t c_t, uint32_t st_f, uint32_t c_f, const double* pt,
                                        const double* pf, const uint8_t* pub, int64_t* counts, const int64_t* orp,
                                        int64_t* ocol, int fill) {
    rr_k(rp, col, n, seed, st_t, c_t, st_f, c_f, pt, pf, pub, counts, orp, ocol, fill);
}

// LocalLap values of the true upper-triangular entries in round rnd (ll_edge_row): round
// rnd >= 1 decides only the entries still LL_NOT_CAND (as csrc/cpu/edges.cpp).
template <class C>
__device__ void ll_values_k(const int64_t* rp, const C* col, int64_t n, uint64_t seed, uint64_t t, uint64_t s,
                            int64_t one, uint32_t rnd, int64_t lo, int64_t hi, double p, int64_t* out) {
    const int64_t i = thread_index();
    if (i >= n) return;
    const bool fast = ll_edge_fast(rnd, lo, hi, one);
    const GeomParams gp = geom_params(fast ? p : 0.0);
    ll_edge_row(i, col + rp[i], rp[i + 1] - rp[i], seed, t, s, one, rnd, lo, hi, fast, gp, out + rp[i]);
}

extern "C" __global__ void ll_edge_values_i32(const int64_t* rp, const int32_t* col, int64_t n, uint64_t seed,
                                              uint64_t t, uint64_t s, int64_t one, uint32_t rnd, int64_t lo,
                                              int64_t hi, double p, int64_t* out) {
    ll_values_k(rp, col, n, seed, t, s, one, rnd, lo, hi, p, out);
}
extern "C" __global__ void ll_edge_values_i64(const int64_t* rp, const int64_t* col, int64_t n, uint64_t seed,
                                              uint64_t t, uint64_t s, int64_t one, uint32_t rnd, int64_t lo,
                                              int64_t hi, double p, int64_t* out) {
    ll_values_k(rp, col, n, seed, t, s, one, rnd, lo, hi, p, out);
}

// LocalLap zero candidates of one round: fill = 0 writes counts[i]; fill = 1 writes the picks
// of row i (columns and values; LL_HIGH above the split) at out_rowptr[i].
template <class C>
__device__ void ll_zero_k(const int64_t* erp, const C* ecol, int64_t n, uint64_t seed, uint32_t round, double pi,
                          int64_t lo, int64_t hi, int split, uint64_t t, uint64_t s, int64_t* counts,
                          const int64_t* orp, C* ocol, int64_t* oval, int fill) {
    const int64_t i = thread_index();
    if (i >= n) return;
    C* wc = fill ? ocol + orp[i] : nullptr;
    int64_t* wv = fill ? oval + orp[i] : nullptr;
    int64_t o = 0;
    const int64_t cnt = ll_zero_row(i, n, ecol + erp[i], erp[i + 1] - erp[i], seed, round, pi, lo, hi, split != 0,
                                    t, s, fill != 0, [&](int64_t c, int64_t v) {
                                        wc[o] = (C)c;
                                        wv[o] = v;
                                        ++o;
                                    });
    if (!fill) counts[i] = cnt;
}

extern "C" __global__ void ll_zero_i32(const int64_t* erp, const int32_t* ecol, int64_t n, uint64_t seed,
                                       uint32_t round, double pi, int64_t lo, int64_t hi, int split, uint64_t t,
                                       uint64_t s, int64_t* counts, const int64_t* orp, int32_t* ocol, int64_t* oval,
                                       int fill) {
    ll_zero_k(erp, ecol, n, seed, round, pi, lo, hi, split, t, s, counts, orp, ocol, oval, fill);
}
extern "C" __global__ void ll_zero_i64(const int64_t* erp, const int64_t* ecol, int64_t n, uint64_t seed,
                                       uint32_t round, double pi, int64_t lo, int64_t hi, int split, uint64_t t,
                                       uint64_t s, int64_t* counts, const int64_t* orp, int64_t* ocol, int64_t* oval,
                                       int fill) {
    ll_zero_k(erp, ecol, n, seed, round, pi, lo, hi, split, t, s, counts, orp, ocol, oval, fill);
}

// Row-wise combination of two CSRs (modes of combine_row): fill = 0 counts, 1 writes.
template <class C>
__device__ void combine_k(const int64_t* ra, const C* ca, const int64_t* rb, const C* cb, int64_t n, int mode,
                          int64_t* counts, const int64_t* orp, C* oc, int fill) {
    const int64_t i = thread_index();
    if (i >= n) return;
    const int64_t got = combine_row(i, ca + ra[i], ra[i + 1] - ra[i], cb + rb[i], rb[i + 1] - rb[i], mode,
                                    fill ? oc + orp[i] : (C*)nullptr);
    if (!fill) counts[i] = got;
}

extern "C" __global__ void csr_combine_i32(const int64_t* ra, const int32_t* ca, const int64_t* rb,
                                           const int32_t* cb, int64_t n, int mode, int64_t* counts,
                                           const int64_t* orp, int32_t* oc, int fill) {
    combine_k(ra, ca, rb, cb, n, mode, counts, orp, oc, fill);
}
extern "C" __global__ void csr_combine_i64(const int64_t* ra, const int64_t* ca, const int64_t* rb,
                                           const int64_t* cb, int64_t n, int mode, int64_t* counts,
                                           const int64_t* orp, int64_t* oc, int fill) {
    combine_k(ra, ca, rb, cb, n, mode, counts, orp, oc, fill);
}
