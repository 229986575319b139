// CUDA launcher of the keyed fingerprint: indexing and reduction only; the construction and
// every per-block body are in csrc/common/fingerprint.h (shared with csrc/cpu/fingerprint.cpp).
// A warp hashes 32 consecutive 256-byte blocks at a time: for each block every lane reads one
// word pair (coalesced: the warp reads the block's 256 bytes at once) and the NH sums are
// added across the warp; lane t keeps block t's sums and then computes its PRF term, so the
// two Philox calls per block run on all lanes.  Per-warp sums go to out with one 64-bit
// atomicAdd each: integer addition mod 2^64 is order-free, so the result is deterministic
// and equal to the C++ one.  The NH keys are generated once per thread block in shared memory.
// The launcher (ldpfast/_cuda/fingerprint.py) passes a 4-byte aligned pointer (it copies the rare
// misaligned view).
#include "../common/fingerprint.h"

using namespace ldp;
using namespace ldp::fp;

extern "C" __global__ void fingerprint_u8(const uint8_t* data, int64_t nbytes, uint64_t k_nh, uint64_t k_pad,
                                          uint64_t k_prf, unsigned long long* out) {
    __shared__ uint32_t K[KEY_WORDS];
    for (int q = threadIdx.x; q < KEY_WORDS / 4; q += blockDim.x) nh_key_block(k_nh, q, K);
    __syncthreads();
    const uint32_t* w = (const uint32_t*)data;
    const int64_t nwfull = nbytes / 4;  // words that lie wholly inside the string
    const int64_t nb = (nbytes + BLOCK_BYTES - 1) / BLOCK_BYTES;
    const int lane = threadIdx.x & 31;
    const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    uint64_t s0, s1;
    warp_digest(data, nbytes, w, nwfull, warp, nwarps, nb, K, k_pad, k_prf, lane, s0, s1);
    if (lane == 0 && (s0 | s1)) {
        atomicAdd(out, (unsigned long long)s0);
        atomicAdd(out + 1, (unsigned long long)s1);
    }
}
