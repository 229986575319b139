// Samplers on top of Philox, addressed by (seed, stream, row, col).  Each has a twin in
// ldpfast/_numba/rng.py and ldpfast/rng.py that consumes the same 32-bit words in the
// same order, so CPU, CUDA and Numba kernels give bit-identical outputs for one seed.
//
// Word order: a cell's stream of 32-bit words is philox(counter with draw=0) v[0..3],
// then draw=1 v[0..3], ...  next_u64 = (w0 << 32) | w1.
//
// Exactness: bernoulli(p) has P[true] = p exactly for the double p, and geometric(p) has the
// law of Geometric(p) up to a relative error < 2^-49 on every factor of its probabilities
// (see geom_draw): no outcome of either has probability 0 that should be positive, which a
// plain 53-bit uniform cannot give (it never resolves probabilities below 2^-53, audit F5).
#pragma once
#include "detmath.h"
#include "philox.h"

namespace ldp {

// Bernoulli(q) with P[true] = q exactly for a double q in [0, 1]: the uniform's binary
// expansion is compared with q's, 32 bits (one word) at a time; q's digits come from exact
// scalings by 2^32, and a double has finitely many, so the loop ends.  Consumes no word
// when q <= 0 (then U >= q surely).
template <class G>
LDP_HD bool bernoulli_words(G& g, double q) {
    for (;;) {
        if (!(q > 0.0)) return false;
        if (q >= 1.0) q = 1.0;
        double Q = q * 4294967296.0;  // <= 2^32
        uint64_t K = (uint64_t)Q;
        uint64_t w = g.next_u32();
        if (w != K) return w < K;
        q = Q - (double)K;  // exact: the next 32 digits of q
    }
}

// bernoulli_words(g, q) for many draws of one q in (0, 1]: the first digit K = floor(2^32 q)
// taken once (the first word decides unless it ties with K; q = 1 gives K = 2^32, never tied).
struct BernoulliWords {
    double Q;
    uint64_t K;
    LDP_HD explicit BernoulliWords(double q) : Q((q >= 1.0 ? 1.0 : q) * 4294967296.0), K((uint64_t)Q) {}
    template <class G>
    LDP_HD bool operator()(G& g) const {
        const uint64_t w = g.next_u32();
        return w != K ? w < K : bernoulli_words(g, Q - (double)K);
    }
};

// Bernoulli(p), P[true] = p exactly (p a double; <= 0 never, >= 1 always), for CellRng::
// bernoulli.  Same words and same answer as uniform() < p except when the 53 bits tie with
// p's (probability 2^-53), which bernoulli_words settles from further words; uniform() < p
// alone is never true for p < 2^-54 and off by up to 2^-54 absolute otherwise.
template <class G>
LDP_HD bool bernoulli_u53(G& g, double p) {
    uint64_t k = g.next_u64() >> 11;
    if (!(p < 1.0)) return p >= 1.0;
    if (!(p > 0.0)) return false;
    double P = p * 9007199254740992.0;  // exact, < 2^53
    uint64_t K = (uint64_t)P;
    if (k != K) return k < K;
    return bernoulli_words(g, P - (double)K);
}

// Geometric(p) (failures before the first success, on {0, 1, ...}), capped at 2^62.
// Memorylessness splits G = 2^B H + R with H, R independent:
//   H ~ Geometric(stop), stop = 1 - (1 - p)^(2^B): whole blocks of 2^B trials without success,
//       counted by exact Bernoulli(stop) trials;
//   R in [0, 2^B) with P[R = x] proportional to (1 - p)^x: x uniform on B bits, accepted with
//       exact Bernoulli(exp(-lam x)), lam = -log(1 - p).
// B is the smallest with lam 2^B >= ln2 / 2 (so stop in [0.29, 0.5] and the acceptance rate
// >= 0.72); B = 0 (p >= 0.293) leaves H alone with stop = p, which is then exact.  The only
// inexactness is the double evaluation of stop and exp(-lam x) (det_log1p, det_exp_neg,
// det_neg_expm1: relative error < 2^-50 each, 2^-49 after propagating lam's), so every ratio
// of gap probabilities the skip samplers' privacy analysis uses (P(g1) P(g2) / P(g1 + g2 + 1),
// P(g + 1) / P(g), tails) is within a factor e^(+-2^-46) of the exact geometric's, for every
// p and every g: no truncation, no hole.  A plain floor(log U / log(1 - p)) with a 53-bit U
// (the sampler before audit F5) gives every gap a multiple of 2^-53: it never exceeds
// log(2^-54) / log(1 - p), and below that most gaps of probability < 2^-53 (total mass about
// 2^-53 / p) get probability 0, so it was only (eps, ~2^-53 / p)-private.
//
// Draw order (twins: _numba/rng.py geom_draw, rng.py CellRng.geometric): H first, from
// 32-bit words, byte i (low first) deciding trial i of the word against K = floor(256 stop):
// byte < K success, byte > K failure, byte == K a tie settled by bernoulli_words(256 stop - K)
// from the following words, after which a failed trial continues with a fresh word.  Then R:
// each attempt takes x and an 8-bit v from one word (B <= 24), one 64-bit draw (B <= 56, v its
// top byte) or a 64-bit draw plus the top byte of one more word, and compares v with
// floor(256 a), a = det_exp_neg(lam x), a tie again settled by bernoulli_words.
constexpr int64_t GEO_CAP = 4611686018427387904ll;  // 2^62

struct GeomParams {
    int kind;     // 0: p >= 1 (always 0), 1: p <= 0 or NaN (always GEO_CAP), 2: sample
    int B;        // block bits
    double lam;   // -log(1 - p)
    double stop;  // P[H = 0]
    // Squeeze (speed only, never the output): for x in bucket j = x >> shift,
    // klo[j] <= floor(256 det_exp_neg(lam x)) <= khi[j] (clamped to 255).
    int shift;
    // 16 bytes each, byte j for bucket j, packed in two words (read with constant indices
    // only: a byte array indexed by j would put GeomParams in CUDA local memory).
    // A host reads byte j directly (one load; the words are little endian there, as everywhere
    // ldpfast builds): the same byte as the device's shift and mask.
    uint64_t klo_w[2], khi_w[2];
#if !defined(__CUDA_ARCH__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GeomParams reads its packed bytes directly on the host: little-endian hosts only"
#endif
#if defined(__CUDA_ARCH__)
    LDP_HD unsigned klo(int j) const { return (unsigned)(((j < 8 ? klo_w[0] : klo_w[1]) >> (8 * (j & 7))) & 0xFFu); }
    LDP_HD unsigned khi(int j) const { return (unsigned)(((j < 8 ? khi_w[0] : khi_w[1]) >> (8 * (j & 7))) & 0xFFu); }
#else
    LDP_HD unsigned klo(int j) const { return ((const unsigned char*)klo_w)[j]; }
    LDP_HD unsigned khi(int j) const { return ((const unsigned char*)khi_w)[j]; }
#endif
};

LDP_HD GeomParams geom_params(double p) {
    GeomParams P;
    P.B = 0;
    P.shift = 0;
    P.lam = 0.0;
    P.stop = 1.0;
    if (p >= 1.0) {
        P.kind = 0;
        return P;
    }
    if (!(p > 0.0)) {
        P.kind = 1;
        return P;
    }
    P.kind = 2;
    P.lam = p < 8.673617379884035e-19 ? p : -det_log1p(-p);  // p < 2^-60: -log(1-p) = p to 2^-61
    double t = P.lam;
    while (t < 0.34657359027997264 && P.B < 62) {  // ln2 / 2; doubling is exact
        t = t * 2.0;
        ++P.B;
    }
    P.stop = P.B == 0 ? p : det_neg_expm1(t);
    // Bucket j holds x in [j 2^shift, (j + 1) 2^shift), where exp(-lam x) lies in
    // [e1^(j+1), e1^j], e1 = exp(-lam 2^shift).  The powers carry <= 16 roundings and
    // det_exp_neg(lam x) is within 2^-50 of exp(-lam x), all far inside the 2^-44 margin.
    P.shift = P.B > 4 ? P.B - 4 : 0;
    const double e1 = det_exp_neg(P.lam * (double)((uint64_t)1 << P.shift));
    double a = 1.0;
    P.klo_w[0] = P.klo_w[1] = P.khi_w[0] = P.khi_w[1] = 0;
    for (int j = 0; j < 16; ++j) {
        const double hi = a + 5.684341886080802e-14, lo = a * e1 - 5.684341886080802e-14;  // 2^-44
        const double khi = hi * 256.0, klo = lo * 256.0;
        const uint64_t bh = khi >= 255.0 ? 255u : (unsigned)khi;
        const uint64_t bl = klo > 0.0 ? (klo >= 255.0 ? 255u : (unsigned)klo) : 0u;
        if (j < 8) {
            P.khi_w[0] |= bh << (8 * j);
            P.klo_w[0] |= bl << (8 * j);
        } else {
            P.khi_w[1] |= bh << (8 * (j - 8));
            P.klo_w[1] |= bl << (8 * (j - 8));
        }
        a = a * e1;
    }
    return P;
}

template <class G>
LDP_HD int64_t geom_draw(G& g, const GeomParams& P) {
    if (P.kind == 0) return 0;
    if (P.kind == 1) return GEO_CAP;
    const int B = P.B;
    const int64_t hmax = (int64_t)1 << (62 - B);  // H >= hmax means G >= 2^62
    const double S = P.stop * 256.0;
    const uint64_t K = (uint64_t)S;  // stop < 1: K <= 255
    // Four trials per word, decided without a branch per trial: in 16-bit lanes, bit 15 of
    // byte + 0x8000 - (K + 1) is set iff byte > K (failure).
    const uint64_t LANES = 0x8000800080008000ull;
    const uint64_t ADD = (0x8000ull - (K + 1)) * 0x0001000100010001ull;
    int64_t h = 0;
    for (;;) {
        uint64_t w = g.next_u32();
        uint64_t sp = (w & 0xFFull) | ((w & 0xFF00ull) << 8) | ((w & 0xFF0000ull) << 16) | ((w & 0xFF000000ull) << 24);
        uint64_t stopm = ~(sp + ADD) & LANES;  // lanes with byte <= K
        if (stopm == 0) {
            h += 4;
            if (h >= hmax) return GEO_CAP;
            continue;
        }
        // First stopping lane: its flag is bit 15 + 16 i, so i = ctz / 16 (one instruction, no chain).
#ifdef __CUDA_ARCH__
        int i = (__ffsll((long long)stopm) - 1) >> 4;
#else
        int i = __builtin_ctzll(stopm) >> 4;
#endif
        h += i;
        if (h >= hmax) return GEO_CAP;
        if (((w >> (8 * i)) & 0xFFu) < K) break;
        if (bernoulli_words(g, S - (double)K)) break;  // tie
        if (++h >= hmax) return GEO_CAP;
    }
    if (B == 0) return h;
    const uint64_t mask = ((uint64_t)1 << B) - 1;
    for (;;) {
        uint64_t x, v;
        if (B <= 24) {
            uint64_t w = g.next_u32();
            x = w & mask;
            v = w >> 24;
        } else {
            uint64_t w = g.next_u64();
            x = w & mask;
            v = B <= 56 ? w >> 56 : (uint64_t)(g.next_u32() >> 24);
        }
        const int j = (int)(x >> P.shift);  // < 16
        bool acc;
        if (v < P.klo(j)) {
            acc = true;
        } else if (v > P.khi(j)) {
            acc = false;
        } else {
            const double A = det_exp_neg(P.lam * (double)x) * 256.0;  // lam x in [0, ln2)
            const uint64_t Ka = (uint64_t)A;
            acc = v != Ka ? v < Ka : bernoulli_words(g, A - (double)Ka);
        }
        if (acc) return (h << B) | (int64_t)x;
    }
}

// Named streams: one per mechanism/purpose, so two mechanisms run with one seed never
// reuse randomness.  Keep in sync with ldpfast/rng.py::Stream.
enum Stream : uint32_t {
    STREAM_TEST = 0,
    STREAM_GRR = 1,
    STREAM_GRR_FS_SELECT = 2,
    STREAM_ONEBIT = 3,
    STREAM_MULTIBIT_SELECT = 4,
    STREAM_LABEL_RR = 5,
    STREAM_DPRR_DEGREE = 6,
    STREAM_DPRR_TRUE = 7,
    STREAM_DPRR_FALSE = 8,
    STREAM_RR_EDGES = 9,
    STREAM_LOCALLAP = 10,
    STREAM_SYNTH_CLASS = 11,
    STREAM_SYNTH_DEGREE = 12,
    STREAM_SYNTH_EDGES = 13,
    STREAM_SYNTH_FEATURES = 14,
    STREAM_SYNTH_TRIM = 15,
    STREAM_HETER_CENTRAL = 16,
    STREAM_HETER_PERIPHERAL = 17,
    STREAM_HETER_INFERENCE = 18,
};

struct CellRng {
    // Blocks per refill after a cell's first: on a CPU two at once (philox4x32_10_blocks), so
    // the round chains of the two overlap inside the samplers' branchy loops (DPRR sampler:
    // 6-10% less CPU; the discrete Laplace fill about 11%; GRR-FS and the multi-bit encoder
    // unchanged).  The first refill makes one block, so a cell that needs <= 4 words costs what
    // it did.  CUDA builds make one at a time (registers).  Same words either way, so every
    // output is unchanged.
#if defined(__CUDACC__)  // nvcc or NVRTC (host and device passes alike: one layout)
    static constexpr int RNG_BATCH = 1;
#else
    static constexpr int RNG_BATCH = 2;
#endif
    uint32_t k0, k1, c1, c2, c3;
    uint32_t draw;  // counter of the next block to make
    int pos, len;   // next word of buf, words in buf
    uint32_t buf[4 * RNG_BATCH];

