// Node feature and label randomisers: RGNN's GRR and GRR-FS (paper 000, section IV-A,
// eq. 4), LPGNN's 1-bit and multi-bit encoders (paper 002, Algorithm 1) and label
// randomized response (paper 002 eq. 11 / paper 000 section IV-B).
//
// Contract (twin: ldpfast/_numba/features.py, which makes the same draws in the same order):
// * Randomness comes only from CellRng word streams (CellRng itself, or WordStream, which
//   yields the same words in the same order), one per (row, purpose), consumed in a fixed
//   order along the row.  Rows are the parallel unit, so output never depends on the
//   thread count.  Sub-streams (the CellRng `col` index) inside a mechanism's stream:
//     grr     : STREAM_GRR (row, 0) keep decisions, (row, 1) uniform bits
//     grr_fs  : STREAM_GRR_FS_SELECT (row, 0) Floyd sampling of m of d columns,
//               STREAM_GRR (row, 2) keep decisions of the sampled columns in column
//               order, (row, 3) fixed per-column bit slots for the uniform reports
//               (column j owns bits [off_j, off_j + b_j), b_j = bit_length(gamma_j - 1),
//               off = prefix sum of b), (row, 4) overflow bits (see FsLayout)
//     onebit  : STREAM_ONEBIT (row, 0)
//     multibit: STREAM_MULTIBIT_SELECT (row, 0) Floyd sampling, STREAM_ONEBIT (row, 1)
//               one word per sampled column, in the order Floyd drew them
//     labels  : STREAM_LABEL_RR (row, 0) keep decisions, (row, 1) uniform bits
// * Bernoulli decisions compare one 32-bit word with an integer threshold T computed in
//   Python (ldpfast/privacy/ldp.py): P = T / 2^32 exactly, rounded so that the likelihood
//   ratio of the *implemented* mechanism is <= e^eps (tests enumerate it exactly).
// * Uniform integers in [0, k) are drawn by rejection from bit_length(k-1) bits (exact), taken
//   from a bit reservoir (BitReader) or, for GRR-FS's uniform reports, from fixed per-column
//   bit slots: a binary feature costs one bit, not one word, so GRR-FS stays memory bound.
// * Outputs are preallocated by the caller and filled in place; inputs are never written.
#include <algorithm>
#include <cstring>
#include <vector>

#include "../common/rng.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {
namespace {

constexpr uint32_t SUB_GRR_KEEP = 0, SUB_GRR_BITS = 1, SUB_FS_KEEP = 2, SUB_FS_BITS = 3, SUB_FS_OVER = 4;
constexpr uint32_t SUB_ONEBIT = 0, SUB_MULTIBIT = 1;
constexpr uint32_t SUB_LABEL_KEEP = 0, SUB_LABEL_BITS = 1;

inline int bit_length(uint64_t v) {
    int b = 0;
    while (v) {
        ++b;
        v >>= 1;
    }
    return b;
}

// Bits of a CellRng's word stream, least significant first: words are appended above the
// bits still held, so take(b) returns the next b bits of the concatenated stream.
struct BitReader {
    CellRng g;
    uint64_t r;
    int n;
    BitReader(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col) : g(seed, stream, row, col), r(0), n(0) {}

    inline uint64_t take(int b) {  // 1 <= b <= 32
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
    inline uint64_t randint(uint64_t k, int b) {
        if (b == 0) return 0;
        for (;;) {
            uint64_t v = take(b);
            if (v < k) return v;
        }
    }
};

// The word sequence of CellRng(seed, stream, row, col), with the first `reserve` words
// generated in one tight loop of independent Philox blocks (they pipeline), then block by
// block.  Same words in the same order as CellRng::next_u32.
struct WordStream {
    static constexpr int CAP = 64;  // words held at once (16 blocks)
    uint32_t k0, k1, c1, c2, c3;
    uint32_t draw;  // next block to generate
    int pos, len;
    uint32_t buf[CAP];

    WordStream(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col, int64_t reserve)
        : k0((uint32_t)seed), k1((uint32_t)(seed >> 32)), c1(col), c2((uint32_t)row),
          c3((uint32_t)((row >> 32) & 0xffffu) | (stream << 16)), draw(0), pos(0), len(0) {
        refill((int)std::min<int64_t>(CAP / 4, std::max<int64_t>(1, (reserve + 3) / 4)));
    }

