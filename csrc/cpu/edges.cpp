// Edge-LDP kernels (Hidano & Murakami, "Degree-Preserving Randomized Response for Graph
// Neural Networks under Local Differential Privacy"): DPRR and Warner's RR on neighbour
// lists, the LocalLap baseline's candidate sampler, and the server-side CSR helpers
// (transpose, combine) used to turn the n noisy lists into one graph.
// Python API: ldpfast/mechanisms/edges.py.  Numba twin: ldpfast/_numba/edges.py (same
// names, same sampler calls in the same order, so outputs are bit-identical).
//
// Sparse RR sampler (rr_row): user i's noisy list a~_i has, independently per j != i,
//   P[a~_ij = 1] = p_true[i]  if a_ij = 1,     p_false[i] otherwise
// (DPRR eq. 7: p_true = p q_i, p_false = (1-p) q_i; Warner RR: p, 1-p).  True edges get one
// Bernoulli each, drawn in neighbour order from CellRng(seed, stream_t, i, col_t); the
// n-1-d_i non-neighbours are never enumerated: the positions of the false edges among them
// are drawn by skip sampling (geometric gaps, CellRng(seed, stream_f, i, col_f); geom_draw in
// rng.h: full support, each factor of the gap law within relative 2^-49 of Geometric's, so
// every likelihood ratio is the product-of-Bernoulli(p_false) one up to e^(+-2^-46), audit
// F5), and the k-th non-neighbour is mapped to its node id by merging with the sorted
// exclusion list N(i) + {i}.  Work and memory O(d_i + output) per row.  Two passes: *_count writes each
// row's output size, Python prefix-sums it, *_fill regenerates the same draws and writes
// the sorted rows.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../common/rng.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {

static constexpr uint64_t LOCALLAP_ROW_OFFSET = 1ull << 40;  // zero-candidate cells of LocalLap

// Exact geometric on {0, 1, ...} with P[k] proportional to exp(-k s / t): the geometric half
// of Canonne-Kamath-Steinke's discrete Laplace (integer arithmetic only).
static inline int64_t geom_exact(CellRng& g, uint64_t t, uint64_t s) {
    for (;;) {
        uint64_t u = g.randint(t);
        if (!g.bernoulli_exp_neg(u, t)) continue;
        uint64_t v = 0;
        while (g.bernoulli_exp_neg(1, 1)) ++v;
        return (int64_t)((u + t * v) / s);
    }
}

// Discrete Laplace (rate s/t per unit) conditioned on lo <= Y < hi; lo = INT64_MIN and
// hi = INT64_MAX mean unbounded.  For lo >= 1 the tail is lo + geometric (memoryless);
// otherwise rejection from the unconditioned law (acceptance >= 1/2 when lo <= 0).
static inline int64_t dlap_band(CellRng& g, uint64_t t, uint64_t s, int64_t lo, int64_t hi) {
    for (;;) {
        int64_t y;
        if (lo >= 1) {
            y = lo + geom_exact(g, t, s);
        } else {
            y = g.discrete_laplace(t, s);
            if (lo != std::numeric_limits<int64_t>::min() && y < lo) continue;
        }
        if (hi == std::numeric_limits<int64_t>::max() || y < hi) return y;
    }
}

// Sorted exclusion list: a[0..la) (sorted, distinct) merged with one extra value x (x < 0:
// none), x not in a.  Maps the k-th (0-based, increasing k) value of [base, n) that is not
// excluded to its id; every excluded value must be >= base.
template <class C>
struct SkipMap {
    const C* a;
    int64_t la, x, xpos, L, base, ptr;
    SkipMap(const C* a_, int64_t la_, int64_t x_, int64_t base_) : a(a_), la(la_), x(x_), base(base_), ptr(0) {
        xpos = x < 0 ? -1 : (int64_t)(std::lower_bound(a, a + la, (C)x) - a);
        L = la + (x < 0 ? 0 : 1);
    }
    inline int64_t at(int64_t t) const {
        if (x < 0 || t < xpos) return (int64_t)a[t];
        if (t == xpos) return x;
        return (int64_t)a[t - 1];
    }
    inline int64_t map(int64_t k) {
        while (ptr < L && at(ptr) <= base + k + ptr) ++ptr;
        return base + k + ptr;
    }
};

