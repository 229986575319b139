// Edge LDP keyed to users (ldpfast/mechanisms/edges/_keyed.py): Warner RR and DPRR whose every
// bit (i, j) is addressed by user i's coin seed and user j's key, never by row positions, so a
// user's report over the users it already covered does not change when others join, leave or
// are reordered.  One body for csrc/cpu/edges_keyed.cpp and csrc/cuda/edges_keyed.cu (which
// walks each (row, field) in a thread of its own, sorts the hits, then decides each hit and each
// true edge in a thread of its own: the same cells, so the same bits) and, line for line, the
// Numba twin ldpfast/_numba/edges_keyed.py.
//
// Local row i (global id row0 + i; col holds global ids) (private), coin seed s = seeds[i] (derived from the user's key and the parameters, not
// from their data: ldpfast/privacy/users.py), positions = user keys in [0, S):
// * true edge j (a_ij = 1): one exact Bernoulli(p_true[i]) from CellRng(s, st_t, key_j, 0);
// * false edges: positions hit by a Bernoulli field over [0, S) that does not look at the
//   neighbour list; a hit at the key of a present non-neighbour j != i is an output.  A hit at a
//   neighbour's key is ignored (that bit is decided by its own coin), so every bit has its own
//   independent randomness, and a bit that changes value gets fresh randomness.
//   - mode 0 (Warner RR): the field is skip sampling at rate pf[i] from CellRng(s, st_f, 0, 1).
//   - mode 1 (DPRR): nested levels, so that a new sampling probability q is post-processing of
//     the same RR bits.  Level L = 0..L_TOP has rate r_L = pm 2^-L; M_L_TOP is a skip field at
//     rate r_L_TOP and M_L = M_{L+1} u A_L with A_L a skip field at rate
//     c_L = (r_L - r_{L+1}) / (1 - r_{L+1}) (CellRng(s, st_f, 0, L)), so P[j in M_L] = r_L and
//     P[j in M_{L+1} | j in M_L] = 1/2: a position's top level is the band of a uniform V of the
//     RR bit (V in [2^-(L+1), 2^-L), or [0, 2^-L_TOP) at the top).  With Lt the level of q
//     (2^-(Lt+1) < q <= 2^-Lt), the output is {top level > Lt} plus, at top level Lt, a
//     Bernoulli(q 2^(Lt+1) - 1) (Bernoulli(q 2^L_TOP) at the top) from the pair's own coin
//     CellRng(s, st_f, key_j, BAND_COL): exactly [V < q].  True edges compare the same kind of
//     uniform (bernoulli_words of p q: [U < p q], U / p uniform).  So for one user, every q
//     samples the same RR bits with the same uniforms V: outputs at two q are a function of
//     the RR bits and data-independent uniforms (post-processing), not two RR reports.
#pragma once
#include "rng.h"

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace keyed {

constexpr int L_TOP = 48;                 // levels 0..48: q below 2^-48 is handled by the top band
constexpr uint32_t BAND_COL = 0x10000u;   // the pair coin of the band test (level cells use col <= 48)
constexpr uint32_t RR_FALSE_COL = 1u;     // mode 0's skip field

template <class K>
struct KeyedArgs {
    const int64_t* keys;        // user key of each row (n)
    const K* row_of_key;        // row of each key in [0, S), -1 where no user has it
    int64_t S;
    const uint64_t* seeds;      // coin seed of each row
    uint32_t st_t, st_f;
    int mode;                   // 0: Warner RR, 1: DPRR's nested levels
    const double* pt;           // P[keep] of a true edge, per row
    const double* pf;           // mode 0: P[false edge]; mode 1: q (eq. 6)
    double pm;                  // mode 1: RR's flip probability 1 - p
    const uint8_t* pub;         // null: nobody public
    int64_t row0;               // global id of local row 0 (a shard's rows; 0 for a whole graph)
};

// The level Lt of q in (0, 1]: 2^-(Lt+1) < q <= 2^-Lt, capped at L_TOP (halving is exact).
LDP_HD int level_of(double q) {
    int L = 0;
    double b = 0.5;
    while (L < L_TOP && q <= b) {
        ++L;
        b *= 0.5;
    }
    return L;
}

// Rate of level L's own skip field (c_L above).
LDP_HD double level_rate(int L, double pm) {
    double r = pm, r1;
    for (int t = 0; t < L; ++t) r *= 0.5;  // r_L, exact
    if (L == L_TOP) return r;
    r1 = r * 0.5;
    return (r - r1) / (1.0 - r1);
}

// Hits of one skip field with geometric parameters gp over positions [0, S): f(k) in increasing k.
template <class F>
LDP_HD void skip_walk(CellRng& g, const GeomParams& gp, int64_t S, F&& f) {
    for (int64_t k = -1;;) {
        const int64_t gap = geom_draw(g, gp);
        if (gap >= S - 1 - k) break;
        k += gap + 1;
        f(k);
    }
}

// Hits of one skip field at rate p over positions [0, S): f(k) in increasing k.
template <class F>
LDP_HD void skip_field(CellRng& g, double p, int64_t S, F&& f) {
    if (!(p > 0.0) || S <= 0) return;
    skip_walk(g, geom_params(p), S, f);
}

// Keep decision of true edge (i, j): bernoulli_words of pt from the pair's own cell.
template <class K>
LDP_HD bool keep_pair(const KeyedArgs<K>& A, int64_t i, int64_t j) {
    const double pt = A.pt[i];
    if (pt >= 1.0) return true;
    if (!(pt > 0.0)) return false;
    CellRng c(A.seeds[i], A.st_t, (uint64_t)A.keys[j], 0);
    return bernoulli_words(c, pt);
}

// The lowest field row i walks: mode 0 its one field (0); mode 1 the level of q (none, L_TOP + 1,
// when q <= 0).  Fields lowest .. L_TOP (mode 0: field 0 alone) are the row's.
template <class K>
LDP_HD int lowest_field(const KeyedArgs<K>& A, int64_t i) {
    if (A.mode == 0) return 0;
    const double q = A.pf[i];
    return q > 0.0 ? level_of(q) : L_TOP + 1;
}

// One false-edge field of row i: push(k, f) for each hit, in increasing k (mode 0: field 0 at
// rate pf[i]; mode 1: level f's own skip field).  The CUDA build walks each (row, field) in a
// thread of its own (csrc/cuda/edges_keyed.cu).
template <class K, class Push>
LDP_HD void field_hits(const KeyedArgs<K>& A, int64_t i, int f, Push&& push) {
    const uint64_t s = A.seeds[i];
    if (A.mode == 0) {
        CellRng g(s, A.st_f, 0, RR_FALSE_COL);
        skip_field(g, A.pf[i], A.S, [&](int64_t k) { push(k, 0); });
        return;
    }
    CellRng g(s, A.st_f, 0, (uint32_t)f);
    skip_field(g, level_rate(f, A.pm), A.S, [&](int64_t k) { push(k, f); });
}

// Mode 1's level f of row i with gp = geom_params(level_rate(f, pm)), which is the same for every
// row (the launchers compute the 49 levels' parameters once: per call on the CPU, per thread
// block on CUDA): field_hits' hits.  gp.kind == 1 exactly when the rate is not > 0 (geom_params),
// which is skip_field's test without re-deriving the rate.
template <class K, class Push>
LDP_HD void level_hits(const KeyedArgs<K>& A, int64_t i, int f, const GeomParams& gp, Push&& push) {
    if (gp.kind == 1 || A.S <= 0) return;
    CellRng g(A.seeds[i], A.st_f, 0, (uint32_t)f);
    skip_walk(g, gp, A.S, [&](int64_t k) { push(k, f); });
}

// The levels' parameters level_gp[L] = geom_params(level_rate(L, pm)), L = 0..L_TOP.
LDP_HD void level_params(double pm, GeomParams* level_gp) {
    for (int L = 0; L <= L_TOP; ++L) level_gp[L] = geom_params(level_rate(L, pm));
}

// The false-edge fields of row i: push(k, level) for each hit (mode 0: level 0; mode 1: the
// level of each field, positions possibly repeated across levels; the launcher dedups).
// level_gp: mode 1's level_params (unused in mode 0).
template <class K, class Push>
LDP_HD void false_hits(const KeyedArgs<K>& A, int64_t i, const GeomParams* level_gp, Push&& push) {
    if (A.mode == 0) {
        field_hits(A, i, 0, push);
        return;
    }
    for (int f = L_TOP, low = lowest_field(A, i); f >= low; --f) level_hits(A, i, f, level_gp[f], push);
}

// Mode 1's band test of row i: q's level Lt and the band's Bernoulli probability (a function of
// pf[i] alone, so a launcher may make it once per row rather than once per hit).
struct Band {
    int Lt;
    double prob;
};

template <class K>
LDP_HD Band band_of(const KeyedArgs<K>& A, int64_t i) {
    const double q = A.pf[i];
    Band b;
    b.Lt = level_of(q);
    double scale = 1.0;  // 2^(Lt + 1), or 2^L_TOP at the top band: exact
    for (int t = 0; t < (b.Lt < L_TOP ? b.Lt + 1 : L_TOP); ++t) scale *= 2.0;
    b.prob = b.Lt < L_TOP ? q * scale - 1.0 : q * scale;
    return b;
}

// Whether a hit at key position k with top level Lmax is an output of row i (the candidate
// j = row_of_key[k] is present, not i and not a neighbour: checked by the caller); band =
// band_of(A, i) (mode 1).
template <class K>
LDP_HD bool false_keep(const KeyedArgs<K>& A, int64_t i, int64_t k, int Lmax, const Band& band) {
    if (A.mode == 0) return true;
    if (Lmax > band.Lt) return true;
    if (!(band.prob > 0.0)) return false;
    CellRng c(A.seeds[i], A.st_f, (uint64_t)k, BAND_COL);
    return bernoulli_words(c, band.prob);
}

template <class K>
LDP_HD bool false_keep(const KeyedArgs<K>& A, int64_t i, int64_t k, int Lmax) {
    return A.mode == 0 || false_keep(A, i, k, Lmax, band_of(A, i));
}

// Sorted-array membership (the neighbour list is sorted by row).
template <class C>
LDP_HD bool contains(const C* a, int64_t len, int64_t v) {
    int64_t lo = 0, hi = len;
    while (lo < hi) {
        const int64_t mid = (lo + hi) >> 1;
        if ((int64_t)a[mid] < v) lo = mid + 1; else hi = mid;
    }
    return lo < len && (int64_t)a[lo] == v;
}

// The row of key position k if it is a false-edge candidate of row i (present, not i, not a
// neighbour), else -1.
template <class K, class C>
LDP_HD int64_t candidate(const KeyedArgs<K>& A, int64_t i, const C* nb, int64_t d, int64_t k) {
    const int64_t j = (int64_t)A.row_of_key[k];
    if (j < 0 || j == A.row0 + i || contains(nb, d, j)) return -1;
    return j;
}

// Discrete Laplace noise of one user's degree (DPRR line 2), from the user's degree seed.
LDP_HD int64_t degree_noise(uint64_t seed, uint64_t t, uint64_t s) {
    CellRng g(seed, STREAM_DPRR_DEGREE, 0, 0);
    return g.discrete_laplace(t, s);
}

}  // namespace keyed
}  // namespace ldp
