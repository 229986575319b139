// Host emulation of the CUDA execution model, enough to run csrc/cuda kernels under g++ with no
// GPU (tests/test_cuda_emulated.py).  Every thread of a block is a coroutine (ucontext) on one
// OS thread, run round robin; warp collectives (__ballot_sync, __shfl_sync, __syncwarp) and
// __syncthreads are real rendezvous: a lane waits there until every live lane of its warp
// (block) has arrived.  __shared__ memory is one object per block.  Blocks run one after
// another.  This checks a launcher's indexing, lane roles and collectives against the C++
// build, not the GPU's timing or memory model (the device tests do that).
//
// Rules the emulated kernels must keep (they are CUDA's rules too): every lane of a warp
// reaches the same collectives (exits are warp-uniform), and the full mask is used.
#pragma once
#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <vector>

#define LDP_CUDA_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
#define __launch_bounds__(...)

struct EmuDim {
    unsigned x, y, z;
};
static EmuDim threadIdx = {0, 1, 1}, blockIdx = {0, 1, 1};  // of the lane now running
static EmuDim blockDim = {256, 1, 1}, gridDim = {1, 1, 1};

struct EmuLane {
    ucontext_t ctx;
    std::vector<char> stack;
    bool done;
};
struct EmuGroup {  // a warp or the block: a generation-counting barrier
    int arrived = 0, live = 0;
    unsigned gen = 0;
    uint64_t slot[32];
};
static ucontext_t emu_sched;
static std::vector<EmuLane> emu_lanes;
static std::vector<EmuGroup> emu_warps;
static EmuGroup emu_block;

static inline void emu_yield() { swapcontext(&emu_lanes[threadIdx.x].ctx, &emu_sched); }

static inline void emu_wait(EmuGroup& g) {
    const unsigned gen = g.gen;
    if (++g.arrived == g.live) {
        g.arrived = 0;
        ++g.gen;
        return;
    }
    while (g.gen == gen) emu_yield();
}

static inline EmuGroup& emu_warp() { return emu_warps[threadIdx.x >> 5]; }
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_wait(emu_warp()); }
static inline void __syncthreads() { emu_wait(emu_block); }

template <class T>
static inline T emu_exchange(T v, int src) {
    EmuGroup& w = emu_warp();
    uint64_t b = 0;
    std::memcpy(&b, &v, sizeof(T));
    w.slot[threadIdx.x & 31] = b;
    emu_wait(w);
    const uint64_t r = w.slot[src & 31];
    emu_wait(w);
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
}

static inline unsigned __ballot_sync(unsigned mask, int pred) {
    EmuGroup& w = emu_warp();
    w.slot[threadIdx.x & 31] = pred != 0;
    emu_wait(w);
    unsigned r = 0;
    for (int l = 0; l < 32; ++l)
        if (((mask >> l) & 1u) && w.slot[l]) r |= 1u << l;
    emu_wait(w);
    return r;
}
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }

template <class T>
static inline T __shfl_sync(unsigned, T v, int src, int = 32) {
    return emu_exchange(v, src);
}

template <class T>
static inline T __shfl_xor_sync(unsigned, T v, int mask, int = 32) {
    return emu_exchange(v, (int)((threadIdx.x & 31) ^ (unsigned)mask));
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
static inline int __clz(int v) { return v ? __builtin_clz((unsigned)v) : 32; }
static inline int __clzll(long long v) { return v ? __builtin_clzll((unsigned long long)v) : 64; }
// Position of the (offset)-th set bit (1-based) counting up from bit `base`, else 0xffffffff.
static inline unsigned __fns(unsigned mask, unsigned base, int offset) {
    for (unsigned b = base; b < 32; ++b)
        if ((mask >> b) & 1u)
            if (--offset == 0) return b;
    return 0xffffffffu;
}

// Atomics: one OS thread runs every lane, so a read-modify-write is atomic as it stands.
template <class T, class F>
static inline T emu_rmw(T* p, F f) {
    const T old = *p;
    *p = f(old);
    return old;
}
template <class T, class U>
static inline T atomicMin(T* p, U v) { return emu_rmw(p, [&](T o) { return (T)v < o ? (T)v : o; }); }
template <class T, class U>
static inline T atomicMax(T* p, U v) { return emu_rmw(p, [&](T o) { return (T)v > o ? (T)v : o; }); }
template <class T, class U>
static inline T atomicAdd(T* p, U v) { return emu_rmw(p, [&](T o) { return (T)(o + (T)v); }); }
template <class T, class U>
static inline T atomicOr(T* p, U v) { return emu_rmw(p, [&](T o) { return (T)(o | (T)v); }); }
template <class T, class U>
static inline T atomicAnd(T* p, U v) { return emu_rmw(p, [&](T o) { return (T)(o & (T)v); }); }
template <class T, class U>
static inline T atomicExch(T* p, U v) { return emu_rmw(p, [&](T) { return (T)v; }); }
template <class T, class U, class V>
static inline T atomicCAS(T* p, U cmp, V v) { return emu_rmw(p, [&](T o) { return o == (T)cmp ? (T)v : o; }); }

// Run f() on every thread of a grid of `blocks` blocks of `threads` threads (a multiple of 32).
template <class F>
static void emu_launch(int64_t blocks, unsigned threads, F f) {
    static F* fn;
    fn = &f;
    blockDim = {threads, 1, 1};
    gridDim = {(unsigned)blocks, 1, 1};
    emu_lanes.resize(threads);
    emu_warps.assign(threads / 32, EmuGroup());
    auto body = [] {
        (*fn)();
        // A finished lane leaves its warp's and block's rendezvous (CUDA: an exited thread no
        // longer takes part in __syncthreads); a barrier it completes opens.
        EmuGroup* gs[2] = {&emu_warp(), &emu_block};
        for (EmuGroup* g : gs)
            if (--g->live == g->arrived && g->arrived > 0) {
                g->arrived = 0;
                ++g->gen;
            }
        emu_lanes[threadIdx.x].done = true;
    };
    static void (*entry)() = nullptr;
    static decltype(body)* bp;
    bp = &body;
    entry = [] { (*bp)(); };
    for (int64_t b = 0; b < blocks; ++b) {
        for (auto& w : emu_warps) w = EmuGroup(), w.live = 32;
        emu_block = EmuGroup();
        emu_block.live = (int)threads;
        for (unsigned t = 0; t < threads; ++t) {
            EmuLane& L = emu_lanes[t];
            L.stack.resize(1 << 18);
            L.done = false;
            getcontext(&L.ctx);
            L.ctx.uc_stack.ss_sp = L.stack.data();
            L.ctx.uc_stack.ss_size = L.stack.size();
            L.ctx.uc_link = &emu_sched;
            makecontext(&L.ctx, entry, 0);
        }
        blockIdx = {(unsigned)b, 0, 0};
        for (bool any = true; any;) {  // round robin until every lane has finished
            any = false;
            for (unsigned t = 0; t < threads; ++t) {
                if (emu_lanes[t].done) continue;
                any = true;
                threadIdx = {t, 0, 0};
                swapcontext(&emu_sched, &emu_lanes[t].ctx);
            }
        }
    }
}
