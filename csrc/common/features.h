// Node feature and label randomisers: RGNN's GRR and GRR-FS (paper 000, section IV-A, eq. 4),
// LPGNN's 1-bit and multi-bit encoders (paper 002, Algorithm 1) and label randomized response
// (paper 002 eq. 11 / paper 000 section IV-B), plus the input checks.
//
// One body, two launchers: the per-cell and per-row functions below are __host__ __device__
// (LDP_HD) and are called unchanged by csrc/cpu/features.cpp (std::thread over rows) and
// csrc/cuda/features.cu (a warp per row, a thread per Philox block or per cell), so CPU and CUDA give
// the same bits by construction.  The launchers choose only which rows a thread runs and the
// word generator type G: CellRng-like `Cell` (CUDA) or `WordStream` (C++: the same words,
// generated several Philox blocks at a time).  Twin: ldpfast/_numba/features.py, which makes
// the same draws in the same order.
//
// Contract:
// * Randomness comes only from CellRng word streams, one per (row, purpose), consumed in a
//   fixed order along the row.  Rows are the parallel unit (or Philox blocks of a row, whose
//   words are addressed directly), so output never depends on the thread count or backend.
//   Sub-streams (the CellRng `col` index) inside a mechanism's stream:
//     grr     : STREAM_GRR (row, 0) keep decisions, (row, 1) uniform bits
//     grr_fs  : STREAM_GRR_FS_SELECT (row, 0) Floyd sampling of m of d columns,
//               STREAM_GRR (row, 2) keep decisions of the sampled columns in column
//               order, (row, 3) fixed per-column bit slots for the uniform reports
//               (column j owns bits [off_j, off_j + b_j), b_j = bit_length(gamma_j - 1),
//               off = prefix sum of b), (row, 4) overflow bits (see fs_finish)
//     onebit  : STREAM_ONEBIT (row, 0), word j for column j
//     multibit: STREAM_MULTIBIT_SELECT (row, 0) Floyd sampling, STREAM_ONEBIT (row, 1)
//               one word per sampled column, in the order Floyd drew them (m = d: no
//               sampling, word j for column j)
//     labels  : STREAM_LABEL_RR (row, 0) keep decisions, (row, 1) uniform bits
// * Bernoulli decisions compare one 32-bit word with an integer threshold T computed in
//   Python (ldpfast/privacy/ldp.py): P = T / 2^32 exactly, rounded so that the likelihood
//   ratio of the *implemented* mechanism is <= e^eps (tests enumerate it exactly).
// * Uniform integers in [0, k) are drawn by rejection from bit_length(k-1) bits (exact), taken
//   from a bit reservoir (BitReader) or, for GRR-FS's uniform reports, from fixed per-column
//   bit slots: a binary feature costs one bit, not one word, so GRR-FS stays memory bound.
// * Float maths is double only (no FMA contraction: -ffp-contract=off / --fmad=false); float32
//   inputs are widened exactly (to_f64), never flushed, whatever -ftz the GPU build uses.
// * Outputs are preallocated by the caller and filled in place; inputs are never written.
#pragma once
#include "rng.h"

#if defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace feat {

constexpr uint32_t SUB_GRR_KEEP = 0, SUB_GRR_BITS = 1, SUB_FS_KEEP = 2, SUB_FS_BITS = 3, SUB_FS_OVER = 4;
constexpr uint32_t SUB_ONEBIT = 0, SUB_MULTIBIT = 1;
constexpr uint32_t SUB_LABEL_KEEP = 0, SUB_LABEL_BITS = 1;

// Leading zeros of v != 0.
LDP_HD int clz64(uint64_t v) {
#if defined(__CUDA_ARCH__)
    return __clzll((long long)v);
#else
    return __builtin_clzll(v);
#endif
}

// Trailing zeros of v != 0.
LDP_HD int ctz32(unsigned v) {
#if defined(__CUDA_ARCH__)
    return __ffs((int)v) - 1;
#else
    return __builtin_ctz(v);
#endif
}

LDP_HD int bit_length(uint64_t v) { return v ? 64 - clz64(v) : 0; }

// Bits used by a uniform draw in [0, k) (GRR-FS slots) and by GRR's "other value" in [0, k - 1).
LDP_HD int uniform_bits(int64_t k) { return bit_length((uint64_t)(k - 1)); }
LDP_HD int other_bits(int64_t k) { return bit_length(k >= 2 ? (uint64_t)(k - 2) : 0); }

