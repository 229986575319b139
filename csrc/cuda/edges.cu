// CUDA launchers of the edge-LDP kernels.  The bodies are in csrc/common/edges.h, the ones
// csrc/cpu/edges.cpp runs, so the noisy lists, LocalLap values and server-side combinations are
// the same bits as the C++ build for one seed.
// Launch shapes (ldpfast/_cuda/edges.py): one thread per node (dprr_probs), a warp per row (the
// sparse RR sampler, below) or a thread per row (everything else).  Output sizes: a count launch
// writes each row's size, ldpfast/_cuda/edges.py prefix-sums them on the device (torch.cumsum) and
// reads the total once to allocate, then a fill launch writes each row at its offset.  Compile
// with --fmad=false (dprr_probs rounds like NumPy).
//
// The sparse RR sampler (DPRR and Warner RR, rr_edges_*): a warp per row, the C++ row's draws
// read from the same cells in the same order (rr_row_count / rr_row_fill):
// * true edges in chunks of 32 neighbours, lane l deciding neighbour e + l (coalesced) from word
//   tw + l of the row's true cell: one word per edge (bernoulli_words) unless it ties with the
//   threshold's first digit (probability 2^-32), which the tying lane settles from the following
//   words, and the chunk resumes after it.  The warp keeps 128 words of the cell in shared memory
//   (one Philox block per lane per refill).
// * false edges: the geometric gaps of the row's false cell are one sequential stream of draws of
//   varying length.  Each round, lane l draws a gap speculatively from word fw + l (from the
//   warp's 128-word window); a walk over the lanes (shuffles) follows the chain from lane 0, each
//   draw's successor starting where it ended; the chained lanes' gaps give the positions by a
//   warp prefix sum.  A draw that would read past the window stops the round there; the window is
//   reloaded at that draw (one longer than the window is settled by lane 0 from the cell itself).
// * fill: positions become node ids by a binary search over the neighbours (SkipMap's answer),
//   and the kept neighbours and the false ids, two sorted streams, are merged 32 at a time
//   through shared memory: each element's output index is its rank in its stream plus the number
//   of the other stream's elements below it.
#include "../common/edges.h"

using namespace ldp;
using namespace ldp::edges;

#define FULL_MASK 0xffffffffu

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int lane_id() { return (int)(threadIdx.x & 31); }

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

// ---- sparse RR, a warp per row ----------------------------------------------------------------
constexpr int RR_WARPS = 8;   // warps of the launcher's 256-thread block
constexpr int RR_WIN = 128;   // words of a cell a warp holds: one Philox block per lane
// Two blocks per SM: at most 128 registers a thread, which the sampler fits without spilling
// (130 unbounded, one block per SM; three blocks spill 424 bytes).
#define RR_BOUNDS __launch_bounds__(256, 2)

// Words [w0, w0 + 128) of one cell's stream in the warp's shared memory (warp-uniform members).
struct WarpWords {
    uint32_t* win;
    uint64_t seed, row;
    uint32_t stream, col;
    int64_t w0;  // -1: empty

    // The window from word w's block on (every lane calls it).
    __device__ void load(int64_t w) {
        __syncwarp();  // every lane is done with the old window
        const int lane = lane_id();
        w0 = w & ~(int64_t)3;
        const u32x4 r = CellRng(seed, stream, row, col).block((uint32_t)((w0 >> 2) + lane));
        win[4 * lane] = r.v[0];
        win[4 * lane + 1] = r.v[1];
        win[4 * lane + 2] = r.v[2];
        win[4 * lane + 3] = r.v[3];
        __syncwarp();
    }
    // Words [w, w + span) in the window (span <= 125).
    __device__ void cover(int64_t w, int64_t span) {
        if (w0 < 0 || w < w0 || w + span > w0 + RR_WIN) load(w);
    }
};

