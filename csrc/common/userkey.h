// Per-user report keys: the seed of every LDP report, derived from the user and their own data
// (ldpfast/privacy/users.py holds the derivation's Python side and its documentation).
// One body for the C++ launcher (csrc/cpu/userkey.cpp), the CUDA launcher
// (csrc/cuda/userkey.cu) and, line for line, the Numba twin (ldpfast/_numba/userkey.py).
//
// Per release of one mechanism, the caller derives from SHA-256(secret, domain, mechanism,
// every parameter of the output law) the 64-bit keys used below; per user i:
//   input digest  (s0, s1) = the keyed fingerprint (fingerprint.h) of the bytes of row i
//                  (dense rows), or sum_{j in N(i)} Philox_{k_set}(key_j) (a neighbour set:
//                  order-free, so it does not depend on how the rows are numbered);
//   chain         a = Philox_{k_a}(ukey_lo, ukey_hi, extra_lo, extra_hi)
//                 b = Philox_{k_b}(a ^ (s0_lo, s0_hi, s1_lo, s1_hi))
//   seed_i        = b0 | b1 << 32                      (the key of the user's Philox streams)
//   report id     = c0 | c1 << 32, c = Philox_{k_c}(b)  (what the report store keeps)
// The chain is CBC-MAC over two fixed-length blocks with the block cipher Philox4x32-10, so
// (Philox taken as a PRF under an unknown key, as everywhere in ldpfast) seeds of different
// (user key, extra, input) are independent, and a report id reveals neither the seed nor the
// input.  `extra` carries a user's own per-release flags (in the label mask, public, ...).
#pragma once
#include "fingerprint.h"
#if !defined(__CUDACC__)
#include <cstring>
#endif