    inline void refill(int nblk) {
        for (int q = 0; q < nblk; ++q) {
            u32x4 c = {{draw + (uint32_t)q, c1, c2, c3}};
            u32x4 r = philox4x32_10(c, k0, k1);
            buf[4 * q] = r.v[0];
            buf[4 * q + 1] = r.v[1];
            buf[4 * q + 2] = r.v[2];
            buf[4 * q + 3] = r.v[3];
        }
        draw += (uint32_t)nblk;
        pos = 0;
        len = 4 * nblk;
    }

    inline uint32_t next_u32() {
        if (pos == len) refill(1);
        return buf[pos++];
    }

    // CellRng::randint for k <= 2^32 with the mask 2^bit_length(k - 1) - 1 computed directly.
    inline uint64_t randint(uint64_t k) {
        if (k <= 1) {
            next_u32();  // CellRng::randint(1) still consumes one word
            return 0;
        }
        uint64_t m = (~0ull) >> __builtin_clzll(k - 1);
        for (;;) {
            uint64_t v = (uint64_t)next_u32() & m;
            if (v < k) return v;
        }
    }
};

// One GRR report (paper 000 section IV-A): keep x with probability T / 2^32, otherwise a
// uniform value among the k - 1 others.  bkm1 = bit_length(k - 2).
template <class I, class G>
inline I grr_one(I x, uint64_t k, uint64_t T, int bkm1, G& keep, BitReader& bits) {
    if ((uint64_t)keep.next_u32() < T) return x;
    uint64_t r = bits.randint(k - 1, bkm1);
    return (I)(r >= (uint64_t)x ? r + 1 : r);
}

void check_2d(const py::array& a, const char* name) {
    if (a.ndim() != 2) throw std::invalid_argument(std::string(name) + ": expected a 2-D array");
}

void check_same_shape(const py::array& a, const py::array& b, const char* na, const char* nb) {
    if (a.ndim() != b.ndim()) throw std::invalid_argument(std::string(nb) + ": shape differs from " + na);
    for (py::ssize_t i = 0; i < a.ndim(); ++i)
        if (a.shape(i) != b.shape(i)) throw std::invalid_argument(std::string(nb) + ": shape differs from " + na);
}

// Rows per parallel chunk: about 16k elements, so tiny inputs stay single-threaded.
inline int64_t row_chunk(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)); }

// ---------------------------------------------------------------------------------------
// Floyd's algorithm: a uniform m-subset of [0, d) from m uniform integers.  sel[] (all zero
// on entry) gets `mark` at the chosen columns, idx[] lists them in the order drawn.
template <class G, class M>
inline void floyd(G& s, int64_t d, int64_t m, M* sel, M mark, int64_t* idx) {
    int64_t cnt = 0;
    for (int64_t j = d - m; j < d; ++j) {
        int64_t t = (int64_t)s.randint((uint64_t)(j + 1));
        int64_t pick = sel[t] ? j : t;
        sel[pick] = mark;
        idx[cnt++] = pick;
    }
}

template <class I>
void grr_t(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, uint64_t seed) {
    std::vector<int> bkm1(d);
    for (int64_t j = 0; j < d; ++j) bkm1[j] = bit_length(k[j] >= 2 ? (uint64_t)(k[j] - 2) : 0);
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            WordStream keep(seed, STREAM_GRR, (uint64_t)i, SUB_GRR_KEEP, d);
            BitReader bits(seed, STREAM_GRR, (uint64_t)i, SUB_GRR_BITS);
            const I* xr = x + i * d;
            I* o = out + i * d;
            for (int64_t j = 0; j < d; ++j) o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], bkm1[j], keep, bits);
        }
    }, row_chunk(d));
}

// Per-call layout of GRR-FS's uniform draws: column j owns bits [off[j], off[j] + b[j]) of the
// row's stream STREAM_GRR (row, SUB_FS_BITS), b[j] = bit_length(gamma_j - 1).  A slot value
// >= gamma_j (only possible when gamma_j is not a power of two) is rejected and redrawn, in
// column order, from the overflow reader STREAM_GRR (row, SUB_FS_OVER), which also supplies
// the "other value" of sampled columns whose GRR does not keep the truth.  Fixed slots make
// the fill loop free of loop-carried state, so binary features cost one bit each.
struct FsLayout {
    std::vector<int> b;
    std::vector<int64_t> off;
    std::vector<int> bkm1;
    int64_t nblk = 0;  // Philox blocks per row
    int uniform_b = -1;  // common b of all columns, or -1
    bool pow2 = true;    // all domains powers of two: no slot is ever rejected
};

