// CUDA launchers of the feature and label randomisers and input checks.  The per-cell maths is
// in csrc/common/features.h, the code the C++ launchers (csrc/cpu/features.cpp) run, and every
// draw keeps its address (stream, row, sub-stream, word), so the bits equal the C++ build's for
// one seed.  Compile with --fmad=false.
//
// Geometry (ldpfast/_cuda/features.py) and who reads which address:
// * grr, grr_fs: the row's warp.  Columns go in slices of 32: lane l owns column c0 + 32 t + l,
//   so every load of x and store of out is 32 consecutive elements (coalesced).  The keep words
//   are addressed (word j of the keep stream is column j's): for each 128 columns lane l makes
//   Philox block c0 / 4 + l and the lanes fetch their word by shuffle, one block per lane, none
//   twice.  The draws that a row reads in column order from one bit stream (GRR's "other
//   value", GRR-FS's slots and overflow redraws) come from WarpBits: the warp keeps 128 words of
//   the stream in shared memory (one Philox block per lane per refill) and resolves each
//   rejection draw with one ballot over 32 candidate positions, so the row's draws are the
//   BitReader's, in its order.
// * onebit, multibit with m = d: the warp's 8 rows' Philox blocks (4 consecutive columns each)
//   in row-major order, lane-strided: 32 consecutive 4-column pieces per step, across row ends.
// * multibit with m < d: the row's warp zeroes the row and checks its values (coalesced), then
//   lane 0 runs Floyd's m draws (multibit_pick), reading m scattered values.
// * Seeds: a warp takes 8 consecutive rows (keyed_rows).  Unless the caller gives the seeds, it
//   first derives them from the rows' bytes (uk::warp_row_seeds: the warp digests each row with
//   coalesced loads, lanes 0-7 run the 8 chains), then randomises the rows, re-reading them
//   while they should still be in L1/L2 (meant to cross DRAM once; not measured yet).
// * rr_labels: a thread per node, which also digests its label and runs its chain (unless the
//   seeds are given) and checks it if masked: one pass.
// * The mechanisms check their input in the same pass: bad[0] (all ones on entry) becomes the
//   smallest bad flat index (atomicMin, whatever the thread order), the C++ check's answer; the
//   caller reads it once after the launch and discards the output if it is set.  check_* stay
//   for callers that want the check alone.
#include "../common/features.h"
#include "../common/userkey.h"

using namespace ldp;
using namespace ldp::feat;
using ldp::uk::RowKeys;

#define FULL_MASK 0xffffffffu
// The RowKeys of a kernel's parameters seeds_in .. rids (same names in every kernel).
#define ROW_KEYS RowKeys{seeds_in, ukeys, extra, k_nh, k_pad, k_prf, k_a, k_b, k_c, seeds_out, rids}

__device__ __forceinline__ int64_t thread_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int lane_id() { return (int)(threadIdx.x & 31); }

constexpr int WARPS_PER_BLOCK = 8;  // the launcher's 256 threads
constexpr int WIN_WORDS = 128;      // a WarpBits window: one Philox block per lane

// The bit stream of BitReader(seed, stream, row, col), read by a whole warp (every member
// warp-uniform, every lane calling each method).  Window: stream words [w0, w0 + 128) in
// shared memory, refilled at a block boundary when a read would pass its end.
struct WarpBits {
    uint32_t* win;
    uint64_t seed, row;
    uint32_t stream, col;
    int64_t w0;    // first word of the window, -1 while empty
    uint64_t pos;  // the next unread bit
    int lane;

    __device__ WarpBits(uint32_t* win_, uint64_t seed_, uint32_t stream_, uint64_t row_, uint32_t col_)
        : win(win_), seed(seed_), row(row_), stream(stream_), col(col_), w0(-1), pos(0), lane(lane_id()) {}

    // The window holds bits [pos, pos + span), span <= 32 * 32.
    __device__ void cover(uint64_t span) {
        if (w0 >= 0 && pos + span <= (uint64_t)(w0 + WIN_WORDS) * 32) return;
        __syncwarp();  // every lane is done with the old window
        w0 = (int64_t)(pos >> 7) << 2;
        const u32x4 r = cell_block(seed, stream, row, col, (uint32_t)(w0 / 4 + lane));
        win[4 * lane] = r.v[0];
        win[4 * lane + 1] = r.v[1];
        win[4 * lane + 2] = r.v[2];
        win[4 * lane + 3] = r.v[3];
        __syncwarp();
    }

