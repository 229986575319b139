// Keyed fingerprint of a byte string (a tensor's memory), the identity behind ReportOnce's
// per-input seeds (ldpfast/privacy/report_once.py).  One body for the C++ launcher
// (csrc/cpu/fingerprint.cpp), the CUDA launcher (csrc/cuda/fingerprint.cu) and, line for line,
// the Numba twin (ldpfast/_numba/fingerprint.py); tests/test_fingerprint.py checks all of them
// against a slow pure-Python reference.
//
// Construction (UMAC-style: a universal hash per block, a PRF over the block results).
//   Words m_j: little-endian uint32 of bytes 4j..4j+3, zero past nbytes.
//   Blocks of BLOCK_WORDS = 64 words (256 bytes); block b holds words 64b..64b+63 (zero
//   past the end); nb = ceil(nbytes / 256) blocks.
//   Three 64-bit keys per tensor (k_nh, k_pad, k_prf), derived by the caller with SHA-256 from
//   the transform's secret and the tensor's name, dtype and shape (so the length is fixed by
//   the key and zero padding is unambiguous).
//   NH keys: K[w], w < 2 * 64: word w % 4 of Philox_{k_nh}(w / 4, 0, 0, 0).
//   NH (Black et al., UMAC, CRYPTO'99), two lanes l with independent key halves:
//     Y_l(b) = sum_{i < 32} (m_{64b+2i} + K[64l+2i] mod 2^32) (m_{64b+2i+1} + K[64l+2i+1] mod 2^32)
//              mod 2^64
//     which is 2^-32-almost-universal per lane for equal-length blocks: 2^-64 for the pair.
//   Pad P(b) = Philox_{k_pad}(b_lo, b_hi, 0, 0) binds the block's position;
//   R(b) = Philox_{k_prf}(Y_0(b) ^ (P0, P1), Y_1(b) ^ (P2, P3)) as (lo32, hi32, lo32, hi32).
//   Result (S0, S1) = (sum_b R0 | R1 << 32, sum_b R2 | R3 << 32), each mod 2^64.
// Two inputs of the same length that differ in a block get different NH values except with
// probability 2^-64, and then (Philox as a PRF under an unknown key) independent R terms, so
// the 128-bit sums differ except with probability about 2^-64 for inputs chosen without the
// key.  Integer sums mod 2^64 are order-free: the result does not depend on the thread count,
// the reduction order or the device.
#pragma once
#include "philox.h"

#if defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
#endif