FsLayout fs_layout(const int64_t* k, int64_t d) {
    FsLayout L;
    L.b.resize(d);
    L.off.resize(d);
    L.bkm1.resize(d);
    int64_t o = 0;
    for (int64_t j = 0; j < d; ++j) {
        L.b[j] = bit_length((uint64_t)(k[j] - 1));
        L.bkm1[j] = bit_length(k[j] >= 2 ? (uint64_t)(k[j] - 2) : 0);
        L.off[j] = o;
        o += L.b[j];
        L.pow2 = L.pow2 && ((k[j] & (k[j] - 1)) == 0);
    }
    int64_t nwords = (o + 31) / 32;
    L.nblk = (nwords + 3) / 4;
    L.uniform_b = d ? L.b[0] : 0;
    for (int64_t j = 1; j < d; ++j)
        if (L.b[j] != L.uniform_b) L.uniform_b = -1;
    return L;
}

// Words [0, 4 nblk) of the stream (seed, stream, row, col), i.e. CellRng's first draws.
inline void stream_words(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col, int64_t nblk, uint32_t* w) {
    const uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    const uint32_t c2 = (uint32_t)row, c3 = (uint32_t)((row >> 32) & 0xffffu) | (stream << 16);
    for (int64_t q = 0; q < nblk; ++q) {
        u32x4 c = {{(uint32_t)q, col, c2, c3}};
        u32x4 r = philox4x32_10(c, k0, k1);
        w[4 * q] = r.v[0];
        w[4 * q + 1] = r.v[1];
        w[4 * q + 2] = r.v[2];
        w[4 * q + 3] = r.v[3];
    }
}

inline uint64_t slot(const uint32_t* w, int64_t off, int b) {
    uint64_t win = (uint64_t)w[off >> 5] | ((uint64_t)w[(off >> 5) + 1] << 32);
    return (win >> (off & 31)) & ((1ull << b) - 1ull);
}

// Rows are processed in blocks of PB: the column sampling of the whole block is drawn first
// and the sampled input entries are prefetched, so the scattered reads x[i, j] (one cache
// line per sampled entry of a 1 GB matrix) overlap instead of stalling one by one.
constexpr int64_t PB = 16;

template <class T>
inline void prefetch_entries(const T* row, const int64_t* idx, int64_t m) {
    for (int64_t c = 0; c < m; ++c) __builtin_prefetch(row + idx[c], 0, 0);
}

// o[j] = bit j of the word array w (bit j of w[j / 32], least significant first): one
// byte of w expands to 8 outputs through a 256-entry table (8 KB for int32, 16 KB int64).
template <class I>
struct BitTable {
    I v[256][8];
    BitTable() {
        for (int b = 0; b < 256; ++b)
            for (int t = 0; t < 8; ++t) v[b][t] = (I)((b >> t) & 1);
    }
};

template <class I>
inline void fill_bits1(const uint32_t* w, I* o, int64_t d) {
    static const BitTable<I> tab;
    const int64_t full = d / 8;
    for (int64_t q = 0; q < full; ++q) {
        unsigned byte = (w[q >> 2] >> (8 * (q & 3))) & 0xffu;
        std::memcpy(o + 8 * q, tab.v[byte], sizeof(tab.v[byte]));
    }
    for (int64_t j = 8 * full; j < d; ++j) o[j] = (I)((w[j >> 5] >> (j & 31)) & 1u);
}