namespace ldp {
namespace uk {

// Keyed fingerprint of one row of bytes (any alignment): fingerprint.h's construction, the
// row being the whole string.  K: the NH keys of k_nh (fp::nh_key_block).  The CUDA launcher
// hashes a row with a warp instead (same blocks, same sums).
LDP_HD void row_digest(const uint8_t* p, int64_t nbytes, const uint32_t* K, uint64_t k_pad, uint64_t k_prf,
                       uint64_t& s0, uint64_t& s1) {
    s0 = 0;
    s1 = 0;
    const int64_t nfull = nbytes / fp::BLOCK_BYTES, nb = (nbytes + fp::BLOCK_BYTES - 1) / fp::BLOCK_BYTES;
    for (int64_t b = 0; b < nb; ++b) {
        uint64_t y0, y1;
#if !defined(__CUDACC__)
        if (b < nfull) {  // whole words by memcpy: any alignment, little endian (as fingerprint.cpp)
            uint32_t m[fp::BLOCK_WORDS];
            std::memcpy(m, p + b * fp::BLOCK_BYTES, fp::BLOCK_BYTES);
            fp::nh_block(m, K, y0, y1);
        } else
#endif
            fp::nh_block_tail(p, nbytes, b, K, y0, y1);
        fp::block_term(y0, y1, (uint64_t)b, k_pad, k_prf, s0, s1);
    }
    (void)nfull;
}

// One neighbour's term of a set digest: Philox_{k_set}(key) as two 64-bit words.
LDP_HD void set_term(int64_t key, uint64_t k_set, uint64_t& t0, uint64_t& t1) {
    const uint64_t u = (uint64_t)key;
    const u32x4 r = fp::philox_key64(u32x4{{(uint32_t)u, (uint32_t)(u >> 32), 0x5e7u, 0u}}, k_set);
    t0 = (uint64_t)r.v[0] | ((uint64_t)r.v[1] << 32);
    t1 = (uint64_t)r.v[2] | ((uint64_t)r.v[3] << 32);
}

// The chain's pieces (report_key below; the C++ launchers run each step for many rows at once,
// csrc/cpu/rowkeys.h): the first block, the second block (a ^ digest), and a 64-bit word of an
// output block (the seed of b, the report id of c).
LDP_HD u32x4 chain_first(int64_t ukey, uint64_t extra) {
    const uint64_t u = (uint64_t)ukey;
    return u32x4{{(uint32_t)u, (uint32_t)(u >> 32), (uint32_t)extra, (uint32_t)(extra >> 32)}};
}

LDP_HD u32x4 chain_second(const u32x4& a, uint64_t s0, uint64_t s1) {
    return u32x4{{a.v[0] ^ (uint32_t)s0, a.v[1] ^ (uint32_t)(s0 >> 32), a.v[2] ^ (uint32_t)s1,
                  a.v[3] ^ (uint32_t)(s1 >> 32)}};
}

LDP_HD uint64_t low_word(const u32x4& b) { return (uint64_t)b.v[0] | ((uint64_t)b.v[1] << 32); }

// The chain above: seed and report id of one user.
LDP_HD void report_key(int64_t ukey, uint64_t extra, uint64_t s0, uint64_t s1, uint64_t k_a, uint64_t k_b,
                       uint64_t k_c, uint64_t& seed, uint64_t& rid) {
    const u32x4 a = fp::philox_key64(chain_first(ukey, extra), k_a);
    const u32x4 b = fp::philox_key64(chain_second(a, s0, s1), k_b);
    seed = low_word(b);
    rid = low_word(fp::philox_key64(b, k_c));
}

// One release's keys for a kernel that derives its rows' seeds itself (the CUDA feature
// kernels: the row is read once for its digest and once, from cache, for its reports).
// seeds_in non-null: the seeds are given and nothing else is used.  extra, seeds_out and rids
// may be null.
struct RowKeys {
    const int64_t* seeds_in;
    const int64_t* ukeys;
    const int64_t* extra;
    uint64_t k_nh, k_pad, k_prf, k_a, k_b, k_c;
    int64_t* seeds_out;
    int64_t* rids;
};

// Row i's seed by one thread (rows of a few bytes: a label): the digest of its nbytes at p, its
// chain, and the seed / report id written out where rk asks.  K: the NH keys of rk.k_nh.
// Row i's seed from its digest (s0, s1): its chain, the seed and report id written out where
// rk asks.
LDP_HD uint64_t row_chain(const RowKeys& rk, int64_t i, uint64_t s0, uint64_t s1) {
    uint64_t seed, rid;
    report_key(rk.ukeys[i], rk.extra ? (uint64_t)rk.extra[i] : 0, s0, s1, rk.k_a, rk.k_b, rk.k_c, seed, rid);
    if (rk.seeds_out) rk.seeds_out[i] = (int64_t)seed;
    if (rk.rids) rk.rids[i] = (int64_t)rid;
    return seed;
}

LDP_HD uint64_t thread_row_seed(const uint8_t* p, int64_t nbytes, int64_t i, const RowKeys& rk, const uint32_t* K) {
    if (rk.seeds_in) return (uint64_t)rk.seeds_in[i];
    uint64_t s0, s1;
    row_digest(p, nbytes, K, rk.k_pad, rk.k_prf, s0, s1);
    return row_chain(rk, i, s0, s1);
}

#if defined(__CUDACC__) || defined(LDP_CUDA_EMULATION)
// The NH keys of k_nh into shared K, by the whole block (every thread must call it).
__device__ __forceinline__ void block_nh_keys(uint64_t k_nh, uint32_t* K) {
    for (int q = threadIdx.x; q < fp::KEY_WORDS / 4; q += blockDim.x) fp::nh_key_block(k_nh, q, K);
    __syncthreads();
}

__device__ __forceinline__ void row_keys_nh(const RowKeys& rk, uint32_t* K) {
    if (!rk.seeds_in) block_nh_keys(rk.k_nh, K);  // rk is the same in every thread of the block
}

// The digest (s0, s1) of row i of `rows` (nbytes each) by one warp, in every lane
// (fp::warp_digest: word pairs read by the whole warp, coalesced).
__device__ __forceinline__ void warp_row_digest(const uint8_t* rows, int64_t nbytes, int64_t i, const uint32_t* K,
                                                uint64_t k_pad, uint64_t k_prf, int lane, uint64_t& s0, uint64_t& s1) {
    // whole words only where the row is 4-byte aligned (nbytes % 4 == 0 and an aligned base)
    const bool aligned = (nbytes & 3) == 0 && (((uint64_t)rows) & 3) == 0;
    const uint8_t* p = rows + i * nbytes;
    fp::warp_digest(p, nbytes, (const uint32_t*)p, aligned ? nbytes / 4 : 0, 0, 1,
                    (nbytes + fp::BLOCK_BYTES - 1) / fp::BLOCK_BYTES, K, k_pad, k_prf, lane, s0, s1);
}

// Seeds of rows r0 .. r0 + R - 1 (those < n) of `rows` (nbytes each), by one warp: the warp
// digests each row in turn (fp::warp_digest, as userkey.cu's row_digests), lane r keeps row
// r0 + r's sums and runs its chain (report_key), so the chains of R rows run side by side.
// Returns row r0 + lane's seed in lanes < R (0 elsewhere).
template <int R>
__device__ uint64_t warp_row_seeds(const uint8_t* rows, int64_t n, int64_t nbytes, int64_t r0, const RowKeys& rk,
                                   const uint32_t* K, int lane) {
    const bool mine = lane < R && r0 + lane < n;
    if (rk.seeds_in) return mine ? (uint64_t)rk.seeds_in[r0 + lane] : 0;
    uint64_t m0 = 0, m1 = 0;
    for (int r = 0; r < R && r0 + r < n; ++r) {  // warp-uniform
        uint64_t s0, s1;
        warp_row_digest(rows, nbytes, r0 + r, K, rk.k_pad, rk.k_prf, lane, s0, s1);
        if (lane == r) {
            m0 = s0;
            m1 = s1;
        }
    }
    return mine ? row_chain(rk, r0 + lane, m0, m1) : 0;
}
#endif

}  // namespace uk
}  // namespace ldp
