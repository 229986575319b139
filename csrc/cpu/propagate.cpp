// Scaled sparse propagation, the building block of KProp (LPGNN Algorithm 2) and of the
// masked multi-hop aggregation of RGNN (Algorithms 1-2):
//
//     y[i, :] = a[i] * ( sum_{j in N(i)} w_ij b[j] * x[j, :]  +  [self_loop] b[i] * x[i, :] )
//
// i.e. y = diag(a) (A [+ I]) diag(b) x, with w_ij = 1 (unweighted) or the CSR values
// (weighted adjacency, e.g. PyG's edge_weight; per-edge factor w = val[k] * b[j]).  Mean / add / GCN normalisation and node masks are
// all expressed through a and b (ldpfast/ops.py), and the backward pass is the same kernel
// on A^T with a and b swapped.  Row-parallel over CSR; each output row is written by one
// thread in a fixed order, so results are identical for any thread count.
// GCC 12 at -O3 interchanged the feature and neighbour loops of the row body once it moved
// into csrc/common/propagate.h (acc behind a pointer): the hot loop became a scalar sum over the
// neighbours of one feature at a time, touching every gathered row 64 times (K = 1 on
// 1M nodes / 20M edges: 2.3 s against 0.55 s).  Keep the loops as written.
#pragma GCC optimize("no-loop-interchange", "no-loop-unroll-and-jam")
#include <algorithm>
#include <type_traits>

#include "../common/propagate.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {

// One output row, features [f0, f0 + W) with W a compile-time width: the accumulator is a
// fixed-size local array the compiler keeps in vector registers, and the x rows of upcoming
// neighbours are prefetched (random gathers are latency bound).  The maths is the shared body
// of csrc/common/propagate.h (also run by csrc/cuda/propagate.cu): per element, self loop,
// then neighbours in CSR order, whatever W is, so the result does not depend on the blocking
// (and matches the Numba twin bit for bit).  UNIT_B skips the b[j] load (one more random
// access per edge) when b is all ones, as for mean / add without mask.  VAL reads the
// per-edge value (weighted adjacency); the unweighted path is unchanged.
// always_inline: each target clone of spmm_rows must get its own copy.  GCC left the weighted,
// scaled variant (VAL, !UNIT_B: KProp's gcn with edge_weight) as one out-of-line SSE2
// function that every clone called, 2x slower than the unweighted path.
template <int W, bool UNIT_B, bool VAL, class T, class S, class C>
__attribute__((always_inline)) static inline void spmm_block(int64_t i, int64_t f0, int64_t d, const int64_t* __restrict__ rp,
                              const C* __restrict__ col, const T* __restrict__ val, const T* __restrict__ a,
                              const T* __restrict__ bs, const S* __restrict__ x, S* __restrict__ y,
                              bool self_loop) {
    constexpr int64_t PF = 8;  // neighbours ahead
    constexpr int LINES = (int)((W * sizeof(S) + 63) / 64);
    T acc[W];
    prop::self_term<W, UNIT_B>(acc, i, f0, d, bs, x, self_loop);
    const int64_t k1 = rp[i + 1];
    // Captured by value: with [&] GCC 12 drops the prefetch altogether (no prefetcht0 in the
    // object; KProp ran ~3x slower, latency bound), with [=] it is emitted.
    prop::accumulate<W, UNIT_B, VAL>(acc, rp[i], k1, f0, d, col, val, bs, x, [=](int64_t k) {
        if (k + PF < k1) {
            const char* p = (const char*)(x + (int64_t)col[k + PF] * d + f0);
            for (int l = 0; l < LINES; ++l) __builtin_prefetch(p + 64 * l);
        }
    });
    prop::finish<W>(acc, a[i], y + i * d + f0);
}