template <class I>
void grr_fs_t(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, int64_t m,
              uint64_t seed) {
    const FsLayout L = fs_layout(k, d);
    const bool all = (m == d);
    const bool dense = m * (int64_t)sizeof(I) * 2 >= 64 && m * 8 >= d;  // ~every line of a row is read
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        std::vector<uint8_t> sel(PB * d, all ? 1 : 0);
        std::vector<int64_t> idx(PB * m);
        if (all)
            for (int64_t r = 0; r < PB; ++r)
                for (int64_t j = 0; j < d; ++j) idx[r * m + j] = j;
        std::vector<uint32_t> w(4 * L.nblk + 1, 0u);
        for (int64_t i0 = b; i0 < e; i0 += PB) {
            const int64_t i1 = std::min(e, i0 + PB);
            if (!all) {
                for (int64_t i = i0; i < i1; ++i) {
                    int64_t* ix = idx.data() + (i - i0) * m;
                    WordStream s(seed, STREAM_GRR_FS_SELECT, (uint64_t)i, 0, m);
                    floyd(s, d, m, sel.data() + (i - i0) * d, uint8_t(1), ix);
                    if (!dense) prefetch_entries(x + i * d, ix, m);
                }
            }
            if (dense)  // many sampled entries per row: stream the next block's rows instead
                for (int64_t i = i1; i < std::min(e, i1 + PB); ++i)
                    for (int64_t j = 0; j < d; j += 64 / (int64_t)sizeof(I)) __builtin_prefetch(x + i * d + j, 0, 0);
            for (int64_t i = i0; i < i1; ++i) {
                const I* xr = x + i * d;
                I* o = out + i * d;
                uint8_t* sr = sel.data() + (i - i0) * d;
                const int64_t* ix = idx.data() + (i - i0) * m;
                // 1. uniform slot values for every column (sampled ones are overwritten below)
                stream_words(seed, STREAM_GRR, (uint64_t)i, SUB_FS_BITS, L.nblk, w.data());
                if (L.uniform_b == 1) {
                    fill_bits1(w.data(), o, d);
                } else if (L.uniform_b == 0) {
                    for (int64_t j = 0; j < d; ++j) o[j] = 0;
                } else {
                    for (int64_t j = 0; j < d; ++j) o[j] = (I)slot(w.data(), L.off[j], L.b[j]);
                }
                // 2. in column order: GRR on sampled columns, redraw rejected slots
                WordStream keep(seed, STREAM_GRR, (uint64_t)i, SUB_FS_KEEP, m);
                BitReader over(seed, STREAM_GRR, (uint64_t)i, SUB_FS_OVER);
                if (L.pow2) {  // no slot is ever rejected: visit the sampled columns only,
                    // in column order, scanning the 0/1 marks eight at a time
                    int64_t q = 0;
                    for (; q + 8 <= d; q += 8) {
                        uint64_t u;
                        std::memcpy(&u, sr + q, 8);
                        if (L.uniform_b == 1) {  // binary: the other value is 1 - x, no bits
                            while (u) {
                                int64_t j = q + (__builtin_ctzll(u) >> 3);
                                u &= u - 1;
                                o[j] = xr[j] ^ (I)((uint64_t)keep.next_u32() >= T[j]);
                            }
                        }
                        while (u) {
                            int64_t j = q + (__builtin_ctzll(u) >> 3);
                            u &= u - 1;
                            o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], L.bkm1[j], keep, over);
                        }
                    }
                    for (int64_t j = q; j < d; ++j)
                        if (sr[j]) o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], L.bkm1[j], keep, over);
                } else {
                    for (int64_t j = 0; j < d; ++j) {
                        if (sr[j])
                            o[j] = grr_one(xr[j], (uint64_t)k[j], T[j], L.bkm1[j], keep, over);
                        else if ((int64_t)o[j] >= k[j])
                            o[j] = (I)over.randint((uint64_t)k[j], L.b[j]);
                    }
                }
                if (!all)
                    for (int64_t c = 0; c < m; ++c) sr[ix[c]] = 0;
            }
        }
    }, row_chunk(d));
}

// 1-bit encoding of one value (paper 002, Algorithm 1 line 4): t ~ Bernoulli(T(x) / 2^32),
// T(x) = T_lo + floor((x - alpha) / (beta - alpha) * span), span = 2^32 - 2 T_lo.
// f is clamped into [0, 1] with NaN -> 0 (twin: _onebit_f in _numba/features.py), so T always
// lies in [T_lo, 2^32 - T_lo] and the likelihood ratio stays <= e^eps whatever the inputs: an
// overflowing width (beta - alpha = inf gives inf / inf = NaN at x = beta) or a value outside
// [alpha, beta] must not reach the float -> integer conversion, which is undefined behaviour
// for NaN and out-of-range values.  No-op for in-range x and a finite width (rounding is
// monotone, so 0 <= x - alpha <= beta - alpha), hence unchanged outputs there.
inline double onebit_f(double v, double alpha, double beta) {
    double f = (v - alpha) / (beta - alpha);
    return f > 0.0 ? (f < 1.0 ? f : 1.0) : 0.0;
}

