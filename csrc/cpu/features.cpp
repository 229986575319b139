// C++ launchers of the node feature and label randomisers (RGNN GRR / GRR-FS, LPGNN 1-bit /
// multi-bit, label RR) and input checks: std::thread over rows plus the pybind11 entry points.
// The per-cell and per-row bodies, the stream layout and the contract are in
// csrc/common/features.h, shared with the CUDA launchers (csrc/cuda/features.cu); twin:
// ldpfast/_numba/features.py.
#include <algorithm>
#include <vector>

#include "../common/features.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {
namespace {

using namespace feat;

void check_2d(const py::array& a, const char* name) {
    if (a.ndim() != 2) throw std::invalid_argument(std::string(name) + ": expected a 2-D array");
}

void check_same_shape(const py::array& a, const py::array& b, const char* na, const char* nb) {
    if (a.ndim() != b.ndim()) throw std::invalid_argument(std::string(nb) + ": shape differs from " + na);
    for (py::ssize_t i = 0; i < a.ndim(); ++i)
        if (a.shape(i) != b.shape(i)) throw std::invalid_argument(std::string(nb) + ": shape differs from " + na);
}

// Rows per parallel chunk: about 16k elements, so tiny inputs stay single-threaded.
inline int64_t row_chunk(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)); }

// GRR-FS steps run for blocks of PB rows: the column sampling of the whole block is drawn
// first and the sampled input entries are prefetched, so the scattered reads x[i, j] (one
// cache line per sampled entry of a 1 GB matrix) overlap instead of stalling one by one.
constexpr int64_t PB = 16;

template <class I>
void grr_t(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, const uint64_t* seeds) {
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) grr_row<WordStream>(x + i * d, out + i * d, d, k, T, seeds[i], 0);
    }, row_chunk(d));
}

template <class I>
void grr_fs_t(const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T, int64_t m,
              const uint64_t* seeds) {
    const FsFlags f = fs_flags(k, d);
    const bool all = (m == d);
    const bool dense = m * (int64_t)sizeof(I) * 2 >= 64 && m * 8 >= d;  // ~every line of a row is read
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i0 = b; i0 < e; i0 += PB) {
            const int64_t i1 = std::min(e, i0 + PB);
            if (!all)
                for (int64_t i = i0; i < i1; ++i) {
                    I* o = out + i * d;
                    const I* xr = x + i * d;
                    fs_slots(o, d, k, f, seeds[i], 0);
                    fs_select<WordStream>(o, d, m, seeds[i], 0, [&](int64_t j) {
                        if (!dense) __builtin_prefetch(xr + j, 0, 0);
                    });
                }
            if (dense)  // many sampled entries per row: stream the next block's rows instead
                for (int64_t i = i1; i < std::min(e, i1 + PB); ++i)
                    for (int64_t j = 0; j < d; j += 64 / (int64_t)sizeof(I)) __builtin_prefetch(x + i * d + j, 0, 0);
            for (int64_t i = i0; i < i1; ++i)
                fs_finish<WordStream>(x + i * d, out + i * d, d, m, k, T, f, seeds[i], 0);
        }
    }, row_chunk(d));
}

template <class F>
void onebit_t(const F* x, int8_t* out, int64_t n, int64_t d, double alpha, double beta, uint64_t T_lo,
              double span, const uint64_t* seeds) {
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
            for (int64_t q = 0; 4 * q < d; ++q)
                onebit_block(x + i * d, out + i * d, d, q, alpha, beta, T_lo, span, seeds[i], SUB_ONEBIT, 0);
    }, row_chunk(d));
}

template <class F>
void multibit_t(const F* x, int8_t* out, int64_t n, int64_t d, int64_t m, double alpha, double beta,
                uint64_t T_lo, double span, const uint64_t* seeds) {
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
            multibit_row<WordStream>(x + i * d, out + i * d, d, m, alpha, beta, T_lo, span, seeds[i], 0);
    }, row_chunk(d));
}

template <class I>
void rr_labels_t(const I* y, const bool* mask, I* out, int64_t n, uint64_t c, uint64_t T, const uint64_t* seeds) {
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) out[i] = rr_label(y[i], mask[i], c, T, seeds[i], 0);
    }, 4096);
}

// First flat index (row-major) of a value outside [0, k[col]), or -1.
template <class I>
int64_t check_categorical_t(const I* x, int64_t n, int64_t d, const int64_t* k) {
    std::vector<int64_t> first(std::max(1, get_num_threads()), -1);
    parallel_for(n, [&](int64_t b, int64_t e, int t) {
        for (int64_t i = b; i < e; ++i) {
            const I* xr = x + i * d;
            int bad = 0;  // no early exit, so the row loop vectorises
            for (int64_t j = 0; j < d; ++j) bad |= (int)outside_domain(xr[j], k[j]);
            if (bad) {
                for (int64_t j = 0; j < d; ++j)
                    if (outside_domain(xr[j], k[j])) {
                        first[t] = i * d + j;
                        return;
                    }
            }
        }
    }, row_chunk(d));
    for (int64_t v : first)
        if (v >= 0) return v;  // chunks are in row order, so the first hit is the smallest
    return -1;
}