    // Bits [p, p + b) of the stream, least significant first (inside the window, b <= 32).
    __device__ uint64_t at(uint64_t p, int b) const {
        const int64_t q = (int64_t)(p >> 5) - w0;
        const int sh = (int)(p & 31);
        uint64_t v = (uint64_t)win[q] >> sh;
        if (sh + b > 32) v |= (uint64_t)win[q + 1] << (32 - sh);
        return v & ((1ull << b) - 1ull);
    }

    // BitReader::randint(k, b) (b >= 1) for every lane of `need` in lane order, all with one
    // (k, b): lane l tries the candidate l places on, and the r-th lane of `need` gets the r-th
    // accepted candidate (the rejections in between are the reader's).  Returns this lane's
    // draw (0 for lanes not in `need`).
    __device__ uint64_t randint_each(unsigned need, uint64_t k, int b) {
        uint64_t mine = 0;
        while (need) {
            cover(32ull * b);
            const uint64_t c = at(pos + (uint64_t)lane * b, b);
            const unsigned acc = __ballot_sync(FULL_MASK, c < k);
            const int na = __popc(acc), nn = __popc(need);
            const int rank = __popc(need & ((1u << lane) - 1u));
            const bool served = ((need >> lane) & 1u) && rank < na;
            const int src = served ? (int)__fns(acc, 0, rank + 1) : 0;
            const uint64_t v = __shfl_sync(FULL_MASK, c, src);
            if (served) mine = v;
            if (nn <= na) {  // the last need takes the nn-th accepted candidate; reading stops there
                pos += (uint64_t)(__fns(acc, 0, nn) + 1) * b;
                break;
            }
            pos += 32ull * b;
            for (int q = 0; q < na; ++q) need &= need - 1u;  // the first na are served
        }
        return mine;
    }

    // The same draws when each lane of `need` has its own (k, b): one after another.
    __device__ uint64_t randint_in_turn(unsigned need, uint64_t k, int b) {
        uint64_t mine = 0;
        while (need) {
            const int src = __ffs((int)need) - 1;
            need &= need - 1u;
            const uint64_t v =
                randint_each(1u << src, __shfl_sync(FULL_MASK, k, src), __shfl_sync(FULL_MASK, b, src));
            if (lane == src) mine = v;
        }
        return mine;
    }
};

// Lane's keep word for column c0 + 32 t + lane, from the block kb each lane made for columns
// c0 + 4 lane .. + 3 (its word sits in lane 8 t + lane / 4, element lane % 4).
__device__ __forceinline__ uint32_t keep_word(const u32x4& kb, int t, int lane) {
    const int s = 8 * t + (lane >> 2);
    const uint32_t w0 = __shfl_sync(FULL_MASK, kb.v[0], s), w1 = __shfl_sync(FULL_MASK, kb.v[1], s);
    const uint32_t w2 = __shfl_sync(FULL_MASK, kb.v[2], s), w3 = __shfl_sync(FULL_MASK, kb.v[3], s);
    const int e = lane & 3;
    return e == 0 ? w0 : e == 1 ? w1 : e == 2 ? w2 : w3;
}

constexpr int ROWS_PER_WARP = 8;

// body(r0, nr, mine) for the warp's group of rows r0 = 8 w .. r0 + nr - 1 (nr <= 8, < n), lane r
// holding row r0 + r's seed in `mine`, derived here from the row's own bytes
// (uk::warp_row_seeds: digests by the warp, chains side by side in lanes 0-7) unless rk gives
// the seeds.  body reads the rows again while they should still be cached.
template <class Body>
__device__ void keyed_row_group(const void* x, int64_t n, int64_t row_bytes, const RowKeys& rk, Body body) {
    __shared__ uint32_t K[fp::KEY_WORDS];
    uk::row_keys_nh(rk, K);  // the whole block, before any warp leaves
    const int64_t r0 = (thread_index() >> 5) * ROWS_PER_WARP;
    if (r0 >= n) return;  // warp-uniform
    const uint64_t mine = uk::warp_row_seeds<ROWS_PER_WARP>((const uint8_t*)x, n, row_bytes, r0, rk, K, lane_id());
    body(r0, (int)(n - r0 < ROWS_PER_WARP ? n - r0 : ROWS_PER_WARP), mine);
}