template <class F, class G>
inline int8_t onebit_one(F v, double alpha, double beta, uint64_t T_lo, double span, G& g) {
    uint64_t T = T_lo + (uint64_t)(onebit_f((double)v, alpha, beta) * span);
    return (uint64_t)g.next_u32() < T ? (int8_t)1 : (int8_t)-1;
}

template <class F>
void onebit_t(const F* x, int8_t* out, int64_t n, int64_t d, double alpha, double beta, uint64_t T_lo,
              double span, uint64_t seed) {
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            WordStream g(seed, STREAM_ONEBIT, (uint64_t)i, SUB_ONEBIT, d);
            const F* xr = x + i * d;
            int8_t* o = out + i * d;
            for (int64_t j = 0; j < d; ++j) o[j] = onebit_one(xr[j], alpha, beta, T_lo, span, g);
        }
    }, row_chunk(d));
}

template <class F>
void multibit_t(const F* x, int8_t* out, int64_t n, int64_t d, int64_t m, double alpha, double beta,
                uint64_t T_lo, double span, uint64_t seed) {
    const bool all = (m == d);
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        std::vector<int64_t> idx(PB * m);
        for (int64_t i0 = b; i0 < e; i0 += PB) {
            const int64_t i1 = std::min(e, i0 + PB);
            if (!all) {
                // Floyd on the output row itself: a non-zero entry marks a sampled column.
                for (int64_t i = i0; i < i1; ++i) {
                    int8_t* o = out + i * d;
                    int64_t* ix = idx.data() + (i - i0) * m;
                    std::memset(o, 0, (size_t)d);
                    WordStream s(seed, STREAM_MULTIBIT_SELECT, (uint64_t)i, 0, m);
                    floyd(s, d, m, o, int8_t(2), ix);  // 2 marks "selected" until encoded
                    prefetch_entries(x + i * d, ix, m);
                }
            }
            for (int64_t i = i0; i < i1; ++i) {
                const F* xr = x + i * d;
                int8_t* o = out + i * d;
                WordStream g(seed, STREAM_ONEBIT, (uint64_t)i, SUB_MULTIBIT, m);
                if (all) {
                    for (int64_t j = 0; j < d; ++j) o[j] = onebit_one(xr[j], alpha, beta, T_lo, span, g);
                    continue;
                }
                const int64_t* ix = idx.data() + (i - i0) * m;
                for (int64_t c = 0; c < m; ++c) {
                    int64_t j = ix[c];
                    o[j] = onebit_one(xr[j], alpha, beta, T_lo, span, g);
                }
            }
        }
    }, row_chunk(d));
}

template <class I>
void rr_labels_t(const I* y, const bool* mask, I* out, int64_t n, uint64_t c, uint64_t T, uint64_t seed) {
    int bkm1 = bit_length(c >= 2 ? c - 2 : 0);
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            if (!mask[i]) {
                out[i] = y[i];
                continue;
            }
            CellRng keep(seed, STREAM_LABEL_RR, (uint64_t)i, SUB_LABEL_KEEP);
            BitReader bits(seed, STREAM_LABEL_RR, (uint64_t)i, SUB_LABEL_BITS);
            out[i] = grr_one(y[i], c, T, bkm1, keep, bits);
        }
    }, 4096);
}

// First flat index (row-major) of a value outside [0, k[col]), or -1.
template <class I>
int64_t check_categorical_t(const I* x, int64_t n, int64_t d, const int64_t* k) {
    std::vector<int64_t> first(std::max(1, get_num_threads()), -1);
    parallel_for(n, [&](int64_t b, int64_t e, int t) {
        for (int64_t i = b; i < e; ++i) {
            const I* xr = x + i * d;
            uint64_t bad = 0;  // unsigned compare: negative values wrap above every k
            for (int64_t j = 0; j < d; ++j) bad |= (uint64_t)((uint64_t)(int64_t)xr[j] >= (uint64_t)k[j]);
            if (bad) {
                for (int64_t j = 0; j < d; ++j)
                    if ((int64_t)xr[j] < 0 || (int64_t)xr[j] >= k[j]) {
                        first[t] = i * d + j;
                        return;
                    }
            }
        }
    }, row_chunk(d));
    for (int64_t v : first)
        if (v >= 0) return v;  // chunks are in row order, so the first hit is the smallest
    return -1;
}