// First flat index of a value that is NaN or outside [alpha, beta], or -1.
template <class F>
int64_t check_range_t(const F* x, int64_t N, double alpha, double beta) {
    std::vector<int64_t> first(std::max(1, get_num_threads()), -1);
    parallel_for(N, [&](int64_t b, int64_t e, int t) {
        const int64_t BLK = 4096;
        for (int64_t s = b; s < e; s += BLK) {
            int64_t se = std::min(e, s + BLK);
            int bad = 0;  // no early exit, so the loop vectorises
            for (int64_t i = s; i < se; ++i) bad |= (int)outside_range(x[i], alpha, beta);
            if (bad) {
                for (int64_t i = s; i < se; ++i)
                    if (outside_range(x[i], alpha, beta)) {
                        first[t] = i;
                        return;
                    }
            }
        }
    }, 1 << 16);
    for (int64_t v : first)
        if (v >= 0) return v;
    return -1;
}

// ---------------------------------------------------------------------------------------
// Python entry points.

struct Cat {
    int64_t n, d;
    const int64_t* k;
    const uint64_t* T;
};

// The per-row report seeds (ldpfast/privacy/users.py): uint64 (n,) (or int64 holding the same
// bits, as torch stores them), row i's streams keyed by seeds[i].
const uint64_t* seeds_of(const py::array& seeds, int64_t n) {
    check_size(seeds, n, "seeds");
    if (py::isinstance<carray<int64_t>>(seeds))
        return reinterpret_cast<const uint64_t*>(cdata_ptr<int64_t>(seeds, "seeds"));
    return cdata_ptr<uint64_t>(seeds, "seeds");
}

Cat cat_args(py::array& x, py::array& out, py::array& k, py::array& T) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    Cat c{x.shape(0), x.shape(1), cdata_ptr<int64_t>(k, "k"), cdata_ptr<uint64_t>(T, "thresholds")};
    check_size(k, c.d, "k");
    check_size(T, c.d, "thresholds");
    for (int64_t j = 0; j < c.d; ++j) {
        if (c.k[j] < 1 || c.k[j] > (int64_t(1) << 31))
            throw std::invalid_argument("k: domain sizes must lie in [1, 2^31]");
        if (c.T[j] > (uint64_t(1) << 32)) throw std::invalid_argument("thresholds: must be <= 2^32");
    }
    return c;
}

void grr(py::array x, py::array k, py::array T, py::array seeds, py::array out) {
    Cat c = cat_args(x, out, k, T);
    const uint64_t* sp = seeds_of(seeds, c.n);
    with_index(x, "x", [&](auto xp) {
        auto* op = like_index<index_t<decltype(xp)>>(out, "out");
        py::gil_scoped_release nogil;
        grr_t(xp, op, c.n, c.d, c.k, c.T, sp);
    });
}

void grr_fs(py::array x, py::array k, py::array T, int64_t m, py::array seeds, py::array out) {
    Cat c = cat_args(x, out, k, T);
    const uint64_t* sp = seeds_of(seeds, c.n);
    if (m < 1 || m > c.d) throw std::invalid_argument("m: expected an int in [1, d]");
    with_index(x, "x", [&](auto xp) {
        auto* op = like_index<index_t<decltype(xp)>>(out, "out");
        py::gil_scoped_release nogil;
        grr_fs_t(xp, op, c.n, c.d, c.k, c.T, m, sp);
    });
}

void check_onebit_args(double alpha, double beta, uint64_t T_lo, double span) {
    if (!(alpha < beta)) throw std::invalid_argument("alpha, beta: expected alpha < beta");
    if (T_lo < 1 || T_lo > (uint64_t(1) << 31) || !(span >= 0.0) ||
        (double)T_lo * 2.0 + span > 4294967296.0)
        throw std::invalid_argument("t_lo, span: expected 1 <= t_lo <= 2^31 and 2 t_lo + span <= 2^32");
}

void onebit(py::array x, double alpha, double beta, uint64_t T_lo, double span, py::array seeds, py::array out) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    check_onebit_args(alpha, beta, T_lo, span);
    int8_t* op = data_ptr<int8_t>(out, "out", true);
    int64_t n = x.shape(0), d = x.shape(1);
    const uint64_t* sp = seeds_of(seeds, n);
    if (py::isinstance<carray<float>>(x)) {
        const float* xp = cdata_ptr<float>(x, "x");
        py::gil_scoped_release nogil;
        onebit_t(xp, op, n, d, alpha, beta, T_lo, span, sp);
    } else {
        const double* xp = cdata_ptr<double>(x, "x");
        py::gil_scoped_release nogil;
        onebit_t(xp, op, n, d, alpha, beta, T_lo, span, sp);
    }
}

