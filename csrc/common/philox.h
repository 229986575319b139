// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// usable from host C++, nvcc and NVRTC.  Checked against the Random123 known-answer
// vectors in tests/test_rng.py (C++, Numba and NumPy twins all run the same vectors).
//
// Addressing contract (shared with ldpfast/_numba/rng.py and ldpfast/rng.py):
//   key     = (seed & 0xffffffff, seed >> 32)
//   counter = (draw, col, row & 0xffffffff, ((row >> 32) & 0xffff) | (stream << 16))
// so every random quantity is named by (seed, stream, row, col) and a per-cell draw
// index.  Output therefore never depends on thread count, scheduling or backend.
#pragma once

#if defined(__CUDACC_RTC__)
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
typedef int int32_t;
#define LDP_HD __host__ __device__ __forceinline__
#elif defined(__CUDACC__)
#include <cstdint>
#define LDP_HD __host__ __device__ __forceinline__
#else
#include <cstdint>
#define LDP_HD inline
#endif

namespace ldp {

struct u32x4 {
    uint32_t v[4];
};

// v[t] through constant indices only (t in [0, 4)): a dynamic index into a u32x4 puts it in
// CUDA local memory.
LDP_HD uint32_t pick4(const u32x4& w, int t) { return t == 0 ? w.v[0] : t == 1 ? w.v[1] : t == 2 ? w.v[2] : w.v[3]; }

LDP_HD void mulhilo32(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    hi = (uint32_t)(p >> 32);
    lo = (uint32_t)p;
}

// One Philox4x32 round on the counter (a, b, c, d) with round key (k0, k1); the key is bumped
// by the Weyl constants (PHILOX_W0, PHILOX_W1) between rounds.
constexpr uint32_t PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u;
LDP_HD void philox_round(uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d, uint32_t k0, uint32_t k1) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo32(0xD2511F53u, a, hi0, lo0);
    mulhilo32(0xCD9E8D57u, c, hi1, lo1);
    a = hi1 ^ b ^ k0;
    b = lo1;
    c = hi0 ^ d ^ k1;
    d = lo0;
}

// One Philox4x32 bijection with 10 rounds.
LDP_HD u32x4 philox4x32_10(u32x4 c, uint32_t k0, uint32_t k1) {
#if defined(__CUDACC__)
#pragma unroll
#endif
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        philox_round(c.v[0], c.v[1], c.v[2], c.v[3], k0, k1);
    }
    return c;
}

// Blocks (draw + l, c1, c2, c3), l < N, of one key into out[4 l .. 4 l + 3]: the words of N
// calls of philox4x32_10, with the N chains of 10 dependent multiply rounds in lockstep so
// that a CPU overlaps them (N = 2 fits the general registers; 3 and 4 spill and were slower).
template <int N>
LDP_HD void philox4x32_10_blocks(uint32_t draw, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                                 uint32_t* out) {
    uint32_t a[N], b[N], c[N], d[N];
    for (int l = 0; l < N; ++l) {
        a[l] = draw + (uint32_t)l;  // wraps as N successive increments of the counter would
        b[l] = c1;
        c[l] = c2;
        d[l] = c3;
    }
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        for (int l = 0; l < N; ++l) philox_round(a[l], b[l], c[l], d[l], k0, k1);
    }
    for (int l = 0; l < N; ++l) {
        out[4 * l] = a[l];
        out[4 * l + 1] = b[l];
        out[4 * l + 2] = c[l];
        out[4 * l + 3] = d[l];
    }
}

}  // namespace ldp