// First flat index of a value that is NaN or outside [alpha, beta], or -1.
template <class F>
int64_t check_range_t(const F* x, int64_t N, double alpha, double beta) {
    std::vector<int64_t> first(std::max(1, get_num_threads()), -1);
    parallel_for(N, [&](int64_t b, int64_t e, int t) {
        const int64_t BLK = 4096;
        for (int64_t s = b; s < e; s += BLK) {
            int64_t se = std::min(e, s + BLK);
            int bad = 0;  // branch-free so the loop vectorises; NaN fails both compares
            for (int64_t i = s; i < se; ++i) {
                double v = (double)x[i];
                bad |= (int)(v < alpha) | (int)(v > beta) | (int)(v != v);
            }
            if (bad) {
                for (int64_t i = s; i < se; ++i) {
                    double v = (double)x[i];
                    if (!(v >= alpha && v <= beta)) {
                        first[t] = i;
                        return;
                    }
                }
            }
        }
    }, 1 << 16);
    for (int64_t v : first)
        if (v >= 0) return v;
    return -1;
}

// ---------------------------------------------------------------------------------------
// Python entry points.

struct Cat {
    int64_t n, d;
    const int64_t* k;
    const uint64_t* T;
};

Cat cat_args(py::array& x, py::array& out, py::array& k, py::array& T) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    Cat c{x.shape(0), x.shape(1), cdata_ptr<int64_t>(k, "k"), cdata_ptr<uint64_t>(T, "thresholds")};
    check_size(k, c.d, "k");
    check_size(T, c.d, "thresholds");
    for (int64_t j = 0; j < c.d; ++j) {
        if (c.k[j] < 1 || c.k[j] > (int64_t(1) << 31))
            throw std::invalid_argument("k: domain sizes must lie in [1, 2^31]");
        if (c.T[j] > (uint64_t(1) << 32)) throw std::invalid_argument("thresholds: must be <= 2^32");
    }
    return c;
}

void grr(py::array x, py::array k, py::array T, uint64_t seed, py::array out) {
    Cat c = cat_args(x, out, k, T);
    with_index(x, "x", [&](auto xp) {
        auto* op = like_index<index_t<decltype(xp)>>(out, "out");
        py::gil_scoped_release nogil;
        grr_t(xp, op, c.n, c.d, c.k, c.T, seed);
    });
}

void grr_fs(py::array x, py::array k, py::array T, int64_t m, uint64_t seed, py::array out) {
    Cat c = cat_args(x, out, k, T);
    if (m < 1 || m > c.d) throw std::invalid_argument("m: expected an int in [1, d]");
    with_index(x, "x", [&](auto xp) {
        auto* op = like_index<index_t<decltype(xp)>>(out, "out");
        py::gil_scoped_release nogil;
        grr_fs_t(xp, op, c.n, c.d, c.k, c.T, m, seed);
    });
}

void check_onebit_args(double alpha, double beta, uint64_t T_lo, double span) {
    if (!(alpha < beta)) throw std::invalid_argument("alpha, beta: expected alpha < beta");
    if (T_lo < 1 || T_lo > (uint64_t(1) << 31) || !(span >= 0.0) ||
        (double)T_lo * 2.0 + span > 4294967296.0)
        throw std::invalid_argument("t_lo, span: expected 1 <= t_lo <= 2^31 and 2 t_lo + span <= 2^32");
}

void onebit(py::array x, double alpha, double beta, uint64_t T_lo, double span, uint64_t seed, py::array out) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    check_onebit_args(alpha, beta, T_lo, span);
    int8_t* op = data_ptr<int8_t>(out, "out", true);
    int64_t n = x.shape(0), d = x.shape(1);
    if (py::isinstance<carray<float>>(x)) {
        const float* xp = cdata_ptr<float>(x, "x");
        py::gil_scoped_release nogil;
        onebit_t(xp, op, n, d, alpha, beta, T_lo, span, seed);
    } else {
        const double* xp = cdata_ptr<double>(x, "x");
        py::gil_scoped_release nogil;
        onebit_t(xp, op, n, d, alpha, beta, T_lo, span, seed);
    }
}

