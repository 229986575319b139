// C++ launcher of the report-count hop of RGNN's feature reconstruction (paper 000,
// Algorithm 1): y = diag(a) (A [+I]) e for indicator bytes e, counted in integers.  The row
// body and why it equals the float one-hot propagation bit for bit are in
// csrc/common/reconstruct.h (shared with csrc/cuda/reconstruct.cu); twin:
// ldpfast/_numba/reconstruct.py.  Rows are split over std::thread by CSR entries, each row
// written by one thread, so the output does not depend on the thread count.
#include <algorithm>

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

void register_reconstruct(py::module_& m) {
    m.def("fs_counts", &fs_counts,
          "y = diag(a) (A [+I]) e for uint8 indicators e, counted in integers (RGNN Algorithm 1, first hop)",
          py::arg("rowptr"), py::arg("col"), py::arg("e"), py::arg("a"), py::arg("y"), py::arg("self_loop"));
}

}  // namespace ldp