struct RRArgs {
    uint64_t seed;
    uint32_t st_t, c_t, st_f, c_f;
    const double* pt;
    const double* pf;
    const uint8_t* pub;  // nullptr: nobody public
    int64_t n;
};

// f(k) for the positions k (increasing, in [0, m)) of row i's false edges among its m
// non-neighbours: geometric skips, all from one cell, so passes 1 and 2 see the same draws.
template <class F>
static inline void rr_false_positions(const RRArgs& A, int64_t i, int64_t m, F&& f) {
    const double pf = A.pf[i];
    if (!(pf > 0.0) || m <= 0) return;
    CellRng rf(A.seed, A.st_f, (uint64_t)i, A.c_f);
    const GeomParams gp = geom_params(pf);  // once per row
    for (int64_t k = -1;;) {
        int64_t g = geom_draw(rf, gp);
        if (g >= m - 1 - k) break;
        k += g + 1;
        f(k);
    }
}

// Output size of row i (pass 1).
template <class C>
static int64_t rr_row_count(const RRArgs& A, int64_t i, const C* nb, int64_t d) {
    if (A.pub && A.pub[i]) return d;
    double pt = A.pt[i];
    int64_t cnt = 0;
    if (pt >= 1.0) {
        cnt += d;
    } else if (pt > 0.0) {
        CellRng rt(A.seed, A.st_t, (uint64_t)i, A.c_t);
        for (int64_t e = 0; e < d; ++e) cnt += rt.bernoulli(pt) ? 1 : 0;
    }
    rr_false_positions(A, i, A.n - 1 - d, [&](int64_t) { ++cnt; });
    return cnt;
}

// Row i written sorted into w (pass 2); returns the number written.  The false positions are
// drawn first into `buf` in a tight loop (nothing but the gap sampler in it), then mapped to
// node ids and merged with the kept true edges.  The two streams are separate cells, so the
// order in which they are consumed does not change any draw (the Numba twin interleaves
// them; same output).
template <class C>
static int64_t rr_row_fill(const RRArgs& A, int64_t i, const C* nb, int64_t d, C* w, std::vector<int64_t>& buf) {
    if (A.pub && A.pub[i]) {
        std::copy(nb, nb + d, w);
        return d;
    }
    double pt = A.pt[i];
    C* w0 = w;
    buf.clear();
    rr_false_positions(A, i, A.n - 1 - d, [&](int64_t k) { buf.push_back(k); });
    CellRng rt(A.seed, A.st_t, (uint64_t)i, A.c_t);
    int64_t e = 0;
    auto flush = [&](int64_t v) {  // true edges below v, Bernoullis drawn in neighbour order
        for (; e < d && (int64_t)nb[e] < v; ++e) {
            bool keep = pt >= 1.0 ? true : (pt > 0.0 ? rt.bernoulli(pt) : false);
            if (keep) *w++ = nb[e];
        }
    };
    SkipMap<C> sm(nb, d, i, 0);
    for (int64_t k : buf) {
        int64_t v = sm.map(k);
        flush(v);
        *w++ = (C)v;
    }
    flush(std::numeric_limits<int64_t>::max());
    return w - w0;
}

static RRArgs rr_args(int64_t n, uint64_t seed, uint32_t st_t, uint32_t c_t, uint32_t st_f, uint32_t c_f,
                      py::array& p_true, py::array& p_false, py::array& pub) {
    check_size(p_true, n, "p_true");
    check_size(p_false, n, "p_false");
    RRArgs A;
    A.seed = seed;
    A.st_t = st_t;
    A.c_t = c_t;
    A.st_f = st_f;
    A.c_f = c_f;
    A.pt = cdata_ptr<double>(p_true, "p_true");
    A.pf = cdata_ptr<double>(p_false, "p_false");
    A.n = n;
    if (pub.size() == 0) {
        A.pub = nullptr;
    } else {
        check_size(pub, n, "public");
        A.pub = cdata_ptr<uint8_t>(pub, "public");
    }
    return A;
}