LDP_HD double to_f64(double v) { return v; }
// Exact float -> double.  The GPU build may flush float32 subnormals (CuPy compiles with
// -ftz=true, which turns (double)v into cvt.ftz.f64.f32); the C++ build never does.
LDP_HD double to_f64(float v) {
#if defined(__CUDA_ARCH__)
    double r;
    asm("cvt.f64.f32 %0, %1;" : "=d"(r) : "f"(v));
    return r;
#else
    return (double)v;
#endif
}

// Philox block `draw` of the stream (seed, stream, row, col): CellRng's words 4 draw .. 4 draw + 3.
LDP_HD u32x4 cell_block(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col, uint32_t draw) {
    u32x4 c = {{draw, col, (uint32_t)row, (uint32_t)((row >> 32) & 0xffffu) | (stream << 16)}};
    return philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

// CellRng with WordStream's constructor (the reserve hint is ignored): the CUDA generator.
struct Cell : CellRng {
    LDP_HD Cell(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col, int64_t /*reserve*/)
        : CellRng(seed, stream, row, col) {}
};

// The word sequence of CellRng(seed, stream, row, col), with the first `reserve` words
// generated in one tight loop of independent Philox blocks (they pipeline on a CPU), then
// block by block.  Same words in the same order as CellRng::next_u32.
struct WordStream {
    static constexpr int CAP = 64;  // words held at once (16 blocks)
    uint64_t seed;
    uint64_t row;
    uint32_t stream, col;
    uint32_t draw;  // next block to generate
    int pos, len;
    uint32_t buf[CAP];

    LDP_HD WordStream(uint64_t seed_, uint32_t stream_, uint64_t row_, uint32_t col_, int64_t reserve)
        : seed(seed_), row(row_), stream(stream_), col(col_), draw(0), pos(0), len(0) {
        int64_t nblk = (reserve + 3) / 4;
        refill((int)(nblk < 1 ? 1 : (nblk > CAP / 4 ? CAP / 4 : nblk)));
    }

    LDP_HD void refill(int nblk) {
        for (int q = 0; q < nblk; ++q) {
            u32x4 r = cell_block(seed, stream, row, col, draw + (uint32_t)q);
            buf[4 * q] = r.v[0];
            buf[4 * q + 1] = r.v[1];
            buf[4 * q + 2] = r.v[2];
            buf[4 * q + 3] = r.v[3];
        }
        draw += (uint32_t)nblk;
        pos = 0;
        len = 4 * nblk;
    }

    LDP_HD uint32_t next_u32() {
        if (pos == len) refill(1);
        return buf[pos++];
    }

    // CellRng::randint for k <= 2^32.
    LDP_HD uint64_t randint(uint64_t k) {
        if (k <= 1) {
            next_u32();  // CellRng::randint(1) still consumes one word
            return 0;
        }
        uint64_t m = (~0ull) >> clz64(k - 1);
        for (;;) {
            uint64_t v = (uint64_t)next_u32() & m;
            if (v < k) return v;
        }
    }
};

// Bits of a CellRng's word stream, least significant first: words are appended above the
// bits still held, so take(b) returns the next b bits of the concatenated stream.
struct BitReader {
    CellRng g;
    uint64_t r;
    int n;
    LDP_HD BitReader(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col)
        : g(seed, stream, row, col), r(0), n(0) {}

    LDP_HD uint64_t take(int b) {  // 0 <= b <= 32
        if (n < b) {
            r |= (uint64_t)g.next_u32() << n;
            n += 32;
        }
        uint64_t v = r & ((1ull << b) - 1ull);
        r >>= b;
        n -= b;
        return v;
    }

    // Uniform in [0, k) by rejection on b = bit_length(k - 1) bits (k = 1: no bits, 0).
    LDP_HD uint64_t randint(uint64_t k, int b) {
        if (b == 0) return 0;
        for (;;) {
            uint64_t v = take(b);
            if (v < k) return v;
        }
    }
};

// Floyd's algorithm: a uniform m-subset of [0, d) from m uniform integers.  chosen(t) says
// whether column t was picked at an earlier step; pick(j) is called for each chosen column
// in the order drawn.
template <class G, class Chosen, class Pick>
LDP_HD void floyd(G& s, int64_t d, int64_t m, Chosen chosen, Pick pick) {
    for (int64_t j = d - m; j < d; ++j) {
        int64_t t = (int64_t)s.randint((uint64_t)(j + 1));
        pick(chosen(t) ? j : t);
    }
}

// ---------------------------------------------------------------------------------------
// GRR (paper 000 section IV-A): keep x with probability T / 2^32, otherwise a uniform value
// among the k - 1 others.  bkm1 = other_bits(k).
// Split in two so that a launcher may draw r elsewhere (the CUDA warp draws a row's at once):
// grr_needs_other says whether the keep word w calls for the other-value draw r in [0, k - 1),
// grr_decide gives the report.
LDP_HD bool grr_needs_other(uint64_t w, uint64_t T, int bkm1) { return bkm1 != 0 && w >= T; }

template <class I>
LDP_HD I grr_decide(I x, uint64_t w, uint64_t T, int bkm1, uint64_t r) {
    if (bkm1 == 0) return x ^ (I)(w >= T);  // k <= 2: the other value is 1 - x, no bits drawn
    if (w < T) return x;
    return (I)(r >= (uint64_t)x ? r + 1 : r);
}

template <class I, class G>
LDP_HD I grr_one(I x, uint64_t k, uint64_t T, int bkm1, G& keep, BitReader& bits) {
    const uint64_t w = keep.next_u32();
    return grr_decide(x, w, T, bkm1, grr_needs_other(w, T, bkm1) ? bits.randint(k - 1, bkm1) : 0);
}

// Row i of GRR on every entry.
template <class G, class I>
LDP_HD void grr_row(const I* xr, I* o, int64_t d, const int64_t* k, const uint64_t* T, uint64_t seed,
                    uint64_t i) {
    G keep(seed, STREAM_GRR, i, SUB_GRR_KEEP, d);
    BitReader bits(seed, STREAM_GRR, i, SUB_GRR_BITS);
    for (int64_t j = 0; j < d; ++j) o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], other_bits(k[j]), keep, bits);
}