// One lane's reader of a window from word p on, for geom_draw and bernoulli_words: past the
// window it sets `over` and reads zeros (every sampler ends on zeros; the draw is then discarded).
struct WindowReader {
    const uint32_t* win;
    int64_t w0, end, p;
    bool over;
    __device__ uint32_t next_u32() {
        if (p >= end) {
            over = true;
            return 0u;
        }
        return win[(p++) - w0];
    }
    __device__ uint64_t next_u64() {
        const uint64_t hi = next_u32();
        return (hi << 32) | next_u32();
    }
};

// Keep decisions of row i's true edges e .. e + c - 1 (c <= 32), lane l's for edge e + l, in
// neighbour order from word tw on (keep_true's draws).  Returns how many were decided: all c,
// or up to and including the first tie, settled by its lane from the words after it.
__device__ int true_chunk(WarpWords& T, int64_t& tw, double pt, const BernoulliWords& bw, int c, bool& keep) {
    const int lane = lane_id();
    const bool in = lane < c;
    if (!(pt < 1.0) || !(pt > 0.0)) {  // no words: always (pt >= 1) or never kept
        keep = in && pt >= 1.0;
        return c;
    }
    T.cover(tw, 32);
    const uint32_t w = in ? T.win[tw + lane - T.w0] : 0u;
    const unsigned tie = __ballot_sync(FULL_MASK, in && (uint64_t)w == bw.K);
    if (!tie) {
        keep = in && (uint64_t)w < bw.K;
        tw += c;
        return c;
    }
    const int t = __ffs((int)tie) - 1;
    int kt = 0;
    unsigned long long used = 0;
    if (lane == t) {  // bernoulli_words' next digits, from the words after the tie
        CellRng g(T.seed, T.stream, T.row, T.col);
        g.seek((uint64_t)(tw + t + 1));
        kt = bernoulli_words(g, bw.Q - (double)bw.K) ? 1 : 0;
        used = g.word() - (uint64_t)(tw + t + 1);
    }
    kt = __shfl_sync(FULL_MASK, kt, t);
    used = __shfl_sync(FULL_MASK, used, t);
    keep = lane < t ? (uint64_t)w < bw.K : (lane == t && kt != 0);
    tw += t + 1 + (int64_t)used;
    return t + 1;
}

// Row i's false positions (rr_false_positions' k, increasing in [0, mf)), a round at a time.
struct FalseWalk {
    WarpWords F;
    GeomParams gp;
    int64_t mf, fw, kcur;  // positions, the next word, the last position (-1 at first)
    bool done, all;        // all: p_false >= 1 (every position, no words)
};

// The next round: returns the lanes holding a position (this lane's in k), in increasing k with
// the lane; sets done after the row's last position.
__device__ unsigned false_round(FalseWalk& W, int64_t& k) {
    const int lane = lane_id();
    if (W.all) {
        k = W.kcur + 1 + lane;
        W.kcur += 32;
        if (W.kcur >= W.mf - 1) W.done = true;
        return __ballot_sync(FULL_MASK, k < W.mf);
    }
    int64_t gap = 0;
    unsigned starts = 0;
    int cur = 0;
    for (;;) {
        W.F.cover(W.fw, 32);
        WindowReader r{W.F.win, W.F.w0, W.F.w0 + RR_WIN, W.fw + lane, false};
        gap = geom_draw(r, W.gp);  // speculative: the draw that would start at word fw + lane
        const int len = (int)(r.p - (W.fw + lane)), over = r.over ? 1 : 0;
        starts = 0;
        cur = 0;
        while (cur < 32) {  // the chain from lane 0: a start's successor begins where it ended
            if (__shfl_sync(FULL_MASK, over, cur)) break;
            const int ln = __shfl_sync(FULL_MASK, len, cur);
            starts |= 1u << cur;
            cur += ln;
        }
        if (starts) break;
        if (W.F.w0 != (W.fw & ~(int64_t)3)) {  // the draw at fw runs past the window: move it there
            W.F.load(W.fw);
            continue;
        }
        unsigned long long used = 0;  // longer than a window (> 124 words): lane 0 from the cell
        if (lane == 0) {
            CellRng g(W.F.seed, W.F.stream, W.F.row, W.F.col);
            g.seek((uint64_t)W.fw);
            gap = geom_draw(g, W.gp);
            used = g.word() - (uint64_t)W.fw;
        }
        starts = 1u;
        cur = (int)__shfl_sync(FULL_MASK, used, 0);
        break;
    }
    const bool st = (starts >> lane) & 1u;
    int64_t s = st ? (gap >= W.mf ? W.mf + 1 : gap + 1) : 0;  // capped: one past the end is the end
    for (int o = 1; o < 32; o <<= 1) {
        const int64_t u = __shfl_up_sync(FULL_MASK, s, o);
        if (lane >= o) s += u;
    }
    k = W.kcur + s;
    const bool ok = st && k < W.mf;
    const unsigned valid = __ballot_sync(FULL_MASK, ok);
    if (__ballot_sync(FULL_MASK, st && !ok)) {
        W.done = true;
    } else {
        W.fw += cur;
        W.kcur = __shfl_sync(FULL_MASK, k, 31 - __clz((int)starts));
    }
    return valid;
}