void multibit_encode(py::array x, int64_t m, double alpha, double beta, uint64_t T_lo, double span, uint64_t seed,
                     py::array out) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    check_onebit_args(alpha, beta, T_lo, span);
    int64_t n = x.shape(0), d = x.shape(1);
    if (m < 1 || m > d) throw std::invalid_argument("m: expected an int in [1, d]");
    int8_t* op = data_ptr<int8_t>(out, "out", true);
    if (py::isinstance<carray<float>>(x)) {
        const float* xp = cdata_ptr<float>(x, "x");
        py::gil_scoped_release nogil;
        multibit_t(xp, op, n, d, m, alpha, beta, T_lo, span, seed);
    } else {
        const double* xp = cdata_ptr<double>(x, "x");
        py::gil_scoped_release nogil;
        multibit_t(xp, op, n, d, m, alpha, beta, T_lo, span, seed);
    }
}

void rr_labels(py::array y, py::array mask, int64_t c, uint64_t T, uint64_t seed, py::array out) {
    if (y.ndim() != 1) throw std::invalid_argument("y: expected a 1-D array");
    check_same_shape(y, out, "y", "out");
    int64_t n = y.shape(0);
    check_size(mask, n, "mask");
    if (c < 1 || c > (int64_t(1) << 31)) throw std::invalid_argument("num_classes: expected an int in [1, 2^31]");
    if (T > (uint64_t(1) << 32)) throw std::invalid_argument("threshold: must be <= 2^32");
    const bool* mp = cdata_ptr<bool>(mask, "mask");
    with_index(y, "y", [&](auto yp) {
        auto* op = like_index<index_t<decltype(yp)>>(out, "out");
        py::gil_scoped_release nogil;
        rr_labels_t(yp, mp, op, n, (uint64_t)c, T, seed);
    });
}

int64_t check_categorical(py::array x, py::array k) {
    check_2d(x, "x");
    int64_t n = x.shape(0), d = x.shape(1);
    check_size(k, d, "k");
    const int64_t* kp = cdata_ptr<int64_t>(k, "k");
    return with_index(x, "x", [&](auto xp) {
        py::gil_scoped_release nogil;
        return check_categorical_t(xp, n, d, kp);
    });
}

int64_t check_range(py::array x, double alpha, double beta) {
    int64_t N = x.size();
    if (py::isinstance<carray<float>>(x)) {
        const float* xp = cdata_ptr<float>(x, "x");
        py::gil_scoped_release nogil;
        return check_range_t(xp, N, alpha, beta);
    }
    const double* xp = cdata_ptr<double>(x, "x");
    py::gil_scoped_release nogil;
    return check_range_t(xp, N, alpha, beta);
}

}  // namespace

void register_features(py::module_& m) {
    m.def("grr", &grr, "GRR on every entry of an (n, d) int32/int64 matrix, in place into out",
          py::arg("x"), py::arg("k"), py::arg("thresholds"), py::arg("seed"), py::arg("out"));
    m.def("grr_fs", &grr_fs, "GRR-FS (RGNN eq. 4): m of d columns GRR, the rest uniform",
          py::arg("x"), py::arg("k"), py::arg("thresholds"), py::arg("m"), py::arg("seed"), py::arg("out"));
    m.def("onebit", &onebit, "1-bit mechanism on every entry of a float32/float64 matrix -> int8 {-1, 1}",
          py::arg("x"), py::arg("alpha"), py::arg("beta"), py::arg("t_lo"), py::arg("span"), py::arg("seed"),
          py::arg("out"));
    m.def("multibit_encode", &multibit_encode, "LPGNN multi-bit encoder (Algorithm 1) -> int8 {-1, 0, 1}",
          py::arg("x"), py::arg("m"), py::arg("alpha"), py::arg("beta"), py::arg("t_lo"), py::arg("span"),
          py::arg("seed"), py::arg("out"));
    m.def("rr_labels", &rr_labels, "Randomized response on labels where mask is true (LPGNN eq. 11)",
          py::arg("y"), py::arg("mask"), py::arg("num_classes"), py::arg("threshold"), py::arg("seed"),
          py::arg("out"));
    m.def("check_categorical", &check_categorical, "First flat index with x outside [0, k[col]) or -1",
          py::arg("x"), py::arg("k"));
    m.def("check_range", &check_range, "First flat index with x NaN or outside [alpha, beta] or -1",
          py::arg("x"), py::arg("alpha"), py::arg("beta"));
}

}  // namespace ldp