template <class C>
static void rr_count_t(const RRArgs& A, const int64_t* rp, const C* col, int64_t* out, bool by_degree) {
    auto body = [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) out[i + 1] = rr_row_count(A, i, col + rp[i], rp[i + 1] - rp[i]);
    };
    out[0] = 0;
    if (by_degree)
        parallel_for_weighted(A.n, rp, body);
    else
        parallel_for(A.n, body, 256);
}

template <class C>
static void rr_fill_t(const RRArgs& A, const int64_t* rp, const C* col, const int64_t* orp, C* ocol) {
    parallel_for_weighted(A.n, orp, [&](int64_t b, int64_t e, int) {
        std::vector<int64_t> buf;
        for (int64_t i = b; i < e; ++i) {
            int64_t got = rr_row_fill(A, i, col + rp[i], rp[i + 1] - rp[i], ocol + orp[i], buf);
            if (got != orp[i + 1] - orp[i])
                throw std::runtime_error("edges_rr_fill: row " + std::to_string(i) +
                                         " regenerated a different size than edges_rr_count (bug)");
        }
    });
}

// Pass 1: out_rowptr[i+1] = size of user i's noisy list, out_rowptr[0] = 0 (not summed).
static void edges_rr_count(py::array rowptr, py::array col, uint64_t seed, uint32_t st_t, uint32_t c_t,
                           uint32_t st_f, uint32_t c_f, py::array p_true, py::array p_false, py::array pub,
                           py::array out_rowptr, bool by_degree) {
    int64_t n = rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    RRArgs A = rr_args(n, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub);
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    int64_t* out = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        rr_count_t(A, rp, c, out, by_degree);
    });
}

// Pass 2: fill out_col (same dtype as col) given the prefix-summed out_rowptr.
static void edges_rr_fill(py::array rowptr, py::array col, uint64_t seed, uint32_t st_t, uint32_t c_t,
                          uint32_t st_f, uint32_t c_f, py::array p_true, py::array p_false, py::array pub,
                          py::array out_rowptr, py::array out_col) {
    int64_t n = rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    RRArgs A = rr_args(n, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub);
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const int64_t* orp = cdata_ptr<int64_t>(out_rowptr, "out_rowptr");
    check_size(out_col, orp[n], "out_col");
    with_index(col, "col", [&](auto c) {
        auto* oc = like_index<index_t<decltype(c)>>(out_col, "out_col");
        py::gil_scoped_release nogil;
        rr_fill_t(A, rp, c, orp, oc);
    });
}

// ---- LocalLap -------------------------------------------------------------------------------
// Noise of the upper-triangular true entries: out_val[e] = one + DLap(t, s) for every CSR
// entry (i, j) with j > i, from CellRng(seed, STREAM_LOCALLAP, i, j) (j >= 1, so never the
// degree cell (i, 0)); entries with j < i get INT64_MIN.
template <class C>
static void ll_edge_values_t(int64_t n, const int64_t* rp, const C* col, uint64_t seed, uint64_t t, uint64_t s,
                             int64_t one, int64_t* out) {
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
            for (int64_t k = rp[i]; k < rp[i + 1]; ++k) {
                int64_t j = (int64_t)col[k];
                if (j <= i) {
                    out[k] = std::numeric_limits<int64_t>::min();
                    continue;
                }
                CellRng g(seed, STREAM_LOCALLAP, (uint64_t)i, (uint32_t)j);
                out[k] = one + g.discrete_laplace(t, s);
            }
    });
}