void multibit_encode(py::array x, int64_t m, double alpha, double beta, uint64_t T_lo, double span, py::array seeds,
                     py::array out) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    check_onebit_args(alpha, beta, T_lo, span);
    int64_t n = x.shape(0), d = x.shape(1);
    if (m < 1 || m > d) throw std::invalid_argument("m: expected an int in [1, d]");
    int8_t* op = data_ptr<int8_t>(out, "out", true);
    const uint64_t* sp = seeds_of(seeds, n);
    if (py::isinstance<carray<float>>(x)) {
        const float* xp = cdata_ptr<float>(x, "x");
        py::gil_scoped_release nogil;
        multibit_t(xp, op, n, d, m, alpha, beta, T_lo, span, sp);
    } else {
        const double* xp = cdata_ptr<double>(x, "x");
        py::gil_scoped_release nogil;
        multibit_t(xp, op, n, d, m, alpha, beta, T_lo, span, sp);
    }
}

void rr_labels(py::array y, py::array mask, int64_t c, uint64_t T, py::array seeds, py::array out) {
    if (y.ndim() != 1) throw std::invalid_argument("y: expected a 1-D array");
    check_same_shape(y, out, "y", "out");
    int64_t n = y.shape(0);
    check_size(mask, n, "mask");
    if (c < 1 || c > (int64_t(1) << 31)) throw std::invalid_argument("num_classes: expected an int in [1, 2^31]");
    if (T > (uint64_t(1) << 32)) throw std::invalid_argument("threshold: must be <= 2^32");
    const bool* mp = cdata_ptr<bool>(mask, "mask");
    const uint64_t* sp = seeds_of(seeds, n);
    with_index(y, "y", [&](auto yp) {
        auto* op = like_index<index_t<decltype(yp)>>(out, "out");
        py::gil_scoped_release nogil;
        rr_labels_t(yp, mp, op, n, (uint64_t)c, T, sp);
    });
}

int64_t check_categorical(py::array x, py::array k) {
    check_2d(x, "x");
    int64_t n = x.shape(0), d = x.shape(1);
    check_size(k, d, "k");
    const int64_t* kp = cdata_ptr<int64_t>(k, "k");
    return with_index(x, "x", [&](auto xp) {
        py::gil_scoped_release nogil;
        return check_categorical_t(xp, n, d, kp);
    });
}

int64_t check_range(py::array x, double alpha, double beta) {
    int64_t N = x.size();
    if (py::isinstance<carray<float>>(x)) {
        const float* xp = cdata_ptr<float>(x, "x");
        py::gil_scoped_release nogil;
        return check_range_t(xp, N, alpha, beta);
    }
    const double* xp = cdata_ptr<double>(x, "x");
    py::gil_scoped_release nogil;
    return check_range_t(xp, N, alpha, beta);
}

}  // namespace

void register_features(py::module_& m) {
    m.def("grr", &grr, "GRR on every entry of an (n, d) int32/int64 matrix, in place into out",
          py::arg("x"), py::arg("k"), py::arg("thresholds"), py::arg("seeds"), py::arg("out"));
    m.def("grr_fs", &grr_fs, "GRR-FS (RGNN eq. 4): m of d columns GRR, the rest uniform",
          py::arg("x"), py::arg("k"), py::arg("thresholds"), py::arg("m"), py::arg("seeds"), py::arg("out"));
    m.def("onebit", &onebit, "1-bit mechanism on every entry of a float32/float64 matrix -> int8 {-1, 1}",
          py::arg("x"), py::arg("alpha"), py::arg("beta"), py::arg("t_lo"), py::arg("span"), py::arg("seeds"),
          py::arg("out"));
    m.def("multibit_encode", &multibit_encode, "LPGNN multi-bit encoder (Algorithm 1) -> int8 {-1, 0, 1}",
          py::arg("x"), py::arg("m"), py::arg("alpha"), py::arg("beta"), py::arg("t_lo"), py::arg("span"),
          py::arg("seeds"), py::arg("out"));
    m.def("rr_labels", &rr_labels, "Randomized response on labels where mask is true (LPGNN eq. 11)",
          py::arg("y"), py::arg("mask"), py::arg("num_classes"), py::arg("threshold"), py::arg("seeds"),
          py::arg("out"));
    m.def("check_categorical", &check_categorical, "First flat index with x outside [0, k[col]) or -1",
          py::arg("x"), py::arg("k"));
    m.def("check_range", &check_range, "First flat index with x NaN or outside [alpha, beta] or -1",
          py::arg("x"), py::arg("alpha"), py::arg("beta"));
}

}  // namespace ldp
