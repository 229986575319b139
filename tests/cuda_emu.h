// Host emulation of the CUDA execution model, enough to run csrc/cuda kernels under g++ with no
// GPU (tests/test_cuda_emulated.py).  Every thread of a block is an OS thread, so warp
// collectives (__ballot_sync, __shfl_sync, __syncwarp) and __syncthreads are real rendezvous
// of the 32 lanes or the block, and __shared__ memory is one object per block.  Blocks run one
// after another.  This checks a launcher's indexing, lane roles and collectives against the
// C++ build, not the GPU's timing or memory model (the device tests do that).
//
// Rules the emulated kernels must keep (they are CUDA's rules too): every lane of a warp
// reaches the same collectives (exits are warp-uniform), and the full mask is used.
#pragma once
#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__

struct EmuDim {
    unsigned x, y, z;
};
static thread_local EmuDim threadIdx = {0, 1, 1}, blockIdx = {0, 1, 1};
static EmuDim blockDim = {256, 1, 1}, gridDim = {1, 1, 1};

struct EmuWarp {
    std::barrier<> bar{32};
    uint64_t slot[32];
};
static std::vector<std::unique_ptr<EmuWarp>> emu_warps;
static std::unique_ptr<std::barrier<>> emu_block_bar;
static std::mutex emu_atomic_mutex;

static inline EmuWarp& emu_warp() { return *emu_warps[threadIdx.x >> 5]; }

static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp().bar.arrive_and_wait(); }
static inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }

template <class T>
static inline T emu_exchange(T v, int src) {
    EmuWarp& w = emu_warp();
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    w.slot[threadIdx.x & 31] = b;
    w.bar.arrive_and_wait();
    const uint64_t r = w.slot[src & 31];
    w.bar.arrive_and_wait();
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
}

static inline unsigned __ballot_sync(unsigned mask, int pred) {
    EmuWarp& w = emu_warp();
    w.slot[threadIdx.x & 31] = pred != 0;
    w.bar.arrive_and_wait();
    unsigned r = 0;
    for (int l = 0; l < 32; ++l)
        if (((mask >> l) & 1u) && w.slot[l]) r |= 1u << l;
    w.bar.arrive_and_wait();
    return r;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

template <class T>
static inline T __shfl_sync(unsigned, T v, int src, int = 32) {
    return emu_exchange(v, src);
}

template <class T>
static inline T __shfl_up_sync(unsigned, T v, unsigned delta, int = 32) {
    const unsigned lane = threadIdx.x & 31;
    const T u = emu_exchange(v, lane >= delta ? (int)(lane - delta) : (int)lane);
    return u;
}

static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
static inline int __ffs(int v) { return __builtin_ffs(v); }
static inline int __ffsll(long long v) { return __builtin_ffsll(v); }
static inline int __clzll(long long v) { return v ? __builtin_clzll((unsigned long long)v) : 64; }
// Position of the (offset)-th set bit (1-based) counting up from bit `base`, else 0xffffffff.
static inline unsigned __fns(unsigned mask, unsigned base, int offset) {
    for (unsigned b = base; b < 32; ++b)
        if ((mask >> b) & 1u)
            if (--offset == 0) return b;
    return 0xffffffffu;
}

static inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    const unsigned long long old = *p;
    if (v < old) *p = v;
    return old;
}
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    const unsigned long long old = *p;
    *p = old + v;
    return old;
}
static inline int atomicOr(int* p, int v) {
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    const int old = *p;
    *p = old | v;
    return old;
}

// Run f() on every thread of a grid of `blocks` blocks of `threads` threads (a multiple of 32).
template <class F>
static void emu_launch(int64_t blocks, unsigned threads, F f) {
    blockDim = {threads, 1, 1};
    gridDim = {(unsigned)blocks, 1, 1};
    for (int64_t b = 0; b < blocks; ++b) {
        emu_warps.clear();
        for (unsigned w = 0; w < threads / 32; ++w) emu_warps.emplace_back(new EmuWarp());
        emu_block_bar.reset(new std::barrier<>((std::ptrdiff_t)threads));
        std::vector<std::thread> ts;
        ts.reserve(threads);
        for (unsigned t = 0; t < threads; ++t)
            ts.emplace_back([&, t, b] {
                threadIdx = {t, 0, 0};
                blockIdx = {(unsigned)b, 0, 0};
                f();
                // A finished lane leaves the rendezvous of its warp and block (CUDA: an exited
                // thread no longer takes part in __syncthreads).
                emu_warp().bar.arrive_and_drop();
                emu_block_bar->arrive_and_drop();
            });
        for (auto& t : ts) t.join();
    }
}