static void locallap_edge_values(py::array rowptr, py::array col, uint64_t seed, uint64_t t, uint64_t s,
                                 int64_t one, py::array out_val) {
    int64_t n = rowptr.size() - 1;
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    check_size(out_val, col.size(), "out_val");
    int64_t* o = data_ptr<int64_t>(out_val, "out_val", true);
    if (t == 0 || s == 0) throw std::invalid_argument("t, s: expected >= 1");
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        ll_edge_values_t(n, rp, c, seed, t, s, one, o);
    });
}

// Zero candidates of round r: in row i, every position j in (i, n) not listed in the
// exclusion CSR (sorted rows; entries <= i are ignored, so the adjacency CSR itself can be
// passed) is picked independently with probability pi (skip
// sampling, CellRng(seed, STREAM_LOCALLAP, 2^40 + i, 2r)); each pick gets a value from
// DLap(t, s) conditioned on [lo, hi) (CellRng(..., 2^40 + i, 2r + 1), in pick order).
template <class C>
static int64_t ll_zero_row(int64_t i, int64_t n, const C* ex, int64_t le, uint64_t seed, uint32_t round, double pi,
                           int64_t lo, int64_t hi, uint64_t t, uint64_t s, C* wc, int64_t* wv) {
    int64_t skip = std::upper_bound(ex, ex + le, (C)i) - ex;  // only entries above the diagonal count
    ex += skip;
    le -= skip;
    int64_t m = n - 1 - i - le;
    if (m <= 0 || pi <= 0.0) return 0;
    CellRng rg(seed, STREAM_LOCALLAP, LOCALLAP_ROW_OFFSET + (uint64_t)i, 2u * round);
    CellRng rv(seed, STREAM_LOCALLAP, LOCALLAP_ROW_OFFSET + (uint64_t)i, 2u * round + 1u);
    const GeomParams gp = geom_params(pi);
    SkipMap<C> sm(ex, le, -1, i + 1);
    int64_t k = -1, cnt = 0;
    for (;;) {
        int64_t g = geom_draw(rg, gp);
        if (g >= m - 1 - k) break;
        k += g + 1;
        if (wc) {
            wc[cnt] = (C)sm.map(k);
            wv[cnt] = dlap_band(rv, t, s, lo, hi);
        }
        ++cnt;
    }
    return cnt;
}

template <class C>
static void ll_zero_t(int64_t n, const int64_t* erp, const C* ecol, uint64_t seed, uint32_t round, double pi,
                      int64_t lo, int64_t hi, uint64_t t, uint64_t s, int64_t* orp, C* oc, int64_t* ov) {
    if (!oc) {
        orp[0] = 0;
        parallel_for(n, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i)
                orp[i + 1] = ll_zero_row<C>(i, n, ecol + erp[i], erp[i + 1] - erp[i], seed, round, pi, lo, hi, t, s,
                                            nullptr, nullptr);
        }, 256);
        return;
    }
    parallel_for_weighted(n, orp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            int64_t got = ll_zero_row<C>(i, n, ecol + erp[i], erp[i + 1] - erp[i], seed, round, pi, lo, hi, t, s,
                                         oc + orp[i], ov + orp[i]);
            if (got != orp[i + 1] - orp[i])
                throw std::runtime_error("locallap_zero_fill: count mismatch (bug)");
        }
    });
}

static void locallap_zero(py::array excl_rowptr, py::array excl_col, uint64_t seed, uint32_t round, double pi,
                          int64_t lo, int64_t hi, uint64_t t, uint64_t s, py::array out_rowptr, py::array out_col,
                          py::array out_val, bool fill) {
    int64_t n = excl_rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    if (t == 0 || s == 0) throw std::invalid_argument("t, s: expected >= 1");
    const int64_t* erp = cdata_ptr<int64_t>(excl_rowptr, "excl_rowptr");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    int64_t* ov = nullptr;
    if (fill) {
        check_size(out_col, orp[n], "out_col");
        check_size(out_val, orp[n], "out_val");
        ov = data_ptr<int64_t>(out_val, "out_val", true);
    }
    with_index(excl_col, "excl_col", [&](auto c) {
        auto* oc = like_index<index_t<decltype(c)>>(out_col, "out_col", fill);
        py::gil_scoped_release nogil;
        ll_zero_t(n, erp, c, seed, round, pi, lo, hi, t, s, orp, oc, ov);
    });
}