// body(i, seed) for the group's rows one after another (the whole warp on each row).
template <class Body>
__device__ void keyed_rows(const void* x, int64_t n, int64_t row_bytes, const RowKeys& rk, Body body) {
    keyed_row_group(x, n, row_bytes, rk, [&](int64_t r0, int nr, uint64_t mine) {
        for (int r = 0; r < nr; ++r) body(r0 + r, __shfl_sync(FULL_MASK, mine, r));
    });
}

// GRR's "other value" draws of one 32-column slice: the lanes of `need` in column order, each
// randint(k_j - 1, other_bits(k_j)) from `bits` (grr_one's draw).  k_common > 2: every column
// with k > 2 has that domain, so the draws share one (k, b) and go together.
__device__ __forceinline__ uint64_t other_draws(WarpBits& bits, unsigned need, uint64_t kj, int64_t k_common) {
    if (!need) return 0;
    if (k_common > 2) return bits.randint_each(need, (uint64_t)k_common - 1, other_bits(k_common));
    return bits.randint_in_turn(need, kj - 1, other_bits((int64_t)kj));
}

// GRR on every column of row i (grr_row's draws; GRR-FS with m = d is the same with its own
// sub-streams, fs_finish's m = d case).  A warp per row.  The Philox row coordinate is 0 for every
// row (each row has its own seed, the user's); i only places a bad index.
template <class I>
__device__ void grr_warp(const I* xr, I* o, int64_t d, const int64_t* k, const uint64_t* T, int64_t k_common,
                         uint64_t seed, uint64_t i, uint32_t sub_keep, WarpBits& bits, unsigned long long* bad) {
    const int lane = bits.lane;
    for (int64_t c0 = 0; c0 < d; c0 += 128) {
        const u32x4 kb = cell_block(seed, STREAM_GRR, 0, sub_keep, (uint32_t)(c0 / 4 + lane));
        for (int t = 0; t < 4 && c0 + 32 * t < d; ++t) {
            const uint32_t w = keep_word(kb, t, lane);
            const int64_t j = c0 + 32 * t + lane;
            const bool valid = j < d;
            const I xv = valid ? xr[j] : (I)0;
            const int64_t kj = valid ? k[j] : 1;
            const uint64_t Tj = valid ? T[j] : 0;
            if (valid && outside_domain(xv, kj)) atomicMin(bad, (unsigned long long)(i * d + j));
            const int b = other_bits(kj);
            const bool need = valid && grr_needs_other(w, Tj, b);
            const uint64_t r = other_draws(bits, __ballot_sync(FULL_MASK, need), (uint64_t)kj, k_common);
            if (!valid) continue;
            o[j] = grr_decide(xv, w, Tj, b, r);
        }
    }
}

template <class I>
__device__ void grr_k(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, int64_t k_common,
                      const RowKeys& rk, unsigned long long* bad) {
    __shared__ uint32_t win[WARPS_PER_BLOCK * WIN_WORDS];
    uint32_t* wwin = win + (threadIdx.x >> 5) * WIN_WORDS;
    keyed_rows(x, n, d * (int64_t)sizeof(I), rk, [&](int64_t i, uint64_t seed) {
        WarpBits bits(wwin, seed, STREAM_GRR, 0, SUB_GRR_BITS);
        grr_warp(x + i * d, out + i * d, d, k, T, k_common, seed, i, SUB_GRR_KEEP, bits, bad);
    });
}