// Randomized response on node i's label (unmasked nodes keep theirs and draw nothing).
template <class I>
LDP_HD I rr_label(I y, bool masked, uint64_t c, uint64_t T, uint64_t seed, uint64_t i) {
    if (!masked) return y;
    CellRng keep(seed, STREAM_LABEL_RR, i, SUB_LABEL_KEEP);
    BitReader bits(seed, STREAM_LABEL_RR, i, SUB_LABEL_BITS);
    return grr_one(y, c, T, other_bits((int64_t)c), keep, bits);
}

// ---------------------------------------------------------------------------------------
// GRR-FS (paper 000 eq. 4), one row in three steps, run in this order on each row (a launcher
// may run a step for several rows before the next step; the steps use separate streams):
//   fs_slots  : every column gets its uniform slot value (bits of STREAM_GRR (row, 3));
//   fs_select : Floyd marks the m sampled columns with -1 in the output row (a slot value is
//               never negative: b <= 31 bits), so no scratch memory is needed;
//   fs_finish : in column order, GRR on the sampled columns (keep words from (row, 2)), and
//               slot values >= gamma_j (possible only when gamma_j is not a power of two)
//               redrawn from the overflow reader (row, 4), which also supplies the "other
//               value" of sampled columns whose GRR does not keep the truth.
// m = d skips the first two steps: every column is sampled.
struct FsFlags {
    int uniform_b;  // common slot width of all columns, or -1
    int pow2;       // all domains powers of two: no slot is ever rejected
};

LDP_HD FsFlags fs_flags(const int64_t* k, int64_t d) {
    FsFlags f = {d ? uniform_bits(k[0]) : 0, 1};
    for (int64_t j = 0; j < d; ++j) {
        if (uniform_bits(k[j]) != f.uniform_b) f.uniform_b = -1;
        if (k[j] & (k[j] - 1)) f.pow2 = 0;
    }
    return f;
}