namespace ldp {
namespace fp {

constexpr int64_t BLOCK_WORDS = 64;
constexpr int64_t BLOCK_BYTES = 4 * BLOCK_WORDS;
constexpr int KEY_WORDS = 2 * BLOCK_WORDS;  // two NH lanes

LDP_HD u32x4 philox_key64(u32x4 c, uint64_t key) {
    return philox4x32_10(c, (uint32_t)key, (uint32_t)(key >> 32));
}

// NH key words 4q .. 4q+3 (q < KEY_WORDS / 4) into K.
LDP_HD void nh_key_block(uint64_t k_nh, int q, uint32_t* K) {
    const u32x4 r = philox_key64(u32x4{{(uint32_t)q, 0u, 0u, 0u}}, k_nh);
    for (int j = 0; j < 4; ++j) K[4 * q + j] = r.v[j];
}

// Word j of the byte string, zero past nbytes (for the last, partial words).
LDP_HD uint32_t word_tail(const uint8_t* p, int64_t nbytes, int64_t j) {
    uint32_t w = 0;
    for (int t = 0; t < 4; ++t) {
        const int64_t i = 4 * j + t;
        if (i < nbytes) w |= (uint32_t)p[i] << (8 * t);
    }
    return w;
}

// NH terms of the word pair (m0, m1) at even offset i of a block, both lanes.
LDP_HD void nh_pair(uint32_t m0, uint32_t m1, const uint32_t* K, int i, uint64_t& y0, uint64_t& y1) {
    y0 += (uint64_t)(uint32_t)(m0 + K[i]) * (uint64_t)(uint32_t)(m1 + K[i + 1]);
    y1 += (uint64_t)(uint32_t)(m0 + K[BLOCK_WORDS + i]) * (uint64_t)(uint32_t)(m1 + K[BLOCK_WORDS + i + 1]);
}

// NH of one whole block of words m[0 .. BLOCK_WORDS).
LDP_HD void nh_block(const uint32_t* m, const uint32_t* K, uint64_t& y0, uint64_t& y1) {
    y0 = 0;
    y1 = 0;
    for (int i = 0; i < BLOCK_WORDS; i += 2) nh_pair(m[i], m[i + 1], K, i, y0, y1);
}

// The pad P(b) of block b (the same for every string of one key: a launcher may make them once).
LDP_HD u32x4 block_pad(uint64_t b, uint64_t k_pad) {
    return philox_key64(u32x4{{(uint32_t)b, (uint32_t)(b >> 32), 0u, 0u}}, k_pad);
}

// The PRF input of a block with NH values (y0, y1) and pad P: (Y_0 ^ (P0, P1), Y_1 ^ (P2, P3)).
LDP_HD u32x4 prf_input(uint64_t y0, uint64_t y1, const u32x4& P) {
    return u32x4{{(uint32_t)y0 ^ P.v[0], (uint32_t)(y0 >> 32) ^ P.v[1], (uint32_t)y1 ^ P.v[2],
                  (uint32_t)(y1 >> 32) ^ P.v[3]}};
}

// Adds a block's PRF output R to the sums (s0, s1).
LDP_HD void add_term(const u32x4& R, uint64_t& s0, uint64_t& s1) {
    s0 += (uint64_t)R.v[0] | ((uint64_t)R.v[1] << 32);
    s1 += (uint64_t)R.v[2] | ((uint64_t)R.v[3] << 32);
}

// The PRF term of block b with NH values (y0, y1): adds it to (s0, s1).
LDP_HD void block_term(uint64_t y0, uint64_t y1, uint64_t b, uint64_t k_pad, uint64_t k_prf, uint64_t& s0,
                       uint64_t& s1) {
    add_term(philox_key64(prf_input(y0, y1, block_pad(b, k_pad)), k_prf), s0, s1);
}

// The last block of a string whose length is not a multiple of BLOCK_BYTES (or any block,
// slowly): words read one by one, zero past nbytes.
LDP_HD void nh_block_tail(const uint8_t* p, int64_t nbytes, int64_t b, const uint32_t* K, uint64_t& y0,
                          uint64_t& y1) {
    y0 = 0;
    y1 = 0;
    for (int i = 0; i < BLOCK_WORDS; i += 2)
        nh_pair(word_tail(p, nbytes, b * BLOCK_WORDS + i), word_tail(p, nbytes, b * BLOCK_WORDS + i + 1), K, i,
                y0, y1);
}

#if defined(__CUDACC__) || defined(LDP_CUDA_EMULATION)  // (tests/cuda_emu.h runs it on the host)
// The fingerprint sums (S0, S1) of the groups g0, g0 + gstep, ... of 32 blocks of a string (nb
// blocks), computed by one warp and returned in every lane.  Per block, lane l loads word pair
// 2l, 2l+1 (the warp reads the block at once: coalesced) and the NH sums are added across the
// warp; lane t keeps block g*32+t's and computes its PRF term, so the Philox calls run on all
// lanes.  Words below nwfull are read whole from w (4-byte aligned), the others byte by byte.
// Shared by the CUDA launchers fingerprint.cu (a grid of warps over one string) and
// userkey.cu (a warp per row).
__device__ __forceinline__ void warp_digest(const uint8_t* p, int64_t nbytes, const uint32_t* w, int64_t nwfull,
                                            int64_t g0, int64_t gstep, int64_t nb, const uint32_t* K,
                                            uint64_t k_pad, uint64_t k_prf, int lane, uint64_t& s0, uint64_t& s1) {
    s0 = 0;
    s1 = 0;
    for (int64_t g = g0; g * 32 < nb; g += gstep) {  // warp-uniform loop
        uint64_t my0 = 0, my1 = 0;
        for (int t = 0; t < 32 && g * 32 + t < nb; ++t) {
            const int64_t j = (g * 32 + t) * BLOCK_WORDS + 2 * lane;
            const uint32_t m0 = j < nwfull ? w[j] : word_tail(p, nbytes, j);
            const uint32_t m1 = j + 1 < nwfull ? w[j + 1] : word_tail(p, nbytes, j + 1);
            uint64_t y0 = 0, y1 = 0;
            nh_pair(m0, m1, K, 2 * lane, y0, y1);
            for (int o = 16; o > 0; o >>= 1) {
                y0 += __shfl_xor_sync(0xffffffffu, y0, o);
                y1 += __shfl_xor_sync(0xffffffffu, y1, o);
            }
            if (lane == t) {
                my0 = y0;
                my1 = y1;
            }
        }
        const int64_t b = g * 32 + lane;
        if (b < nb) block_term(my0, my1, (uint64_t)b, k_pad, k_prf, s0, s1);
    }
    for (int o = 16; o > 0; o >>= 1) {
        s0 += __shfl_xor_sync(0xffffffffu, s0, o);
        s1 += __shfl_xor_sync(0xffffffffu, s1, o);
    }
}
#endif

}  // namespace fp
}  // namespace ldp