extern "C" __global__ void grr_i32(const int32_t* x, int32_t* out, int64_t n, int64_t d, const int64_t* k,
                                   const uint64_t* T, int64_t k_common,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    grr_k(x, out, n, d, k, T, k_common, ROW_KEYS, bad);
}
extern "C" __global__ void grr_i64(const int64_t* x, int64_t* out, int64_t n, int64_t d, const int64_t* k,
                                   const uint64_t* T, int64_t k_common,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    grr_k(x, out, n, d, k, T, k_common, ROW_KEYS, bad);
}

// GRR-FS, m < d: fs_slots, fs_select and fs_finish of one row, by a warp.
//   slots : lane l's column j takes bits [off_j, off_j + b_j) of (row, 3), off the prefix sum of
//           b = uniform_bits(k) (a scan over the slice), all lanes at once;
//   select: lane 0 runs Floyd, marking the sampled columns -1 in the output row (as fs_select);
//   finish: the r-th sampled column in column order takes keep word r of (row, 2) (an address:
//           its lane makes that block), and the draws of (row, 4) go in column order.
template <class I>
__device__ void grr_fs_row(const I* xr, I* o, int64_t d, const int64_t* k, const uint64_t* T, int64_t m,
                           int64_t k_common, uint64_t seed, int64_t i, uint32_t* wslot, unsigned long long* bad) {
    const int lane = lane_id();
    WarpBits over(wslot + WIN_WORDS, seed, STREAM_GRR, 0, SUB_FS_OVER);
    if (m == d) {
        grr_warp(xr, o, d, k, T, k_common, seed, i, SUB_FS_KEEP, over, bad);
        return;
    }
    WarpBits slots(wslot, seed, STREAM_GRR, 0, SUB_FS_BITS);
    for (int64_t c0 = 0; c0 < d; c0 += 32) {
        const int64_t j = c0 + lane;
        const int b = j < d ? uniform_bits(k[j]) : 0;
        int off = b;  // inclusive scan of b over the slice
        for (int s = 1; s < 32; s <<= 1) {
            const int u = __shfl_up_sync(FULL_MASK, off, s);
            if (lane >= s) off += u;
        }
        slots.cover(32 * 32);  // a slice reads at most 32 * 31 bits
        const uint64_t v = slots.at(slots.pos + (uint64_t)(off - b), b);
        if (j < d) o[j] = (I)v;
        slots.pos += (uint64_t)__shfl_sync(FULL_MASK, off, 31);
    }
    __syncwarp();
    if (lane == 0) fs_select<Cell>(o, d, m, seed, 0, [](int64_t) {});
    __syncwarp();
    int64_t rank0 = 0;  // sampled columns before the slice
    for (int64_t c0 = 0; c0 < d; c0 += 32) {
        const int64_t j = c0 + lane;
        const bool valid = j < d;
        const I ov = valid ? o[j] : (I)0;
        const I xv = valid ? xr[j] : (I)0;
        const int64_t kj = valid ? k[j] : 1;
        const uint64_t Tj = valid ? T[j] : 0;
        if (valid && outside_domain(xv, kj)) atomicMin(bad, (unsigned long long)(i * d + j));
        const bool sampled = valid && ov < 0;
        const unsigned smask = __ballot_sync(FULL_MASK, sampled);
        uint32_t w = 0;
        if (sampled) {
            const int64_t r = rank0 + __popc(smask & ((1u << lane) - 1u));
            w = pick4(cell_block(seed, STREAM_GRR, 0, SUB_FS_KEEP, (uint32_t)(r >> 2)), (int)(r & 3));
        }
        rank0 += __popc(smask);
        const int bo = other_bits(kj);
        // (row, 4) consumers in column order: a sampled column whose GRR does not keep the truth
        // (k > 2), or an unsampled slot value outside its domain (redrawn on b = uniform_bits bits)
        const bool need_other = sampled && grr_needs_other(w, Tj, bo);
        const bool need_slot = valid && !sampled && (int64_t)ov >= kj;
        const uint64_t r = over.randint_in_turn(__ballot_sync(FULL_MASK, need_other || need_slot),
                                                need_other ? (uint64_t)kj - 1 : (uint64_t)kj,
                                                need_other ? other_bits(kj) : uniform_bits(kj));
        if (!valid) continue;
        if (sampled) o[j] = grr_decide(xv, w, Tj, bo, r);
        else if (need_slot) o[j] = (I)r;
    }
}

