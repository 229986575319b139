// Synthetic-graph per-row / per-cell bodies shared by csrc/cpu/synthetic.cpp (std::thread over
// rows) and csrc/cuda/synthetic.cu (one CUDA thread per row or cell): the class permutation of
// a rank block, the id key of a rank, a row's expected edge count, the Miller-Hagberg walk of
// a row (draw addressing, skip bound, acceptance test), the trim priorities and the feature
// cells.  Same words in the same order on both builds, so the graphs are the same bits for one
// seed by construction.  See synthetic.cpp for the model; the Numba twin is
// ldpfast/_numba/synthetic.py.  Host-only functions (std::, malloc) cannot appear here.
#pragma once
#include "rng.h"

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace synth {

// Row at which the class prototypes of the features are drawn (rows of nodes are < 2^31;
// the Philox row field has 48 bits).
constexpr uint64_t PROTO_ROW = 1ull << 47;
// Positions per block of the weight bound tables (see walk_row).
constexpr int BLOCK_SHIFT = 6;
// Acceptance ratio below which the skip bound is refreshed (see walk_row).
constexpr double REFRESH = 0.9375;

LDP_HD double min1(double x) { return x < 1.0 ? x : 1.0; }

// The edge model in position order (class, then weight descending inside a class).
struct View {
    const double* W;      // (n) target weight per position, descending inside a class
    const int32_t* cls;   // (n) class per position
    const int64_t* seg;   // (C + 1) class segment starts
    const double* fmat;   // (C * C) homophily factors
    const double* wmax;   // (n >> BLOCK_SHIFT, rounded up) max / min of W per block; may be
    const double* wmin;   //   null for expected_row, which does not read them
    int64_t n, C;
    double scale;         // alpha / S
};

// Candidates of row s (class a) in class segment k >= a: [lo, hi) with factor f; lo >= hi
// when there are none (segment empty, or f = 0).
struct Segment {
    double f;
    int64_t lo, hi;
};

LDP_HD Segment segment(const View& V, int64_t s, int64_t a, int64_t k) {
    Segment r;
    r.f = V.fmat[a * V.C + k];
    r.lo = (k == a) ? s + 1 : V.seg[k];
    r.hi = V.seg[k + 1];
    if (!(r.f > 0.0)) r.hi = r.lo;
    return r;
}

// Class of the ranks of block blk (ranks blk*C ..): a Fisher-Yates permutation of 0..C-1 from
// CellRng(seed, SYNTH_CLASS, blk, 0) into perm (C entries, scratch and output).
LDP_HD void class_block(uint64_t seed, int64_t C, int64_t blk, int32_t* perm) {
    for (int64_t i = 0; i < C; ++i) perm[i] = (int32_t)i;
    CellRng g(seed, STREAM_SYNTH_CLASS, (uint64_t)blk, 0);
    for (int64_t i = C - 1; i > 0; --i) {
        const int64_t j = (int64_t)g.randint((uint64_t)(i + 1));
        const int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}

// 64-bit key of rank r; the sort order of the keys assigns node ids to ranks.
LDP_HD uint64_t node_key(uint64_t seed, int64_t r) {
    return CellRng(seed, STREAM_SYNTH_DEGREE, (uint64_t)r, 0).next_u64();
}

// Expected upper-triangle edges of row s: returns trunc + lin, *lin = the linear part
// (pairs with p < 1).  P = prefix sums of W (n + 1).
LDP_HD double expected_row(const View& V, const double* P, int64_t s, double* lin_out) {
    const int64_t a = V.cls[s];
    int64_t trunc = 0;
    double lin = 0.0;
    for (int64_t k = a; k < V.C; ++k) {
        const Segment sg = segment(V, s, a, k);
        if (sg.lo >= sg.hi) continue;
        const double cu = V.scale * V.W[s] * sg.f;
        // first t in [lo, hi) with cu * W[t] < 1 (W descending in the segment)
        int64_t l = sg.lo, h = sg.hi;
        while (l < h) {
            const int64_t mid = l + (h - l) / 2;
            if (cu * V.W[mid] >= 1.0) l = mid + 1;
            else h = mid;
        }
        trunc += l - sg.lo;
        lin += cu * (P[sg.hi] - P[l]);
    }
    *lin_out = lin;
    return (double)trunc + lin;
}

// Miller-Hagberg walk over row s: calls emit(t) for every accepted t > s, in ascending t.
// Segment k draws from CellRng(seed, SYNTH_EDGES, s, attempt * C + k).  Thinning with a bound
// pb >= p_t for every remaining candidate (W descends inside a segment): skip Geometric(pb)
// candidates, accept the landing t with probability p_t / pb.  Miller & Hagberg set pb = p_t
// after every candidate; here pb is refreshed (to the bound given by the landing block's
// largest weight) only when that would lower it by more than 1/16, so log(1 - pb) is
// recomputed rarely while few candidates are rejected.  The acceptance test U * pb < p_t is
// first decided with the block's min / max weight (small tables that stay in cache); W[t]
// itself is read only when those do not decide it, which gives the same decision as reading
// it (rounding is monotone), without a cache miss per candidate.  Exact for any valid bound.
template <class Emit>
LDP_HD void walk_row(const View& V, uint64_t seed, int64_t attempt, int64_t s, Emit&& emit) {
    const int64_t a = V.cls[s];
    for (int64_t k = a; k < V.C; ++k) {
        const Segment sg = segment(V, s, a, k);
        if (sg.lo >= sg.hi) continue;
        const int64_t hi = sg.hi;
        CellRng g(seed, STREAM_SYNTH_EDGES, (uint64_t)s, (uint32_t)(attempt * V.C + k));
        const double cu = V.scale * V.W[s] * sg.f;
        int64_t t = sg.lo;
        double pb = min1(cu * V.W[t]);
        double lg = pb < 1.0 ? det_log1p(-pb) : 0.0;
        for (;;) {
            if (!(pb > 0.0)) break;
            if (pb < 1.0) {
                // Geometric(pb) = floor(log(U) / log(1 - pb)), as CellRng::geometric
                const double x = det_log(g.uniform()) / lg;
                if (!(x < (double)(hi - t))) break;
                t += (int64_t)x;
            }
            const int64_t blk = t >> BLOCK_SHIFT;
            const double qlo = min1(cu * V.wmin[blk]);
            const double qhi = min1(cu * V.wmax[blk]);
            bool acc = qlo >= pb;  // then p_t >= pb: accept without a draw
            if (!acc) {
                const double u = g.uniform() * pb;
                acc = u < qlo || (u < qhi && u < min1(cu * V.W[t]));
            }
            if (acc) emit(t);
            if (++t >= hi) break;
            if (qhi < pb * REFRESH) {
                pb = qhi;
                lg = det_log1p(-pb);
            }
        }
    }
}

// Generator of row s's trim priorities: the k-th upper-triangle edge of the row gets the k-th
// 32-bit word (one Philox block gives four).
LDP_HD CellRng trim_rng(uint64_t seed, int64_t s) { return CellRng(seed, STREAM_SYNTH_TRIM, (uint64_t)s, 0); }

// Prototype of (class c, feature j): 0.5 + signal * (U - 0.5).
LDP_HD double feature_proto(uint64_t seed, int64_t c, int64_t j, double signal) {
    return 0.5 + signal * (CellRng(seed, STREAM_SYNTH_FEATURES, PROTO_ROW + (uint64_t)c, (uint32_t)j).uniform() - 0.5);
}

// Feature (v, j) given its class prototype q: kind 0 (binary) 1 if U < q else 0; kind 1
// (continuous) clip(q + U - 0.5, 0, 1).  The caller casts to the output type.
LDP_HD double feature_value(uint64_t seed, int64_t v, int64_t j, double q, int kind) {
    const double u = CellRng(seed, STREAM_SYNTH_FEATURES, (uint64_t)v, (uint32_t)j).uniform();
    if (kind == 0) return u < q ? 1.0 : 0.0;
    const double t = q + u - 0.5;
    return t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
}

// Output casts of feature_value.  double -> float rounds to nearest without flushing: CuPy
// compiles with -ftz=true, which would turn (float)v into cvt.rn.ftz.f32.f64 on the device.
LDP_HD float to_out(double v, float*) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("cvt.rn.f32.f64 %0, %1;" : "=f"(r) : "d"(v));
    return r;
#else
    return (float)v;
#endif
}
LDP_HD uint8_t to_out(double v, uint8_t*) { return (uint8_t)v; }  // binary: v is 0 or 1

}  // namespace synth
}  // namespace ldp
