// C++ launcher of the report-count hop of RGNN's feature reconstruction (paper 000,
// Algorithm 1): y = diag(a) (A [+I]) e for indicator bytes e, counted in integers.  The row
// body and why it equals the float one-hot propagation bit for bit are in
// csrc/common/reconstruct.h (shared with csrc/cuda/reconstruct.cu); twin:
// ldpfast/_numba/reconstruct.py.  Rows are split over std::thread by CSR entries, each row
// written by one thread, so the output does not depend on the thread count.
#include <algorithm>

// Integer sums may be reordered, so GCC's -O3 unroll-and-jam fuses two neighbours of the edge
// loop into a scalar byte loop (measured: 67 s for one 192-column hop of the Orkut-like graph,
// 3x a float hop); without it the row is widened and added with vector instructions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-loop-unroll-and-jam")
#endif

#include "../common/reconstruct.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {

// Inlined into each target clone of count_rows, so the AVX2 clone widens and adds the bytes
// with AVX2 (a called block would be compiled for the baseline target only).
template <int W, class T, class C>
__attribute__((always_inline)) static inline void count_block(int64_t i, int64_t f0, int64_t w, const int64_t* __restrict__ rp,
                               const C* __restrict__ col, const uint8_t* __restrict__ e, const T* __restrict__ a,
                               T* __restrict__ y, bool self_loop) {
    constexpr int64_t PF = 8;  // neighbours ahead: the row gathers are latency bound
    constexpr int LINES = (W + 63) / 64;
    uint32_t acc[W];
    const int64_t k1 = rp[i + 1];
    recon::count_row<W>(acc, i, f0, w, rp, col, e, self_loop, [&](int64_t k) {
        if (k + PF < k1) {
            const char* p = (const char*)(e + (int64_t)col[k + PF] * w + f0);
            for (int l = 0; l < LINES; ++l) __builtin_prefetch(p + 64 * l);
        }
    });
    recon::count_finish<W>(acc, a[i], y + i * w + f0);
}

// Rows [b, e): the columns in the widest compile-time blocks that fit (64, then halving).
template <class T, class C>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void count_rows(int64_t b, int64_t e_, const int64_t* __restrict__ rp, const C* __restrict__ col,
                       const uint8_t* __restrict__ e, const T* __restrict__ a, T* __restrict__ y, int64_t w,
                       bool self_loop) {
    for (int64_t i = b; i < e_; ++i) {
        int64_t f0 = 0;
        for (; f0 + 64 <= w; f0 += 64) count_block<64>(i, f0, w, rp, col, e, a, y, self_loop);
        if (f0 + 32 <= w) { count_block<32>(i, f0, w, rp, col, e, a, y, self_loop); f0 += 32; }
        if (f0 + 16 <= w) { count_block<16>(i, f0, w, rp, col, e, a, y, self_loop); f0 += 16; }
        if (f0 + 8 <= w) { count_block<8>(i, f0, w, rp, col, e, a, y, self_loop); f0 += 8; }
        if (f0 + 4 <= w) { count_block<4>(i, f0, w, rp, col, e, a, y, self_loop); f0 += 4; }
        if (f0 + 2 <= w) { count_block<2>(i, f0, w, rp, col, e, a, y, self_loop); f0 += 2; }
        if (f0 + 1 <= w) count_block<1>(i, f0, w, rp, col, e, a, y, self_loop);
    }
}

template <class T, class C>
static void counts_t(const py::array& rowptr, const C* c, const py::array& e, const py::array& a, py::array& y,
                     bool self_loop) {
    const int64_t n = rowptr.size() - 1;
    if (e.ndim() != 2 || y.ndim() != 2) throw std::invalid_argument("e, y: expected 2-D arrays");
    const int64_t w = e.shape(1);
    check_size(e, n * w, "e");
    check_size(y, n * w, "y");
    check_size(a, n, "a");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const uint8_t* pe = cdata_ptr<uint8_t>(e, "e");
    const T* pa = cdata_ptr<T>(a, "a");
    T* py_ = data_ptr<T>(y, "y", true);
    py::gil_scoped_release nogil;
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t en, int) {
        count_rows<T, C>(b, en, rp, c, pe, pa, py_, w, self_loop);
    });
}

static void fs_counts(py::array rowptr, py::array col, py::array e, py::array a, py::array y, bool self_loop) {
    with_index(col, "col", [&](auto c) {
        using C = index_t<decltype(c)>;
        if (py::isinstance<carray<float>>(y)) counts_t<float, C>(rowptr, c, e, a, y, self_loop);
        else if (py::isinstance<carray<double>>(y)) counts_t<double, C>(rowptr, c, e, a, y, self_loop);
        else throw std::invalid_argument("y: expected float32 or float64");
    });
}

template <class T>
static void estimate_t(const py::array& lam, const py::array& gam, const py::array& a, const py::array& b,
                       bool allbin, py::array& out, int64_t c0) {
    if (lam.ndim() != 2 || out.ndim() != 2) throw std::invalid_argument("lam, out: expected 2-D arrays");
    const int64_t n = lam.shape(0), w = lam.shape(1), B = gam.size(), d = out.shape(1);
    if (out.shape(0) != n) throw std::invalid_argument("out: expected as many rows as lam");
    if (c0 < 0 || c0 + B > d) throw std::invalid_argument("c0: the block's columns must lie in [0, out.shape[1])");
    check_size(a, B, "a");
    check_size(b, B, "b");
    const int64_t* pg = cdata_ptr<int64_t>(gam, "gam");
    int64_t need = 0;
    for (int64_t t = 0; t < B; ++t) {
        if (pg[t] < 2 || (allbin && pg[t] != 2)) throw std::invalid_argument("gam: domain sizes must be >= 2 (all 2 when allbin)");
        need += pg[t] - 1;
    }
    if (need != w) throw std::invalid_argument("lam: expected sum(gam - 1) columns");
    const T* pl = cdata_ptr<T>(lam, "lam");
    const T* pa = cdata_ptr<T>(a, "a");
    const T* pb = cdata_ptr<T>(b, "b");
    int64_t* po = data_ptr<int64_t>(out, "out", true);
    py::gil_scoped_release nogil;
    parallel_for(n, [&](int64_t r0, int64_t r1, int) {
        for (int64_t i = r0; i < r1; ++i) recon::estimate_index_row(pl + i * w, pg, pa, pb, B, allbin, po + i * d + c0);
    });
}

static void fs_estimate_index(py::array lam, py::array gam, py::array a, py::array b, bool allbin, py::array out,
                              int64_t c0) {
    if (py::isinstance<carray<float>>(lam)) estimate_t<float>(lam, gam, a, b, allbin, out, c0);
    else if (py::isinstance<carray<double>>(lam)) estimate_t<double>(lam, gam, a, b, allbin, out, c0);
    else throw std::invalid_argument("lam: expected float32 or float64");
}

void register_reconstruct(py::module_& m) {
    m.def("fs_estimate_index", &fs_estimate_index,
          "out[:, c0 + t] = argmax of the GRR-FS estimate (RGNN eq. 5, Algorithm 1 line 19) of block feature t",
          py::arg("lam"), py::arg("gam"), py::arg("a"), py::arg("b"), py::arg("allbin"), py::arg("out"),
          py::arg("c0"));
    m.def("fs_counts", &fs_counts,
          "y = diag(a) (A [+I]) e for uint8 indicators e, counted in integers (RGNN Algorithm 1, first hop)",
          py::arg("rowptr"), py::arg("col"), py::arg("e"), py::arg("a"), py::arg("y"), py::arg("self_loop"));
}

}  // namespace ldp