    LDP_HD CellRng(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col)
        : k0((uint32_t)seed), k1((uint32_t)(seed >> 32)), c1(col), c2((uint32_t)row),
          c3((uint32_t)((row >> 32) & 0xffffu) | (stream << 16)), draw(0), pos(0), len(0) {}

    LDP_HD void refill() {
        if (RNG_BATCH > 1 && draw != 0) {
            philox4x32_10_blocks<RNG_BATCH>(draw, c1, c2, c3, k0, k1, buf);
            draw += RNG_BATCH;
            len = 4 * RNG_BATCH;
        } else {
            u32x4 c = {{draw, c1, c2, c3}};
            u32x4 o = philox4x32_10(c, k0, k1);
            buf[0] = o.v[0];
            buf[1] = o.v[1];
            buf[2] = o.v[2];
            buf[3] = o.v[3];
            ++draw;
            len = 4;
        }
        pos = 0;
    }

    // Philox block d of this cell (words 4 d .. 4 d + 3): what a warp's lanes make side by side.
    LDP_HD u32x4 block(uint32_t d) const {
        u32x4 c = {{d, c1, c2, c3}};
        return philox4x32_10(c, k0, k1);
    }

    // Index of the next word this generator hands out (words of earlier blocks + pos).
    LDP_HD uint64_t word() const { return (uint64_t)draw * 4u - (uint64_t)len + (uint64_t)pos; }

