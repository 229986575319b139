// Edge-LDP per-row bodies shared by csrc/cpu/edges.cpp (std::thread over rows) and
// csrc/cuda/edges.cu (a CUDA thread per row; the sparse RR sampler a warp per row, which reads
// the same cells' words in the same order as rr_row_count / rr_row_fill): DPRR's per-user
// probabilities, the sparse RR sampler (kept true edges and skip-sampled false edges, mapped to
// node ids), LocalLap's entry noise and zero candidates, and the row-wise CSR combination of the
// server rules.
// Every draw is addressed by (seed, stream, row, col) and consumed in the same order here
// for both builds, so CPU and CUDA outputs are the same bits by construction.  Host-only
// functions (std::, malloc) cannot appear here.  See edges.cpp for the algorithms and the
// privacy notes; the Numba twin is ldpfast/_numba/edges.py.
#pragma once
#include "rng.h"
#include "search.h"  // upper_index, lower_index

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace edges {

constexpr uint64_t LOCALLAP_ROW_OFFSET = 1ull << 40;  // zero-candidate cells of LocalLap
constexpr int64_t I64_MIN = -9223372036854775807ll - 1;
constexpr int64_t I64_MAX = 9223372036854775807ll;

// Exact geometric on {0, 1, ...} with P[k] proportional to exp(-k s / t): the geometric half
// of Canonne-Kamath-Steinke's discrete Laplace (integer arithmetic only).
LDP_HD int64_t geom_exact(CellRng& g, uint64_t t, uint64_t s) {
    for (;;) {
        uint64_t u = g.randint(t);
        if (!g.bernoulli_exp_neg(u, t)) continue;
        uint64_t v = 0;
        while (g.bernoulli_exp_neg(1, 1)) ++v;
        return (int64_t)((u + t * v) / s);
    }
}

// Bernoulli(exp(-num / den)) exactly for any num (den >= 1): floor(num / den) Bernoulli(e^-1)
// trials, then one of exp(-(num mod den) / den), all of which must succeed (CKS, rng.h).
// The quotient and remainder are taken once (ExpNeg) by callers that draw many.
struct ExpNeg {
    uint64_t whole, rem, den;
};
LDP_HD ExpNeg exp_neg_of(uint64_t num, uint64_t den) { return ExpNeg{num / den, num % den, den}; }
LDP_HD bool bernoulli_exp_neg_any(CellRng& g, const ExpNeg& x) {
    for (uint64_t k = x.whole; k > 0; --k)
        if (!g.bernoulli_exp_neg(1, 1)) return false;
    return g.bernoulli_exp_neg(x.rem, x.den);
}

// Discrete Laplace (rate s/t per unit) conditioned on lo <= Y < hi; lo = I64_MIN and
// hi = I64_MAX mean unbounded.  For lo >= 1 the tail is lo + geometric (memoryless); a band
// [lo, hi) with (hi - lo) s <= t (acceptance of the geometric would be as low as 1 - e^-1 ... 0)
// is lo + x, x uniform on [0, hi - lo) accepted with exact probability exp(-x s / t)
// (acceptance >= e^-1).  Otherwise rejection from the unconditioned law (acceptance >= 1/2
// when lo <= 0 and hi unbounded).  Every branch is exact (integer arithmetic only).
LDP_HD int64_t dlap_band(CellRng& g, uint64_t t, uint64_t s, int64_t lo, int64_t hi) {
    if (lo >= 1 && hi != I64_MAX && hi > lo && (uint64_t)(hi - lo) <= t / s) {
        const uint64_t w = (uint64_t)(hi - lo);  // w s <= t: no overflow
        for (;;) {
            const uint64_t x = g.randint(w);
            if (g.bernoulli_exp_neg(x * s, t)) return lo + (int64_t)x;
        }
    }
    for (;;) {
        int64_t y;
        if (lo >= 1) {
            y = lo + geom_exact(g, t, s);
        } else {
            y = g.discrete_laplace(t, s);
            if (lo != I64_MIN && y < lo) continue;
        }
        if (hi == I64_MAX || y < hi) return y;
    }
}

// Sorted exclusion list: a[0..la) (sorted, distinct) merged with one extra value x (x < 0:
// none), x not in a.  Maps the k-th (0-based, increasing k) value of [base, n) that is not
// excluded to its id; every excluded value must be >= base.
template <class C>
struct SkipMap {
    const C* a;
    int64_t la, x, xpos, L, base, ptr;
    LDP_HD SkipMap(const C* a_, int64_t la_, int64_t x_, int64_t base_) : a(a_), la(la_), x(x_), base(base_), ptr(0) {
        xpos = x < 0 ? -1 : lower_index(a, la, x);
        L = la + (x < 0 ? 0 : 1);
    }
    LDP_HD int64_t at(int64_t t) const {
        if (x < 0 || t < xpos) return (int64_t)a[t];
        if (t == xpos) return x;
        return (int64_t)a[t - 1];
    }
    LDP_HD int64_t map(int64_t k) {
        while (ptr < L && at(ptr) <= base + k + ptr) ++ptr;
        return base + k + ptr;
    }
};

// ---- DPRR: the per-user probabilities (Algorithm 1, lines 2-7) -------------------------------
// d* = deg + g noise; q = Proj(eq. 6) (0 where d* <= 0); p_true = p q, p_false = pm q.  The same
// IEEE operations in the same order as mechanisms/edges/degree_preserving.py (_q_of, _bit_probs: NumPy), so the
// doubles agree to the bit with the CPU path (no FMA: -ffp-contract=off, NVRTC --fmad=false).
struct DprrProbs {
    double d_star, q, p_true, p_false;
};

LDP_HD DprrProbs dprr_probs(int64_t deg, int64_t noise, double g, int64_t n, double p, double pm) {
    DprrProbs r;
    r.d_star = (double)deg + g * (double)noise;
    const bool pos = r.d_star > 0.0;
    const double ds = pos ? r.d_star : 1.0;
    double q = ds / (ds * (p - pm) + (double)(n - 1) * pm);
    q = pos ? q : 0.0;
    q = q < 0.0 ? 0.0 : (q > 1.0 ? 1.0 : q);  // np.clip (q is never NaN here)
    r.q = q;
    r.p_true = p * q;
    r.p_false = pm * q;
    return r;
}

// ---- sparse RR sampler -----------------------------------------------------------------------
struct RRArgs {
    uint64_t seed;
    uint32_t st_t, c_t, st_f, c_f;
    const double* pt;
    const double* pf;
    const uint8_t* pub;  // null: nobody public
    int64_t n;
};

LDP_HD bool is_public(const RRArgs& A, int64_t i) { return A.pub && A.pub[i]; }

// Keep decision of the next true edge of a row (Bernoulli(pt) from the row's true cell, drawn
// in neighbour order; pt >= 1 and pt <= 0 draw nothing).  bernoulli_words: exact like
// CellRng::bernoulli, but one 32-bit word per edge (a further word with probability 2^-32)
// instead of two, so a Philox block decides four edges.
LDP_HD bool keep_true(CellRng& rt, double pt) { return pt >= 1.0 ? true : (pt > 0.0 ? bernoulli_words(rt, pt) : false); }

LDP_HD CellRng true_cell(const RRArgs& A, int64_t i) { return CellRng(A.seed, A.st_t, (uint64_t)i, A.c_t); }

// geom_params of the last rate asked for: rows that share p_false (all of RREdges' rows) skip
// the logs and exps of geom_params.  Speed only: the same params either way.
struct GeomCache {
    double p = -1.0;
    GeomParams gp;
    LDP_HD const GeomParams& of(double q) {
        if (q != p) {
            gp = geom_params(q);
            p = q;
        }
        return gp;
    }
};

// f(k) for the positions k (increasing, in [0, m)) of row i's false edges among its m
// non-neighbours: geometric skips, all from one cell (every pass sees the same draws).
// `cache`: a GeomCache kept across the rows one thread visits (null: params per row).
template <class F>
LDP_HD void rr_false_positions(const RRArgs& A, int64_t i, int64_t m, F&& f, GeomCache* cache = nullptr) {
    const double pf = A.pf[i];
    if (!(pf > 0.0) || m <= 0) return;
    CellRng rf(A.seed, A.st_f, (uint64_t)i, A.c_f);
    GeomParams own;
    const GeomParams& gp = cache ? cache->of(pf) : (own = geom_params(pf));
    for (int64_t k = -1;;) {
        int64_t g = geom_draw(rf, gp);
        if (g >= m - 1 - k) break;
        k += g + 1;
        f(k);
    }
}

// Output size of row i (neighbours nb[0..d)).
template <class C>
LDP_HD int64_t rr_row_count(const RRArgs& A, int64_t i, const C* nb, int64_t d) {
    if (is_public(A, i)) return d;
    const double pt = A.pt[i];
    int64_t cnt = 0;
    if (pt >= 1.0) {
        cnt += d;
    } else if (pt > 0.0) {
        CellRng rt = true_cell(A, i);
        for (int64_t e = 0; e < d; ++e) cnt += keep_true(rt, pt) ? 1 : 0;
    }
    rr_false_positions(A, i, A.n - 1 - d, [&](int64_t) { ++cnt; });
    return cnt;
}

// Row i written sorted into w, with no scratch: each false position is mapped to its node id
// (merge with N(i) + {i}) and the true edges below it are decided first.  The true and false
// cells are separate, so interleaving them gives the same draws as any other order.
template <class C>
LDP_HD int64_t rr_row_fill(const RRArgs& A, int64_t i, const C* nb, int64_t d, C* w) {
    if (is_public(A, i)) {
        for (int64_t e = 0; e < d; ++e) w[e] = nb[e];
        return d;
    }
    const double pt = A.pt[i];
    CellRng rt = true_cell(A, i);
    int64_t e = 0, o = 0;
    SkipMap<C> sm(nb, d, i, 0);
    rr_false_positions(A, i, A.n - 1 - d, [&](int64_t k) {
        const int64_t v = sm.map(k);
        for (; e < d && (int64_t)nb[e] < v; ++e)
            if (keep_true(rt, pt)) w[o++] = nb[e];
        w[o++] = (C)v;
    });
    for (; e < d; ++e)
        if (keep_true(rt, pt)) w[o++] = nb[e];
    return o;
}

// ---- LocalLap --------------------------------------------------------------------------------
// A true upper entry's value is one + L (L discrete Laplace, rate s/t per grid unit); only the
// entries at or above the round's threshold need it.  Round rnd decides the entries that were
// no candidate in the earlier rounds (L < hi - one, hi = the previous threshold; I64_MAX in
// round 0): candidate iff L >= lo - one, then the value, else LL_NOT_CAND.
constexpr int64_t LL_NOT_CAND = I64_MIN + 1;  // true upper entry below every threshold so far
constexpr int64_t LL_HIGH = I64_MAX;          // zero pick above the split (value not drawn)

// Whether a round decides its true entries by skip sampling (ll_edge_row_skip): round 0 with
// x = lo - one >= 1 (so P[L >= x] < 1/2 and the candidates' law given L >= x is memoryless).
LDP_HD bool ll_edge_fast(uint32_t rnd, int64_t lo, int64_t hi, int64_t one) {
    return rnd == 0 && hi == I64_MAX && lo != I64_MIN && lo - one >= 1;
}

// Entry (i, j) outside the skip path: I64_MIN for j <= i; cell CellRng(seed, LOCALLAP, i, j) in
// round 0 (j >= 1: never the degree cell (i, 0)), row (rnd + 1) 2^40 + i in round rnd >= 1
// (rnd <= 254; zero candidates use rows 2^40 + i): one exact draw of L conditioned on
// L < hi - one, a candidate iff L >= lo - one.
LDP_HD int64_t ll_edge_value(uint64_t seed, int64_t i, int64_t j, uint64_t t, uint64_t s, int64_t one, uint32_t rnd,
                             int64_t lo, int64_t hi) {
    if (j <= i) return I64_MIN;
    const uint64_t row = rnd == 0 ? (uint64_t)i : (uint64_t)(rnd + 1) * LOCALLAP_ROW_OFFSET + (uint64_t)i;
    CellRng g(seed, STREAM_LOCALLAP, row, (uint32_t)j);
    const int64_t y = dlap_band(g, t, s, I64_MIN, hi == I64_MAX ? I64_MAX : hi - one);
    return (lo == I64_MIN || y >= lo - one) ? one + y : LL_NOT_CAND;
}

constexpr uint32_t LL_TRUE_GAP_COL = 0x80000000u;  // gap cell of the true entries (zero cells: cols < 2^9)

// Round 0 with ll_edge_fast, row i (sorted neighbours nb[0..d), output w[0..d)): the upper
// entries are candidates by skip sampling with probability gp = geom_params(P[L >= lo - one])
// (gaps from CellRng(seed, LOCALLAP, 2^40 + i, 2^31), as the zero candidates'), each candidate's
// value lo + geometric (exact: L given L >= lo - one >= 1 is memoryless) from its own cell
// (i, j); the other upper entries LL_NOT_CAND, the lower ones I64_MIN.
// The candidates alone: f(e, value) for each, e its index in nb (increasing).
template <class C, class F>
LDP_HD void ll_edge_skip_candidates(int64_t i, const C* nb, int64_t d, uint64_t seed, uint64_t t, uint64_t s,
                                    int64_t lo, const GeomParams& gp, F&& f) {
    const int64_t e0 = upper_index(nb, d, i);
    const int64_t m = d - e0;
    if (m <= 0) return;
    CellRng rg(seed, STREAM_LOCALLAP, LOCALLAP_ROW_OFFSET + (uint64_t)i, LL_TRUE_GAP_COL);
    for (int64_t k = -1;;) {
        const int64_t g = geom_draw(rg, gp);
        if (g >= m - 1 - k) break;
        k += g + 1;
        CellRng gv(seed, STREAM_LOCALLAP, (uint64_t)i, (uint32_t)nb[e0 + k]);
        f(e0 + k, lo + geom_exact(gv, t, s));
    }
}

template <class C>
LDP_HD void ll_edge_row_skip(int64_t i, const C* nb, int64_t d, uint64_t seed, uint64_t t, uint64_t s, int64_t lo,
                             const GeomParams& gp, int64_t* w) {
    const int64_t e0 = upper_index(nb, d, i);
    for (int64_t e = 0; e < e0; ++e) w[e] = I64_MIN;
    for (int64_t e = e0; e < d; ++e) w[e] = LL_NOT_CAND;
    ll_edge_skip_candidates(i, nb, d, seed, t, s, lo, gp, [&](int64_t e, int64_t v) { w[e] = v; });
}

// Row i of round rnd (out[0..d) aligned with nb): the skip path in round 0 when ll_edge_fast,
// else ll_edge_value per entry (rnd >= 1: only the entries still LL_NOT_CAND).
template <class C>
LDP_HD void ll_edge_row(int64_t i, const C* nb, int64_t d, uint64_t seed, uint64_t t, uint64_t s, int64_t one,
                        uint32_t rnd, int64_t lo, int64_t hi, bool fast, const GeomParams& gp, int64_t* out) {
    if (fast) {
        ll_edge_row_skip(i, nb, d, seed, t, s, lo, gp, out);
        return;
    }
    for (int64_t e = 0; e < d; ++e)
        if (rnd == 0 || out[e] == LL_NOT_CAND) out[e] = ll_edge_value(seed, i, (int64_t)nb[e], t, s, one, rnd, lo, hi);
}

// Zero candidates of round r in row i: every position j in (i, n) not in the exclusion row
// ex[0..le) (sorted; entries <= i ignored) is picked with probability pi (skip sampling,
// CellRng(seed, LOCALLAP, 2^40 + i, 2r)); with `fill`, each pick gets a value from DLap(t, s)
// conditioned on [lo, hi) (cell 2r + 1, in pick order) and emit(col, value) is called.
// `split` (round 0, lo >= 1, (hi - lo) s < 2^63): the pick is LL_HIGH (value >= hi, not drawn)
// with exact probability P[L >= hi | L >= lo] = exp(-(hi - lo) s / t) (memoryless), else its
// value is drawn from the band [lo, hi); both from cell 2r + 1, in pick order.
// Returns the number of picks.
template <class C, class Emit>
LDP_HD int64_t ll_zero_row(int64_t i, int64_t n, const C* ex, int64_t le, uint64_t seed, uint32_t round, double pi,
                           int64_t lo, int64_t hi, bool split, uint64_t t, uint64_t s, bool fill, Emit&& emit) {
    const int64_t skip = upper_index(ex, le, i);  // only entries above the diagonal count
    ex += skip;
    le -= skip;
    const int64_t m = n - 1 - i - le;
    if (m <= 0 || pi <= 0.0) return 0;
    CellRng rg(seed, STREAM_LOCALLAP, LOCALLAP_ROW_OFFSET + (uint64_t)i, 2u * round);
    CellRng rv(seed, STREAM_LOCALLAP, LOCALLAP_ROW_OFFSET + (uint64_t)i, 2u * round + 1u);
    const GeomParams gp = geom_params(pi);
    SkipMap<C> sm(ex, le, -1, i + 1);
    const ExpNeg high = exp_neg_of(split ? (uint64_t)(hi - lo) * s : 0, t);
    int64_t k = -1, cnt = 0;
    for (;;) {
        const int64_t g = geom_draw(rg, gp);
        if (g >= m - 1 - k) break;
        k += g + 1;
        if (fill) {
            const int64_t c = sm.map(k);
            if (split && bernoulli_exp_neg_any(rv, high))
                emit(c, LL_HIGH);
            else
                emit(c, dlap_band(rv, t, s, lo, hi));
        }
        ++cnt;
    }
    return cnt;
}

// ---- server side -----------------------------------------------------------------------------
// Row i of the combination of A and B (both sorted rows): mode 0 union, 1 intersection,
// 2 (A_i below i) then (B_i above i), 3 (B_i below i) then (A_i above i).  w null: count only.
template <class C>
LDP_HD int64_t combine_row(int64_t i, const C* a, int64_t la, const C* b, int64_t lb, int mode, C* w) {
    int64_t cnt = 0, x = 0, y = 0;
    if (mode == 0 || mode == 1) {
        while (x < la && y < lb) {
            if (a[x] < b[y]) {
                if (mode == 0) { if (w) w[cnt] = a[x]; ++cnt; }
                ++x;
            } else if (b[y] < a[x]) {
                if (mode == 0) { if (w) w[cnt] = b[y]; ++cnt; }
                ++y;
            } else {
                if (w) w[cnt] = a[x];
                ++cnt;
                ++x;
                ++y;
            }
        }
        if (mode == 0) {
            for (; x < la; ++x) { if (w) w[cnt] = a[x]; ++cnt; }
            for (; y < lb; ++y) { if (w) w[cnt] = b[y]; ++cnt; }
        }
        return cnt;
    }
    const C* lo_src = mode == 2 ? a : b;
    const int64_t lo_len = mode == 2 ? la : lb;
    const C* hi_src = mode == 2 ? b : a;
    const int64_t hi_len = mode == 2 ? lb : la;
    for (int64_t k = 0; k < lo_len && (int64_t)lo_src[k] < i; ++k) { if (w) w[cnt] = lo_src[k]; ++cnt; }
    for (int64_t k = upper_index(hi_src, hi_len, i); k < hi_len; ++k) { if (w) w[cnt] = hi_src[k]; ++cnt; }
    return cnt;
}

}  // namespace edges
}  // namespace ldp
