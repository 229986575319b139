// The C++ launchers' geometry of the per-user report keys (construction: csrc/common/userkey.h).
// A mechanism derives the seeds of a block of rows as it reads them (the row digest) and then
// checks and randomises the block from cache, so its input crosses from memory once, keyed or
// not (the CUDA launchers do the same with a warp per row group).  The Philox calls of a block
// (the PRF term of every 256-byte block of every row, then every row's chain) run LANES at a time
// under one key, in structure-of-arrays form that the compiler turns into vector multiplies; each
// lane computes exactly philox4x32_10, and the digest sums are order-free (mod 2^64), so the
// seeds are the bits of uk::row_digest + uk::report_key (the userkey kernels and the Numba twin).
// The block pads P(b) are the same for every row of a launch: made once.
#pragma once
#include <cstring>
#include <vector>

#include "../common/userkey.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the row digest reads words with memcpy: little-endian hosts only (as the CUDA build)"
#endif

// derive_seeds gets an AVX-512 and an AVX2 copy besides the baseline one
// (GCC function multi-versioning, picked at load time): same arithmetic, same bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LDP_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LDP_CLONES
#endif

namespace ldp {
namespace rowkeys {

constexpr int LANES = 16;
constexpr int64_t MAX_ROWS = 256;  // rows per block at most

// LANES Philox4x32-10 bijections under one key: lane l is (a[l], b[l], c[l], d[l]), each word
// held in the low half of a 64-bit slot, so that the round's 32 x 32 -> 64-bit products are
// the vector multiply of zero-extended lanes (vpmuludq) instead of widening shuffles around a
// 64 x 64 multiply.  The round of philox_round (philox.h), word for word.
__attribute__((always_inline)) inline void philox_lanes(uint64_t* __restrict__ a, uint64_t* __restrict__ b,
                                                        uint64_t* __restrict__ c, uint64_t* __restrict__ d,
                                                        uint64_t key) {
    constexpr uint64_t LO = 0xFFFFFFFFull;
    uint64_t k0 = key & LO, k1 = key >> 32;
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 = (k0 + PHILOX_W0) & LO;
            k1 = (k1 + PHILOX_W1) & LO;
        }
        for (int l = 0; l < LANES; ++l) {
            const uint64_t p0 = (uint64_t)0xD2511F53u * (a[l] & LO), p1 = (uint64_t)0xCD9E8D57u * (c[l] & LO);
            a[l] = (p1 >> 32) ^ b[l] ^ k0;
            b[l] = p1 & LO;
            c[l] = (p0 >> 32) ^ d[l] ^ k1;
            d[l] = p0 & LO;
        }
    }
}

struct Lanes {
    alignas(64) uint64_t a[LANES], b[LANES], c[LANES], d[LANES];
    __attribute__((always_inline)) void set(int l, const u32x4& v) {
        a[l] = v.v[0];
        b[l] = v.v[1];
        c[l] = v.v[2];
        d[l] = v.v[3];
    }
    __attribute__((always_inline)) u32x4 get(int l) const {
        return u32x4{{(uint32_t)a[l], (uint32_t)b[l], (uint32_t)c[l], (uint32_t)d[l]}};
    }
};

// The seeds of one launch: given (keys.seeds_in), or derived from each row's nbytes bytes.
struct RowSeeds {
    uk::RowKeys keys;
    int64_t nbytes = 0, nb = 0;
    uint32_t K[fp::KEY_WORDS];
    std::vector<u32x4> pads;
    // NH sums of the all-zero word pairs p .. 31 of a block, both lanes: a short last block
    // (a label's 8 bytes) adds its few pairs to these instead of hashing 248 zero bytes.
    uint64_t z0[fp::BLOCK_WORDS / 2 + 1], z1[fp::BLOCK_WORDS / 2 + 1];

    RowSeeds(const uk::RowKeys& k, int64_t row_bytes) : keys(k), nbytes(row_bytes) {
        if (keys.seeds_in) return;
        nb = (nbytes + fp::BLOCK_BYTES - 1) / fp::BLOCK_BYTES;
        for (int q = 0; q < fp::KEY_WORDS / 4; ++q) fp::nh_key_block(keys.k_nh, q, K);
        z0[fp::BLOCK_WORDS / 2] = z1[fp::BLOCK_WORDS / 2] = 0;
        for (int p = fp::BLOCK_WORDS / 2 - 1; p >= 0; --p) {
            z0[p] = z0[p + 1];
            z1[p] = z1[p + 1];
            fp::nh_pair(0, 0, K, 2 * p, z0[p], z1[p]);
        }
        pads.resize((size_t)nb);
        for (int64_t b = 0; b < nb; ++b) pads[(size_t)b] = fp::block_pad((uint64_t)b, keys.k_pad);
    }
};