#if !defined(__CUDACC__)
// Host: the four columns of each nibble value, (I)((q >> t) & 1), as one row to copy (a
// vector move per four columns instead of a shift, mask and store per column).
template <class I>
struct Nibbles {
    I v[16][4];
    constexpr Nibbles() : v() {
        for (int q = 0; q < 16; ++q)
            for (int t = 0; t < 4; ++t) v[q][t] = (I)((q >> t) & 1);
    }
};
template <class I>
inline constexpr Nibbles<I> NIBBLES{};
#endif

template <class I>
LDP_HD void fs_slots(I* o, int64_t d, const int64_t* k, FsFlags f, uint64_t seed, uint64_t i) {
    if (f.uniform_b == 1) {  // binary features: one word gives 32 columns
        CellRng g(seed, STREAM_GRR, i, SUB_FS_BITS);
        int64_t j0 = 0;
        for (; j0 + 32 <= d; j0 += 32) {  // fixed trip count: unrolled, constant shifts
            const uint32_t w = g.next_u32();
#if !defined(__CUDACC__)
            for (int t = 0; t < 32; t += 4) __builtin_memcpy(o + j0 + t, NIBBLES<I>.v[(w >> t) & 15u], 4 * sizeof(I));
#else
            for (int t = 0; t < 32; ++t) o[j0 + t] = (I)((w >> t) & 1u);
#endif
        }
        if (j0 < d) {
            const uint32_t w = g.next_u32();
            for (int t = 0; t < d - j0; ++t) o[j0 + t] = (I)((w >> t) & 1u);
        }
        return;
    }
    BitReader r(seed, STREAM_GRR, i, SUB_FS_BITS);
    for (int64_t j = 0; j < d; ++j) o[j] = (I)r.take(uniform_bits(k[j]));
}

// hint(j) is told each sampled column as it is drawn (the C++ launcher prefetches x there).
template <class G, class I, class Hint>
LDP_HD void fs_select(I* o, int64_t d, int64_t m, uint64_t seed, uint64_t i, Hint hint) {
    G s(seed, STREAM_GRR_FS_SELECT, i, 0, m);
    floyd(s, d, m, [&](int64_t t) { return o[t] < 0; }, [&](int64_t j) {
        o[j] = (I)-1;
        hint(j);
    });
}

template <class G, class I>
LDP_HD void fs_finish(const I* xr, I* o, int64_t d, int64_t m, const int64_t* k, const uint64_t* T, FsFlags f,
                      uint64_t seed, uint64_t i) {
    G keep(seed, STREAM_GRR, i, SUB_FS_KEEP, m);
    BitReader over(seed, STREAM_GRR, i, SUB_FS_OVER);
    if (m == d) {
        for (int64_t j = 0; j < d; ++j) o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], other_bits(k[j]), keep, over);
        return;
    }
    if (f.pow2) {  // no slot is rejected: visit sampled columns only, 8 sign bits at a time
        for (int64_t q = 0; q < d; q += 8) {
            const int64_t e = d - q < 8 ? d : q + 8;
            uint64_t any = 0;
            for (int64_t j = q; j < e; ++j) any |= (uint64_t)(int64_t)o[j];
            if (!(any >> 63)) continue;
            unsigned mask = 0;  // sampled columns of the block, visited in order without branches per column
            for (int64_t j = q; j < e; ++j) mask |= (unsigned)((uint64_t)(int64_t)o[j] >> 63) << (j - q);
            while (mask) {
                const int64_t j = q + ctz32(mask);
                mask &= mask - 1;
                o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], other_bits(k[j]), keep, over);
            }
        }
        return;
    }
    for (int64_t j = 0; j < d; ++j) {
        if (o[j] < 0)
            o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], other_bits(k[j]), keep, over);
        else if ((int64_t)o[j] >= k[j])
            o[j] = (I)over.randint((uint64_t)k[j], uniform_bits(k[j]));
    }
}

// ---------------------------------------------------------------------------------------
// 1-bit encoding of one value (paper 002, Algorithm 1 line 4): t ~ Bernoulli(T(x) / 2^32),
// T(x) = T_lo + floor((x - alpha) / (beta - alpha) * span), span = 2^32 - 2 T_lo.
// f is clamped into [0, 1] with NaN -> 0 (twin: _onebit_f in _numba/features.py), so T always
// lies in [T_lo, 2^32 - T_lo] and the likelihood ratio stays <= e^eps whatever the inputs: an
// overflowing width (beta - alpha = inf gives inf / inf = NaN at x = beta) or a value outside
// [alpha, beta] must not reach the float -> integer conversion, which is undefined behaviour
// for NaN and out-of-range values.  No-op for in-range x and a finite width (rounding is
// monotone, so 0 <= x - alpha <= beta - alpha), hence unchanged outputs there.
LDP_HD double onebit_f(double v, double alpha, double beta) {
    double f = (v - alpha) / (beta - alpha);
    return f > 0.0 ? (f < 1.0 ? f : 1.0) : 0.0;
}