// Rows [b, e): each row's features are covered by the widest compile-time blocks that fit
// (64 floats / 32 doubles = 8 AVX2 registers, then halving down to 1).
template <bool UNIT_B, bool VAL, class T, class S, class C>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void spmm_rows(int64_t b, int64_t e, const int64_t* __restrict__ rp, const C* __restrict__ col,
                      const T* __restrict__ val, const T* __restrict__ a, const T* __restrict__ bs, const S* __restrict__ x,
                      S* __restrict__ y, int64_t d, bool self_loop) {
    constexpr int WMAX = 256 / (int)sizeof(T);
    for (int64_t i = b; i < e; ++i) {
        int64_t f0 = 0;
        for (; f0 + WMAX <= d; f0 += WMAX) spmm_block<WMAX, UNIT_B, VAL, T, S>(i, f0, d, rp, col, val, a, bs, x, y, self_loop);
        if (f0 + 32 <= d && WMAX > 32) { spmm_block<32, UNIT_B, VAL, T, S>(i, f0, d, rp, col, val, a, bs, x, y, self_loop); f0 += 32; }
        if (f0 + 16 <= d) { spmm_block<16, UNIT_B, VAL, T, S>(i, f0, d, rp, col, val, a, bs, x, y, self_loop); f0 += 16; }
        if (f0 + 8 <= d) { spmm_block<8, UNIT_B, VAL, T, S>(i, f0, d, rp, col, val, a, bs, x, y, self_loop); f0 += 8; }
        if (f0 + 4 <= d) { spmm_block<4, UNIT_B, VAL, T, S>(i, f0, d, rp, col, val, a, bs, x, y, self_loop); f0 += 4; }
        if (f0 + 2 <= d) { spmm_block<2, UNIT_B, VAL, T, S>(i, f0, d, rp, col, val, a, bs, x, y, self_loop); f0 += 2; }
        if (f0 + 1 <= d) spmm_block<1, UNIT_B, VAL, T, S>(i, f0, d, rp, col, val, a, bs, x, y, self_loop);
    }
}

// T: the arithmetic (and a, b, val) type; S: the storage of x and y (T, or Bf16 with T = float:
// x and y arrive as 16-bit integer arrays holding bf16 bits).
template <class T, class S, class C>
static void spmm_t(py::array& rowptr, const C* c, py::object& val, py::array& a, py::array& bs, py::array& x,
                   py::array& y, bool self_loop) {
    int64_t n = rowptr.size() - 1;
    if (x.ndim() != 2 || y.ndim() != 2) throw std::invalid_argument("x, y: expected 2-D arrays");
    int64_t d = x.shape(1);
    check_size(x, n * d, "x");
    check_size(y, n * d, "y");
    check_size(a, n, "a");
    check_size(bs, n, "b");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const T* pv = nullptr;
    py::array va;
    if (!val.is_none()) {
        va = val;
        check_size(va, rp[n], "val");
        pv = cdata_ptr<T>(va, "val");  // same dtype as x
    }
    const T* pa = cdata_ptr<T>(a, "a");
    const T* pb = cdata_ptr<T>(bs, "b");
    const S* px;
    S* py_;
    if constexpr (std::is_same_v<S, T>) {
        px = cdata_ptr<T>(x, "x");
        py_ = data_ptr<T>(y, "y", true);
    } else {
        px = reinterpret_cast<const S*>(cdata_ptr<int16_t>(x, "x"));
        py_ = reinterpret_cast<S*>(data_ptr<int16_t>(y, "y", true));
    }
    py::gil_scoped_release nogil;
    const bool unit_b = std::all_of(pb, pb + n, [](T v) { return v == T(1); });
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        if (pv) {
            if (unit_b) spmm_rows<true, true, T, S, C>(b, e, rp, c, pv, pa, pb, px, py_, d, self_loop);
            else spmm_rows<false, true, T, S, C>(b, e, rp, c, pv, pa, pb, px, py_, d, self_loop);
        } else {
            if (unit_b) spmm_rows<true, false, T, S, C>(b, e, rp, c, pv, pa, pb, px, py_, d, self_loop);
            else spmm_rows<false, false, T, S, C>(b, e, rp, c, pv, pa, pb, px, py_, d, self_loop);
        }
    });
}

static void spmm_scaled(py::array rowptr, py::array col, py::array a, py::array b, py::array x, py::array y,
                        bool self_loop, py::object val) {
    with_index(col, "col", [&](auto c) {
        using C = index_t<decltype(c)>;
        if (py::isinstance<carray<float>>(x)) spmm_t<float, float, C>(rowptr, c, val, a, b, x, y, self_loop);
        else if (py::isinstance<carray<double>>(x)) spmm_t<double, double, C>(rowptr, c, val, a, b, x, y, self_loop);
        else if (py::isinstance<carray<int16_t>>(x)) spmm_t<float, Bf16, C>(rowptr, c, val, a, b, x, y, self_loop);
        else throw std::invalid_argument("x: expected float32, float64 or int16 (bfloat16 bits)");
    });
}

void register_propagate(py::module_& m) {
    m.def("spmm_scaled", &spmm_scaled, "y = diag(a) (A [+I]) diag(b) x over CSR (float32/float64, or bf16 bits as int16 with float32 a, b, val), A weighted by val",
          py::arg("rowptr"), py::arg("col"), py::arg("a"), py::arg("b"), py::arg("x"), py::arg("y"),
          py::arg("self_loop"), py::arg("val") = py::none());
}

}  // namespace ldp