    // Jump to word w of the cell's stream (the words a fresh generator would hand out after
    // reading w of them): a lane resuming a draw that a warp started elsewhere.
    LDP_HD void seek(uint64_t w) {
        draw = (uint32_t)(w >> 2);
        refill();
        pos = (int)(w & 3u);
    }

    LDP_HD uint32_t next_u32() {
        if (pos == len) refill();
        const int p = pos++;
        // CUDA: constant indices only, so buf stays in registers (a dynamic index puts the whole
        // generator in local memory: the mechanisms' 64-112-byte stack frames, L1-bound).
        if (RNG_BATCH == 1) return p == 0 ? buf[0] : p == 1 ? buf[1] : p == 2 ? buf[2] : buf[3];
        return buf[p];
    }

    LDP_HD uint64_t next_u64() {
        uint64_t hi = next_u32();
        uint64_t lo = next_u32();
        return (hi << 32) | lo;
    }

    // Uniform on the open interval (0, 1): (k + 0.5) / 2^53, k uniform on 53 bits.
    LDP_HD double uniform() { return ((double)(next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

    // Bernoulli(p), P[true] = p exactly: see bernoulli_u53.
    LDP_HD bool bernoulli(double p) { return bernoulli_u53(*this, p); }

    // Uniform integer in [0, k), k >= 1, by masking and rejection: no modulo bias.
    // One 32-bit word per try when k <= 2^32, else two.
    LDP_HD uint64_t randint(uint64_t k) {
        uint64_t m = k - 1;
        m |= m >> 1; m |= m >> 2; m |= m >> 4; m |= m >> 8; m |= m >> 16; m |= m >> 32;
        if (k <= 0x100000000ull) {
            for (;;) {
                uint64_t x = (uint64_t)next_u32() & m;
                if (x < k) return x;
            }
        }
        for (;;) {
            uint64_t x = next_u64() & m;
            if (x < k) return x;
        }
    }

    // Number of failures before the first success of Bernoulli(p) trials, capped at 2^62
    // (p >= 1: 0, p <= 0: the cap).  See geom_draw.  Used to skip over non-edges.
    LDP_HD int64_t geometric(double p) {
        GeomParams P = geom_params(p);
        return geom_draw(*this, P);
    }

    // Binomial(n, p) by counting geometric jumps: expected O(n * min(p, 1 - p) + 1) work.
    LDP_HD int64_t binomial(int64_t n, double p) {
        if (n <= 0 || p <= 0.0) return 0;
        if (p >= 1.0) return n;
        bool flip = p > 0.5;
        double q = flip ? 1.0 - p : p;
        GeomParams P = geom_params(q);
        int64_t count = 0, pos = -1;
        for (;;) {
            int64_t g = geom_draw(*this, P);
            if (g >= n - 1 - pos) break;
            pos += g + 1;
            ++count;
        }
        return flip ? n - count : count;
    }

    // Bernoulli(num / den) exactly, 0 <= num <= den, den >= 1.
    LDP_HD bool bernoulli_rational(uint64_t num, uint64_t den) { return randint(den) < num; }

    // Bernoulli(exp(-num/den)) exactly for num <= den (Canonne, Kamath, Steinke 2020, Alg. 1).
    // The inner Bernoulli(gamma / K) is drawn as Bernoulli(gamma) AND Bernoulli(1/K), which
    // has the same law and never overflows den * K.
    LDP_HD bool bernoulli_exp_neg(uint64_t num, uint64_t den) {
        uint64_t K = 1;
        for (;;) {
            bool a = bernoulli_rational(num, den) && randint(K) == 0;
            if (!a) break;
            ++K;
        }
        return (K & 1u) == 1u;
    }

    // Discrete Laplace with scale t/s: P[Y = y] proportional to exp(-|y| * s / t), t, s >= 1
    // integers (Canonne, Kamath, Steinke 2020, Alg. 2).  X = U + t*V is geometric with
    // P[X = x] ~ exp(-x / t), and Y = floor(X / s).  Callers keep t * V far from 2^64
    // (t <= 2^52, so overflow needs V >= 2^11, probability e^-2048).  Exact: integer arithmetic only, so it has
    // none of the floating-point weaknesses of inverse-CDF Laplace (Mironov 2012).
    LDP_HD int64_t discrete_laplace(uint64_t t, uint64_t s) {
        for (;;) {
            uint64_t u = randint(t);
            if (!bernoulli_exp_neg(u, t)) continue;
            uint64_t v = 0;
            while (bernoulli_exp_neg(1, 1)) ++v;
            uint64_t x = u + t * v;
            int64_t y = (int64_t)(x / s);
            bool neg = (next_u32() & 1u) != 0;
            if (neg && y == 0) continue;
            return neg ? -y : y;
        }
    }
};

}  // namespace ldp
