// CUDA launchers of the per-user report keys: indexing and reductions only; the construction
// and every body are in csrc/common/userkey.h and fingerprint.h (shared with
// csrc/cpu/userkey.cpp).  Geometry (ldpfast/_cuda/userkey.py):
// * row_digests: a warp per row.  For each 256-byte block of the row every lane reads one word
//   pair (the warp reads the block at once, coalesced) and the NH sums are added across the
//   warp (fp::warp_digest, shared with fingerprint.cu); lane t keeps block t's sums of each
//   group of 32 blocks and computes its PRF term, so the Philox calls run on all lanes.  The lane sums are added across the warp at the end
//   (mod 2^64, order-free: the C++ launcher's sums).  NH keys once per thread block, in shared
//   memory.
// * set_digests: a thread per neighbour entry; each adds its term to its row's two sums with a
//   64-bit atomicAdd (integer sums mod 2^64: deterministic, whatever the order).
// * report_keys: a thread per user.
#include "../common/userkey.h"

using namespace ldp;
using namespace ldp::fp;

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }

extern "C" __global__ void row_digests(const uint8_t* rows, int64_t n, int64_t nbytes, uint64_t k_nh,
                                       uint64_t k_pad, uint64_t k_prf, uint64_t* out) {
    __shared__ uint32_t K[KEY_WORDS];
    uk::block_nh_keys(k_nh, K);
    const int lane = threadIdx.x & 31;
    const int64_t i = thread_index() >> 5;  // warp-uniform
    if (i >= n) return;
    uint64_t s0, s1;
    uk::warp_row_digest(rows, nbytes, i, K, k_pad, k_prf, lane, s0, s1);
    if (lane == 0) {
        out[2 * i] = s0;
        out[2 * i + 1] = s1;
    }
}

// rowptr (n + 1), col (E), the row of each entry given by a binary search of rowptr.
template <class C>
__device__ void set_digests_k(const int64_t* rowptr, const C* col, int64_t n, const int64_t* keys, uint64_t k_set,
                              unsigned long long* out) {
    const int64_t e = thread_index();
    if (e >= rowptr[n]) return;
    int64_t lo = 0, hi = n;  // the row i with rowptr[i] <= e < rowptr[i + 1]
    while (hi - lo > 1) {
        const int64_t mid = (lo + hi) >> 1;
        if (rowptr[mid] <= e) lo = mid; else hi = mid;
    }
    uint64_t t0, t1;
    uk::set_term(keys[(int64_t)col[e]], k_set, t0, t1);
    atomicAdd(out + 2 * lo, (unsigned long long)t0);
    atomicAdd(out + 2 * lo + 1, (unsigned long long)t1);
}

extern "C" __global__ void set_digests_i32(const int64_t* rowptr, const int32_t* col, int64_t n, const int64_t* keys,
                                           uint64_t k_set, unsigned long long* out) {
    set_digests_k(rowptr, col, n, keys, k_set, out);
}
extern "C" __global__ void set_digests_i64(const int64_t* rowptr, const int64_t* col, int64_t n, const int64_t* keys,
                                           uint64_t k_set, unsigned long long* out) {
    set_digests_k(rowptr, col, n, keys, k_set, out);
}

// extra, digests, rids: null when absent.
extern "C" __global__ void report_keys(const int64_t* ukeys, const uint64_t* extra, const uint64_t* digests,
                                       int64_t n, uint64_t k_a, uint64_t k_b, uint64_t k_c, uint64_t* seeds,
                                       uint64_t* rids) {
    const int64_t i = thread_index();
    if (i >= n) return;
    uint64_t r;
    uk::report_key(ukeys[i], extra ? extra[i] : 0, digests ? digests[2 * i] : 0, digests ? digests[2 * i + 1] : 0,
                   k_a, k_b, k_c, seeds[i], r);
    if (rids) rids[i] = r;
}