template <class I>
__device__ void grr_fs_k(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, int64_t m,
                         int64_t k_common, const RowKeys& rk, unsigned long long* bad) {
    __shared__ uint32_t win[2 * WARPS_PER_BLOCK * WIN_WORDS];
    uint32_t* wslot = win + (threadIdx.x >> 5) * (2 * WIN_WORDS);
    keyed_rows(x, n, d * (int64_t)sizeof(I), rk, [&](int64_t i, uint64_t seed) {
        grr_fs_row(x + i * d, out + i * d, d, k, T, m, k_common, seed, i, wslot, bad);
    });
}

extern "C" __global__ void grr_fs_i32(const int32_t* x, int32_t* out, int64_t n, int64_t d, const int64_t* k,
                                      const uint64_t* T, int64_t m, int64_t k_common,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    grr_fs_k(x, out, n, d, k, T, m, k_common, ROW_KEYS, bad);
}
extern "C" __global__ void grr_fs_i64(const int64_t* x, int64_t* out, int64_t n, int64_t d, const int64_t* k,
                                      const uint64_t* T, int64_t m, int64_t k_common,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    grr_fs_k(x, out, n, d, k, T, m, k_common, ROW_KEYS, bad);
}

// 1-bit (sub = SUB_ONEBIT) and multi-bit with m = d (sub = SUB_MULTIBIT): the group's Philox
// blocks (row r, columns 4 q .. 4 q + 3) in row-major order, lane-strided, so consecutive lanes
// take consecutive 4-column pieces of memory across row ends too (all lanes busy when d < 128).
// Each lane checks its block's values first.
template <class F>
__device__ void onebit_k(const F* x, int8_t* out, int64_t n, int64_t d, double alpha, double beta, uint64_t T_lo,
                         double span, const RowKeys& rk, uint32_t sub, unsigned long long* bad) {
    const int64_t nq = (d + 3) / 4;
    keyed_row_group(x, n, d * (int64_t)sizeof(F), rk, [&](int64_t r0, int nr, uint64_t mine) {
        const int64_t total = nr * nq;
        for (int64_t base = 0; base < total; base += 32) {  // warp-uniform trip count
            const int64_t t = base + lane_id();
            const int64_t r = (t < total ? t : total - 1) / nq;
            const uint64_t seed = __shfl_sync(FULL_MASK, mine, (int)r);
            if (t >= total) continue;
            const int64_t i = r0 + r, q = t - r * nq;
            for (int64_t j = 4 * q; j < 4 * q + 4 && j < d; ++j)
                if (outside_range(x[i * d + j], alpha, beta)) {
                    atomicMin(bad, (unsigned long long)(i * d + j));
                    break;
                }
            onebit_block(x + i * d, out + i * d, d, q, alpha, beta, T_lo, span, seed, sub, 0);
        }
    });
}

extern "C" __global__ void onebit_f32(const float* x, int8_t* out, int64_t n, int64_t d, double alpha, double beta,
                                      uint64_t T_lo, double span,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, uint32_t sub, unsigned long long* bad) {
    onebit_k(x, out, n, d, alpha, beta, T_lo, span, ROW_KEYS, sub, bad);
}
extern "C" __global__ void onebit_f64(const double* x, int8_t* out, int64_t n, int64_t d, double alpha,
                                      double beta, uint64_t T_lo, double span,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, uint32_t sub, unsigned long long* bad) {
    onebit_k(x, out, n, d, alpha, beta, T_lo, span, ROW_KEYS, sub, bad);
}

template <class F>
__device__ void multibit_k(const F* x, int8_t* out, int64_t n, int64_t d, int64_t m, double alpha, double beta,
                           uint64_t T_lo, double span, const RowKeys& rk, unsigned long long* bad) {
    const int lane = lane_id();
    keyed_rows(x, n, d * (int64_t)sizeof(F), rk, [&](int64_t i, uint64_t seed) {
        const F* xr = x + i * d;
        int8_t* o = out + i * d;
        bool flagged = false;  // a lane reports its first bad column (atomicMin keeps the row's first)
        for (int64_t j = lane; j < d; j += 32) {
            o[j] = 0;
            if (!flagged && outside_range(xr[j], alpha, beta)) {
                atomicMin(bad, (unsigned long long)(i * d + j));
                flagged = true;
            }
        }
        __syncwarp();
        if (lane == 0) multibit_pick<Cell>(xr, o, d, m, alpha, beta, T_lo, span, seed, 0);
        __syncwarp();  // the row is done before the warp's next row
    });
}

