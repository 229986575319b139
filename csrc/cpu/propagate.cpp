// Scaled sparse propagation, the building block of KProp (LPGNN Algorithm 2) and of the
// masked multi-hop aggregation of RGNN (Algorithms 1-2):
//
//     y[i, :] = a[i] * ( sum_{j in N(i)} b[j] * x[j, :]  +  [self_loop] b[i] * x[i, :] )
//
// i.e. y = diag(a) (A [+ I]) diag(b) x.  Mean / add / GCN normalisation and node masks are
// all expressed through a and b (ldpfast/ops.py), and the backward pass is the same kernel
// on A^T with a and b swapped.  Row-parallel over CSR; each output row is written by one
// thread in a fixed order, so results are identical for any thread count.
#include "buffers.h"
#include "parallel.h"

namespace ldp {

// Accumulates a block of up to BLK features of one output row in a local array (kept in
// registers / L1, no aliasing with x), then stores it: the order of additions per element is
// the same as a plain loop, so results do not change with the blocking.
template <class T, class C>
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
static void spmm_rows(int64_t b, int64_t e, const int64_t* __restrict__ rp, const C* __restrict__ col,
                      const T* __restrict__ a, const T* __restrict__ bs, const T* __restrict__ x,
                      T* __restrict__ y, int64_t d, bool self_loop) {
    constexpr int64_t BLK = 64;
    T acc[BLK];
    for (int64_t i = b; i < e; ++i) {
        for (int64_t f0 = 0; f0 < d; f0 += BLK) {
            const int64_t nf = d - f0 < BLK ? d - f0 : BLK;
            for (int64_t f = 0; f < nf; ++f) acc[f] = 0;
            if (self_loop && bs[i] != 0) {
                const T w = bs[i];
                const T* xi = x + i * d + f0;
                for (int64_t f = 0; f < nf; ++f) acc[f] += w * xi[f];
            }
            for (int64_t k = rp[i]; k < rp[i + 1]; ++k) {
                const int64_t j = (int64_t)col[k];
                const T w = bs[j];
                if (w == 0) continue;
                const T* xj = x + j * d + f0;
                for (int64_t f = 0; f < nf; ++f) acc[f] += w * xj[f];
            }
            const T s = a[i];
            T* yi = y + i * d + f0;
            if (s != 1)
                for (int64_t f = 0; f < nf; ++f) yi[f] = acc[f] * s;
            else
                for (int64_t f = 0; f < nf; ++f) yi[f] = acc[f];
        }
    }
}

template <class T, class C>
static void spmm_t(py::array& rowptr, py::array& col, py::array& a, py::array& bs, py::array& x, py::array& y,
                   bool self_loop) {
    int64_t n = rowptr.size() - 1;
    if (x.ndim() != 2 || y.ndim() != 2) throw std::invalid_argument("x, y: expected 2-D arrays");
    int64_t d = x.shape(1);
    check_size(x, n * d, "x");
    check_size(y, n * d, "y");
    check_size(a, n, "a");
    check_size(bs, n, "b");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const C* c = cdata_ptr<C>(col, "col");
    const T* pa = cdata_ptr<T>(a, "a");
    const T* pb = cdata_ptr<T>(bs, "b");
    const T* px = cdata_ptr<T>(x, "x");
    T* py_ = data_ptr<T>(y, "y", true);
    py::gil_scoped_release nogil;
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) { spmm_rows<T, C>(b, e, rp, c, pa, pb, px, py_, d, self_loop); });
}

static void spmm_scaled(py::array rowptr, py::array col, py::array a, py::array b, py::array x, py::array y,
                        bool self_loop) {
    bool c32 = py::isinstance<carray<int32_t>>(col);
    if (py::isinstance<carray<float>>(x)) {
        if (c32) spmm_t<float, int32_t>(rowptr, col, a, b, x, y, self_loop);
        else spmm_t<float, int64_t>(rowptr, col, a, b, x, y, self_loop);
    } else if (py::isinstance<carray<double>>(x)) {
        if (c32) spmm_t<double, int32_t>(rowptr, col, a, b, x, y, self_loop);
        else spmm_t<double, int64_t>(rowptr, col, a, b, x, y, self_loop);
    } else {
        throw std::invalid_argument("x: expected float32 or float64");
    }
}

void register_propagate(py::module_& m) {
    m.def("spmm_scaled", &spmm_scaled, "y = diag(a) (A [+I]) diag(b) x over CSR (float32/float64)");
}

}  // namespace ldp