// ---- server side: transpose, combine, checks --------------------------------------------------
template <class C>
static void transpose_t(int64_t n, const int64_t* rp, const C* col, int64_t* orp, C* oc) {
    std::fill(orp, orp + n + 1, 0);
    int64_t E = rp[n];
    for (int64_t k = 0; k < E; ++k) orp[(int64_t)col[k] + 1]++;
    for (int64_t i = 0; i < n; ++i) orp[i + 1] += orp[i];
    std::vector<int64_t> fill(orp, orp + n);
    for (int64_t i = 0; i < n; ++i)
        for (int64_t k = rp[i]; k < rp[i + 1]; ++k) oc[fill[(int64_t)col[k]]++] = (C)i;
}

// CSR transpose in O(|E| + n); rows of the result are sorted (sources visited in order).
static void csr_transpose(py::array rowptr, py::array col, py::array out_rowptr, py::array out_col) {
    int64_t n = rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    check_size(out_col, col.size(), "out_col");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    with_index(col, "col", [&](auto c) {
        auto* oc = like_index<index_t<decltype(c)>>(out_col, "out_col");
        py::gil_scoped_release nogil;
        transpose_t(n, rp, c, orp, oc);
    });
}

// Row i of the combination of A and B (both sorted rows): mode 0 union, 1 intersection,
// 2 (A_i below i) then (B_i above i), 3 (B_i below i) then (A_i above i).  w == nullptr counts.
template <class C>
static int64_t combine_row(int64_t i, const C* a, int64_t la, const C* b, int64_t lb, int mode, C* w) {
    int64_t cnt = 0, x = 0, y = 0;
    auto put = [&](C v) {
        if (w) w[cnt] = v;
        ++cnt;
    };
    if (mode == 0 || mode == 1) {
        while (x < la && y < lb) {
            if (a[x] < b[y]) {
                if (mode == 0) put(a[x]);
                ++x;
            } else if (b[y] < a[x]) {
                if (mode == 0) put(b[y]);
                ++y;
            } else {
                put(a[x]);
                ++x;
                ++y;
            }
        }
        if (mode == 0) {
            for (; x < la; ++x) put(a[x]);
            for (; y < lb; ++y) put(b[y]);
        }
        return cnt;
    }
    const C* lo_src = mode == 2 ? a : b;
    int64_t lo_len = mode == 2 ? la : lb;
    const C* hi_src = mode == 2 ? b : a;
    int64_t hi_len = mode == 2 ? lb : la;
    for (int64_t k = 0; k < lo_len && (int64_t)lo_src[k] < i; ++k) put(lo_src[k]);
    int64_t k0 = std::upper_bound(hi_src, hi_src + hi_len, (C)i) - hi_src;
    for (int64_t k = k0; k < hi_len; ++k) put(hi_src[k]);
    return cnt;
}

template <class C>
static void combine_t(int64_t n, const int64_t* ra, const C* ca, const int64_t* rb, const C* cb, int mode,
                      int64_t* orp, C* oc) {
    if (!oc) {
        orp[0] = 0;
        parallel_for_weighted(n, ra, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i)
                orp[i + 1] = combine_row<C>(i, ca + ra[i], ra[i + 1] - ra[i], cb + rb[i], rb[i + 1] - rb[i], mode,
                                            nullptr);
        });
        return;
    }
    parallel_for_weighted(n, orp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
            combine_row<C>(i, ca + ra[i], ra[i + 1] - ra[i], cb + rb[i], rb[i + 1] - rb[i], mode, oc + orp[i]);
    });
}

