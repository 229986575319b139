// CUDA twins of csrc/cpu/rng.cpp: per-cell sampler fills over an (R, C) output, one thread
// per cell.  Same CellRng (csrc/common/rng.h) and counter addressing as the CPU kernels, so
// the bits are identical for one seed.  Compile with --fmad=false (no FMA contraction:
// det_log must round exactly like the CPU build, which uses -ffp-contract=off).
#include "../common/rng.h"

using ldp::CellRng;

#define LDP_CELL_LOOP                                                       \
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;           \
    if (idx >= R * C) return;                                               \
    int64_t r = idx / C, c = idx % C;                                       \
    CellRng g(seed, stream, row0 + (uint64_t)r, (uint32_t)c);

extern "C" __global__ void fill_u32(uint32_t* out, int64_t R, int64_t C, uint64_t seed, uint32_t stream,
                                    uint64_t row0) {
    LDP_CELL_LOOP
    out[idx] = g.next_u32();
}

extern "C" __global__ void fill_uniform(double* out, int64_t R, int64_t C, uint64_t seed, uint32_t stream,
                                        uint64_t row0) {
    LDP_CELL_LOOP
    out[idx] = g.uniform();
}

extern "C" __global__ void fill_randint(int64_t* out, int64_t R, int64_t C, uint64_t seed, uint32_t stream,
                                        uint64_t row0, uint64_t k) {
    LDP_CELL_LOOP
    out[idx] = (int64_t)g.randint(k);
}

extern "C" __global__ void fill_geometric(int64_t* out, int64_t R, int64_t C, uint64_t seed, uint32_t stream,
                                          uint64_t row0, double p) {
    LDP_CELL_LOOP
    out[idx] = g.geometric(p);
}

extern "C" __global__ void fill_binomial(int64_t* out, int64_t R, int64_t C, uint64_t seed, uint32_t stream,
                                         uint64_t row0, int64_t n, double p) {
    LDP_CELL_LOOP
    out[idx] = g.binomial(n, p);
}

extern "C" __global__ void fill_discrete_laplace(int64_t* out, int64_t R, int64_t C, uint64_t seed,
                                                 uint32_t stream, uint64_t row0, uint64_t t, uint64_t s) {
    LDP_CELL_LOOP
    out[idx] = g.discrete_laplace(t, s);
}