extern "C" __global__ void multibit_f32(const float* x, int8_t* out, int64_t n, int64_t d, int64_t m, double alpha,
                                        double beta, uint64_t T_lo, double span,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    multibit_k(x, out, n, d, m, alpha, beta, T_lo, span, ROW_KEYS, bad);
}
extern "C" __global__ void multibit_f64(const double* x, int8_t* out, int64_t n, int64_t d, int64_t m,
                                        double alpha, double beta, uint64_t T_lo, double span,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    multibit_k(x, out, n, d, m, alpha, beta, T_lo, span, ROW_KEYS, bad);
}

template <class I>
__device__ void rr_labels_k(const I* y, const bool* mask, I* out, int64_t n, uint64_t c, uint64_t T, const RowKeys& rk,
                            unsigned long long* bad) {
    __shared__ uint32_t K[fp::KEY_WORDS];
    uk::row_keys_nh(rk, K);  // the whole block, before any thread leaves
    const int64_t i = thread_index();
    if (i >= n) return;
    const I v = y[i];
    const bool masked = mask[i];
    if (masked && outside_domain(v, (int64_t)c)) atomicMin(bad, (unsigned long long)i);
    const uint64_t seed = uk::thread_row_seed((const uint8_t*)(y + i), (int64_t)sizeof(I), i, rk, K);
    out[i] = rr_label(v, masked, c, T, seed, 0);
}

extern "C" __global__ void rr_labels_i32(const int32_t* y, const bool* mask, int32_t* out, int64_t n, uint64_t c,
                                         uint64_t T,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    rr_labels_k(y, mask, out, n, c, T, ROW_KEYS, bad);
}
extern "C" __global__ void rr_labels_i64(const int64_t* y, const bool* mask, int64_t* out, int64_t n, uint64_t c,
                                         uint64_t T,
        const int64_t* seeds_in, const int64_t* ukeys, const int64_t* extra,
        uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, uint64_t k_a, uint64_t k_b, uint64_t k_c,
        int64_t* seeds_out, int64_t* rids, unsigned long long* bad) {
    rr_labels_k(y, mask, out, n, c, T, ROW_KEYS, bad);
}

// Checks alone: first[0] (all ones on entry) becomes the smallest bad flat index, whatever the
// thread order (atomicMin), as the C++ check returns.
template <class I>
__device__ void check_categorical_k(const I* x, int64_t n, int64_t d, const int64_t* k, unsigned long long* first) {
    const int64_t t = thread_index();
    if (t >= n * d) return;
    if (outside_domain(x[t], k[t % d])) atomicMin(first, (unsigned long long)t);
}

extern "C" __global__ void check_categorical_i32(const int32_t* x, int64_t n, int64_t d, const int64_t* k,
                                                 unsigned long long* first) {
    check_categorical_k(x, n, d, k, first);
}
extern "C" __global__ void check_categorical_i64(const int64_t* x, int64_t n, int64_t d, const int64_t* k,
                                                 unsigned long long* first) {
    check_categorical_k(x, n, d, k, first);
}

template <class F>
__device__ void check_range_k(const F* x, int64_t N, double alpha, double beta, unsigned long long* first) {
    const int64_t t = thread_index();
    if (t >= N) return;
    if (outside_range(x[t], alpha, beta)) atomicMin(first, (unsigned long long)t);
}

extern "C" __global__ void check_range_f32(const float* x, int64_t N, double alpha, double beta,
                                           unsigned long long* first) {
    check_range_k(x, N, alpha, beta, first);
}
extern "C" __global__ void check_range_f64(const double* x, int64_t N, double alpha, double beta,
                                           unsigned long long* first) {
    check_range_k(x, N, alpha, beta, first);
}
