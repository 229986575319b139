// Samplers on top of Philox, addressed by (seed, stream, row, col).  Each has a twin in
// ldpfast/_numba/rng.py and ldpfast/rng.py that consumes the same 32-bit words in the
// same order, so CPU, CUDA and Numba kernels give bit-identical outputs for one seed.
//
// Word order: a cell's stream of 32-bit words is philox(counter with draw=0) v[0..3],
// then draw=1 v[0..3], ...  next_u64 = (w0 << 32) | w1.
#pragma once
#include "detmath.h"
#include "philox.h"

namespace ldp {

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
    uint32_t k0, k1, c1, c2, c3;
    uint32_t draw;
    uint32_t buf[4];
    int pos;

    LDP_HD CellRng(uint64_t seed, uint32_t stream, uint64_t row, uint32_t col)
        : k0((uint32_t)seed), k1((uint32_t)(seed >> 32)), c1(col), c2((uint32_t)row),
          c3((uint32_t)((row >> 32) & 0xffffu) | (stream << 16)), draw(0), pos(4) {}

    LDP_HD uint32_t next_u32() {
        if (pos == 4) {
            u32x4 c = {{draw, c1, c2, c3}};
            u32x4 o = philox4x32_10(c, k0, k1);
            buf[0] = o.v[0];
            buf[1] = o.v[1];
            buf[2] = o.v[2];
            buf[3] = o.v[3];
            ++draw;
            pos = 0;
        }
        return buf[pos++];
    }

    LDP_HD uint64_t next_u64() {
        uint64_t hi = next_u32();
        uint64_t lo = next_u32();
        return (hi << 32) | lo;
    }

    // Uniform on the open interval (0, 1): (k + 0.5) / 2^53, k uniform on 53 bits.
    LDP_HD double uniform() { return ((double)(next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

    // Bernoulli(p); P[true] equals p to within 2^-53.
    LDP_HD bool bernoulli(double p) { return uniform() < p; }

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

    // Number of failures before the first success of Bernoulli(p) trials, p in (0, 1]:
    // floor(log(U) / log(1 - p)), capped at 2^62.  Used to skip over non-edges.
    LDP_HD int64_t geometric(double p) {
        if (p >= 1.0) return 0;
        double g = det_log(uniform()) / det_log1p(-p);
        if (!(g < 4611686018427387904.0)) return (int64_t)4611686018427387904ll;
        return (int64_t)g;  // g >= 0, truncation == floor
    }

    // Binomial(n, p) by counting geometric jumps: expected O(n * min(p, 1 - p) + 1) work.
    LDP_HD int64_t binomial(int64_t n, double p) {
        if (n <= 0 || p <= 0.0) return 0;
        if (p >= 1.0) return n;
        bool flip = p > 0.5;
        double q = flip ? 1.0 - p : p;
        int64_t count = 0, pos = -1;
        for (;;) {
            int64_t g = geometric(q);
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