static void csr_combine(py::array rowptr_a, py::array col_a, py::array rowptr_b, py::array col_b, int mode,
                        py::array out_rowptr, py::array out_col, bool fill) {
    int64_t n = rowptr_a.size() - 1;
    check_size(rowptr_b, n + 1, "rowptr_b");
    check_size(out_rowptr, n + 1, "out_rowptr");
    if (mode < 0 || mode > 3) throw std::invalid_argument("mode: expected 0..3");
    const int64_t* ra = cdata_ptr<int64_t>(rowptr_a, "rowptr_a");
    const int64_t* rb = cdata_ptr<int64_t>(rowptr_b, "rowptr_b");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    if (fill) check_size(out_col, orp[n], "out_col");
    with_index(col_a, "col_a", [&](auto a) {
        using C = index_t<decltype(a)>;
        const C* b = cdata_ptr<C>(col_b, "col_b");
        C* oc = like_index<C>(out_col, "out_col", fill);
        py::gil_scoped_release nogil;
        combine_t(n, ra, a, rb, b, mode, orp, oc);
    });
}

// splitmix64 finaliser: the hash behind the O(|E|) symmetry fingerprint.
static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Flags: 1 col outside [0, n); 2 a row not strictly increasing (unsorted or duplicate);
// 4 self loop; 8 asymmetric.  Symmetry fingerprint: sum over entries (i, j) of
// +hash(i, j) if i < j and -hash(j, i) if i > j, mod 2^64; every matched pair cancels, so
// a symmetric graph gives 0 and an asymmetric one a nonzero sum except with probability
// about 2^-64.  One hash per entry, O(|E|), no extra memory.
template <class C>
static int64_t check_t(int64_t n, const int64_t* rp, const C* col) {
    int nt = std::max(1, get_num_threads());
    std::vector<int64_t> flags(nt, 0);
    std::vector<uint64_t> hs(nt, 0);
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int tid) {
        int64_t f = 0;
        uint64_t h = 0;
        for (int64_t i = b; i < e; ++i) {
            for (int64_t k = rp[i]; k < rp[i + 1]; ++k) {
                int64_t j = (int64_t)col[k];
                if (j < 0 || j >= n) f |= 1;
                if (k > rp[i] && (int64_t)col[k - 1] >= j) f |= 2;
                if (j == i) f |= 4;
                uint64_t lo = (uint64_t)std::min(i, j), hi = (uint64_t)std::max(i, j);
                uint64_t x = mix64((lo << 32) ^ hi ^ 0x9E3779B97F4A7C15ull);
                h += i < j ? x : (uint64_t)0 - x;
            }
        }
        flags[tid] |= f;
        hs[tid] += h;
    });
    int64_t f = 0;
    uint64_t h = 0;
    for (int t = 0; t < nt; ++t) {
        f |= flags[t];
        h += hs[t];
    }
    if (h != 0) f |= 8;
    return f;
}

static int64_t edges_check_csr(py::array rowptr, py::array col) {
    int64_t n = rowptr.size() - 1;
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    return with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        return check_t(n, rp, c);
    });
}

void register_edges(py::module_& m) {
    m.def("edges_rr_count", &edges_rr_count,
          "Sparse RR + sampling, pass 1: per-row output sizes into out_rowptr[1:]");
    m.def("edges_rr_fill", &edges_rr_fill, "Sparse RR + sampling, pass 2: fill sorted rows");
    m.def("locallap_edge_values", &locallap_edge_values, "LocalLap: noisy values of upper-triangular edges");
    m.def("locallap_zero", &locallap_zero, "LocalLap: zero-entry candidates above a threshold (count / fill)");
    m.def("csr_transpose", &csr_transpose, "CSR transpose, O(|E| + n), sorted rows");
    m.def("csr_combine", &csr_combine, "Row-wise union / intersection / lower / upper of two CSRs (count / fill)");
    m.def("edges_check_csr", &edges_check_csr, "Flags: 1 range, 2 unsorted/duplicate, 4 self loop, 8 asymmetric");
}

}  // namespace ldp