// The k-th (0-based) node that is neither i nor a neighbour (nb sorted, i at index xpos among
// them): k + #{t : x_t - t <= k} over the excluded x (SkipMap::map's answer), by binary search.
template <class C>
__device__ int64_t skip_id(const C* nb, int64_t d, int64_t i, int64_t xpos, int64_t k) {
    int64_t lo = 0, hi = d + 1;
    while (lo < hi) {
        const int64_t mid = (lo + hi) >> 1;
        const int64_t x = mid < xpos ? (int64_t)nb[mid] : (mid == xpos ? i : (int64_t)nb[mid - 1]);
        if (x - mid <= k) lo = mid + 1;
        else hi = mid;
    }
    return k + lo;
}

// #{a[t] < x} of a sorted shared array a[0..n).
__device__ __forceinline__ int below(const int64_t* a, int n, int64_t x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (a[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Row i by the warp: its size (w null) or the row written sorted into w.  sA, sB: 32 int64 each
// of shared memory (the false ids, the kept neighbours of the current round / chunk).
template <class C>
__device__ int64_t rr_row_warp(const RRArgs& A, int64_t i, const C* nb, int64_t d, uint32_t* twin, uint32_t* fwin,
                               int64_t* sA, int64_t* sB, C* w) {
    const int lane = lane_id();
    if (is_public(A, i)) {
        if (w)
            for (int64_t e = lane; e < d; e += 32) w[e] = nb[e];
        return d;
    }
    const double pt = A.pt[i], pf = A.pf[i];
    const BernoulliWords bw(pt > 0.0 ? pt : 0.0);
    WarpWords T{twin, A.seed, (uint64_t)i, A.st_t, A.c_t, -1};
    int64_t tw = 0, e = 0;
    FalseWalk W;
    W.F = WarpWords{fwin, A.seed, (uint64_t)i, A.st_f, A.c_f, -1};
    W.mf = A.n - 1 - d;
    W.fw = 0;
    W.kcur = -1;
    W.done = !(pf > 0.0) || W.mf <= 0;
    W.all = pf >= 1.0;
    W.gp = geom_params(W.done || W.all ? 0.5 : pf);
    if (!w) {
        int64_t cnt = 0;
        while (e < d) {
            bool keep;
            const int nd = true_chunk(T, tw, pt, bw, d - e < 32 ? (int)(d - e) : 32, keep);
            cnt += __popc(__ballot_sync(FULL_MASK, keep && lane < nd));
            e += nd;
        }
        while (!W.done) {
            int64_t k;
            cnt += __popc(false_round(W, k));
        }
        return cnt;
    }
    const int64_t xpos = lower_index(nb, d, i);
    const unsigned lt = (1u << lane) - 1u;
    int na = 0, ia = 0, nk = 0, ib = 0;
    int64_t o = 0;
    for (;;) {
        if (ia == na && !W.done) {  // the next round of false ids
            int64_t k;
            const unsigned valid = false_round(W, k);
            if ((valid >> lane) & 1u) sA[__popc(valid & lt)] = skip_id(nb, d, i, xpos, k);
            __syncwarp();
            na = __popc(valid);
            ia = 0;
            continue;
        }
        if (ib == nk && e < d) {  // the next chunk of neighbours: the kept ones, in order
            bool keep;
            const int nd = true_chunk(T, tw, pt, bw, d - e < 32 ? (int)(d - e) : 32, keep);
            const unsigned kept = __ballot_sync(FULL_MASK, keep && lane < nd);
            if ((kept >> lane) & 1u) sB[__popc(kept & lt)] = (int64_t)nb[e + lane];
            __syncwarp();
            nk = __popc(kept);
            ib = 0;
            e += nd;
            continue;
        }
        if (ia == na && ib == nk) break;  // both streams done
        // Emit every element up to the smaller of the two buffers' last: one buffer empties.
        const int64_t big = I64_MAX;
        const int64_t amax = ia < na ? sA[na - 1] : big, bmax = ib < nk ? sB[nk - 1] : big;
        const int64_t P = amax < bmax ? amax : bmax;
        const bool ea = ia + lane < na && sA[ia + lane] <= P, eb = ib + lane < nk && sB[ib + lane] <= P;
        const int ca = __popc(__ballot_sync(FULL_MASK, ea)), cb = __popc(__ballot_sync(FULL_MASK, eb));
        if (ea) w[o + lane + below(sB + ib, cb, sA[ia + lane])] = (C)sA[ia + lane];
        if (eb) w[o + lane + below(sA + ia, ca, sB[ib + lane])] = (C)sB[ib + lane];
        __syncwarp();
        o += ca + cb;
        ia += ca;
        ib += cb;
    }
    return o;
}

// Sparse RR: fill = 0 writes counts[i]; fill = 1 writes row i at out_rowptr[i] (pub: null =
// nobody public).  A warp per row (32 n threads).
template <class C>
__device__ void rr_k(const int64_t* rp, const C* col, int64_t n, uint64_t seed, uint32_t st_t, uint32_t c_t,
                     uint32_t st_f, uint32_t c_f, const double* pt, const double* pf, const uint8_t* pub,
                     int64_t* counts, const int64_t* orp, C* ocol, int fill) {
    __shared__ uint32_t wins[RR_WARPS * 2 * RR_WIN];
    __shared__ int64_t bufs[RR_WARPS * 64];
    const int wb = (int)(threadIdx.x >> 5);
    const int64_t i = thread_index() >> 5;  // warp-uniform
    if (i >= n) return;
    const RRArgs A = {seed, st_t, c_t, st_f, c_f, pt, pf, pub, n};
    const int64_t got = rr_row_warp(A, i, col + rp[i], rp[i + 1] - rp[i], wins + wb * 2 * RR_WIN,
                                    wins + (wb * 2 + 1) * RR_WIN, bufs + wb * 64, bufs + wb * 64 + 32,
                                    fill ? ocol + orp[i] : (C*)nullptr);
    if (!fill && lane_id() == 0) counts[i] = got;
}

extern "C" __global__ void RR_BOUNDS rr_edges_i32(const int64_t* rp, const int32_t* col, int64_t n, uint64_t seed,
                                        uint32_t st_t, uint32_t c_t, uint32_t st_f, uint32_t c_f, const double* pt,
                                        const double* pf, const uint8_t* pub, int64_t* counts, const int64_t* orp,
                                        int32_t* ocol, int fill) {
    rr_k(rp, col, n, seed, st_t, c_t, st_f, c_f, pt, pf, pub, counts, orp, ocol, fill);
}
extern "C" __global__ void RR_BOUNDS rr_edges_i64(const int64_t* rp, const int64_t* col, int64_t n, uint64_t seed,
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