LDP_HD int8_t onebit_bit(double v, uint32_t word, double alpha, double beta, uint64_t T_lo, double span) {
    uint64_t T = T_lo + (uint64_t)(onebit_f(v, alpha, beta) * span);
    return (uint64_t)word < T ? (int8_t)1 : (int8_t)-1;
}

// Columns [4 q, 4 q + 4) of a row (clipped at d) from Philox block q of the row's stream
// STREAM_ONEBIT (row, sub): word j encodes column j.  1-bit (sub 0) and multi-bit with m = d
// (sub 1) are these blocks in any order, so a CUDA thread can own one block.
template <class F>
LDP_HD void onebit_block(const F* xr, int8_t* o, int64_t d, int64_t q, double alpha, double beta, uint64_t T_lo,
                         double span, uint64_t seed, uint32_t sub, uint64_t i) {
    const u32x4 w = cell_block(seed, STREAM_ONEBIT, i, sub, (uint32_t)q);
    const int64_t j0 = 4 * q;
    const int e = d - j0 < 4 ? (int)(d - j0) : 4;
    for (int t = 0; t < e; ++t) o[j0 + t] = onebit_bit(to_f64(xr[j0 + t]), pick4(w, t), alpha, beta, T_lo, span);
}

// Row i of the multi-bit encoder: m < d samples m columns with Floyd and encodes each as it
// is drawn (one word of (row, 1) per column, in Floyd's order); the output row itself marks
// the chosen columns (0 = not chosen, +-1 = encoded).  m = d encodes every column in order.
// multibit_pick is the m < d case on a row already zeroed (the CUDA launcher zeroes it with the
// whole warp, then one lane picks).
template <class G, class F>
LDP_HD void multibit_pick(const F* xr, int8_t* o, int64_t d, int64_t m, double alpha, double beta, uint64_t T_lo,
                          double span, uint64_t seed, uint64_t i);

template <class G, class F>
LDP_HD void multibit_row(const F* xr, int8_t* o, int64_t d, int64_t m, double alpha, double beta, uint64_t T_lo,
                         double span, uint64_t seed, uint64_t i) {
    if (m == d) {
        for (int64_t q = 0; 4 * q < d; ++q) onebit_block(xr, o, d, q, alpha, beta, T_lo, span, seed, SUB_MULTIBIT, i);
        return;
    }
    for (int64_t j = 0; j < d; ++j) o[j] = 0;
    multibit_pick<G>(xr, o, d, m, alpha, beta, T_lo, span, seed, i);
}

template <class G, class F>
LDP_HD void multibit_pick(const F* xr, int8_t* o, int64_t d, int64_t m, double alpha, double beta, uint64_t T_lo,
                          double span, uint64_t seed, uint64_t i) {
    G s(seed, STREAM_MULTIBIT_SELECT, i, 0, m);
    G g(seed, STREAM_ONEBIT, i, SUB_MULTIBIT, m);
    floyd(s, d, m, [&](int64_t t) { return o[t] != 0; },
          [&](int64_t j) { o[j] = onebit_bit(to_f64(xr[j]), g.next_u32(), alpha, beta, T_lo, span); });
}

// ---------------------------------------------------------------------------------------
// Input checks (the Python layer reports the first bad flat index).
template <class I>
LDP_HD bool outside_domain(I v, int64_t k) {
    return (uint64_t)(int64_t)v >= (uint64_t)k;  // unsigned compare: negative values wrap above every k
}

// NaN or outside [alpha, beta]; branch free, so the C++ scan vectorises (NaN fails both compares).
template <class F>
LDP_HD bool outside_range(F v, double alpha, double beta) {
    const double x = to_f64(v);
    return (int)(x < alpha) | (int)(x > beta) | (int)(x != x);
}

}  // namespace feat
}  // namespace ldp