// The NH values of block b of the row at p (whole words by memcpy: any alignment; the last,
// partial block zero-padded, as fp::nh_block_tail reads it: its pairs past the data are zero
// pairs, whose sums S.z0, S.z1 hold; sums mod 2^64 in any order are the same).
__attribute__((always_inline)) inline void row_block_nh(const RowSeeds& S, const uint8_t* p, int64_t b,
                                                        uint64_t& y0, uint64_t& y1) {
    uint32_t m[fp::BLOCK_WORDS];
    const int64_t off = b * fp::BLOCK_BYTES, len = S.nbytes - off;
    if (len >= fp::BLOCK_BYTES) {
        std::memcpy(m, p + off, fp::BLOCK_BYTES);
        fp::nh_block(m, S.K, y0, y1);
        return;
    }
    const int pairs = (int)((len + 7) / 8);  // pairs holding data
    for (int w = 0; w < 2 * pairs; ++w) m[w] = 0;
    std::memcpy(m, p + off, (size_t)len);
    y0 = S.z0[pairs];
    y1 = S.z1[pairs];
    for (int q = 0; q < pairs; ++q) fp::nh_pair(m[2 * q], m[2 * q + 1], S.K, 2 * q, y0, y1);
}

// Seeds of rows [i0, i1) (at most MAX_ROWS) of `rows` (S.nbytes each) into seed[0 .. i1 - i0),
// also written out where S.keys asks (seeds_out, rids).
LDP_CLONES static void derive_seeds(const RowSeeds& S, const uint8_t* rows, int64_t i0, int64_t i1, uint64_t* seed) {
    const uk::RowKeys& k = S.keys;
    const int64_t R = i1 - i0;
    if (k.seeds_in) {
        for (int64_t r = 0; r < R; ++r) seed[r] = (uint64_t)k.seeds_in[i0 + r];
        return;
    }
    uint64_t s0[MAX_ROWS], s1[MAX_ROWS];
    for (int64_t r = 0; r < R; ++r) s0[r] = s1[r] = 0;
    // The PRF terms of every (row, block), LANES at a time.
    Lanes x;
    int row_of[LANES];
    int nl = 0;
    auto flush = [&](int used) {
        philox_lanes(x.a, x.b, x.c, x.d, k.k_prf);
        for (int l = 0; l < used; ++l) fp::add_term(x.get(l), s0[row_of[l]], s1[row_of[l]]);
    };
    for (int64_t r = 0; r < R; ++r) {
        const uint8_t* p = rows + (i0 + r) * S.nbytes;
        for (int64_t b = 0; b < S.nb; ++b) {
            uint64_t y0, y1;
            row_block_nh(S, p, b, y0, y1);
            x.set(nl, fp::prf_input(y0, y1, S.pads[(size_t)b]));
            row_of[nl] = (int)r;
            if (++nl == LANES) {
                flush(LANES);
                nl = 0;
            }
        }
    }
    if (nl) flush(nl);  // the unused lanes hold earlier inputs: computed, never read
    // The chains, LANES rows at a time.
    for (int64_t r0 = 0; r0 < R; r0 += LANES) {
        const int used = (int)(R - r0 < LANES ? R - r0 : LANES);
        for (int l = 0; l < LANES; ++l) {
            const int64_t i = i0 + r0 + (l < used ? l : 0);
            x.set(l, uk::chain_first(k.ukeys[i], k.extra ? (uint64_t)k.extra[i] : 0));
        }
        philox_lanes(x.a, x.b, x.c, x.d, k.k_a);
        for (int l = 0; l < LANES; ++l) {
            const int64_t r = r0 + (l < used ? l : 0);
            x.set(l, uk::chain_second(x.get(l), s0[r], s1[r]));
        }
        philox_lanes(x.a, x.b, x.c, x.d, k.k_b);
        for (int l = 0; l < used; ++l) {
            seed[r0 + l] = uk::low_word(x.get(l));
            if (k.seeds_out) k.seeds_out[i0 + r0 + l] = (int64_t)seed[r0 + l];
        }
        if (k.rids) {
            philox_lanes(x.a, x.b, x.c, x.d, k.k_c);
            for (int l = 0; l < used; ++l) k.rids[i0 + r0 + l] = (int64_t)uk::low_word(x.get(l));
        }
    }
}

}  // namespace rowkeys
}  // namespace ldp
