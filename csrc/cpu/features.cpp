// C++ launchers of the node feature and label randomisers (RGNN GRR / GRR-FS, LPGNN 1-bit /
// multi-bit, label RR) and input checks: std::thread over rows plus the pybind11 entry points.
// One pass over the input: each block of rows is read once for its per-user seeds (rowkeys.h),
// then checked and randomised from cache; the first bad index is returned, as by the CUDA kernels.
// The per-cell and per-row bodies, the stream layout and the contract are in
// csrc/common/features.h, shared with the CUDA launchers (csrc/cuda/features.cu); twin:
// ldpfast/_numba/features.py.
#include <algorithm>
#include <vector>

#include "../common/features.h"
#include "buffers.h"
#include "parallel.h"
#include "rowkeys.h"

namespace ldp {
namespace {

using namespace feat;
using rowkeys::RowSeeds;
using rowkeys::derive_seeds;

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

// Rows per block of the keyed pass: the block's rows are digested (read from memory), then
// checked and randomised from cache (16 rows of 128 int64: 16 KiB, inside L1d).
inline int64_t row_block(int64_t row_bytes) {
    return std::max<int64_t>(1, std::min<int64_t>(rowkeys::MAX_ROWS, 16384 / std::max<int64_t>(1, row_bytes)));
}

// The first column of row xr outside its domain, or -1.  The scan has no early exit and no
// unsigned 64-bit compare (none in SSE2), so it vectorises: for k in [1, 2^31] (cat_args), x is
// outside [0, k) iff x >> 31 != 0 (negative or >= 2^31) or k - 1 - x < 0 (outside_domain's test).
template <class I>
inline int64_t first_outside_domain(const I* xr, int64_t d, const int64_t* k) {
    uint64_t bad = 0;
    for (int64_t j = 0; j < d; ++j) {
        const uint64_t v = (uint64_t)(int64_t)xr[j];
        bad |= (v >> 31) | ((uint64_t)(k[j] - 1) - v) >> 63;
    }
    if (bad)
        for (int64_t j = 0; j < d; ++j)
            if (outside_domain(xr[j], k[j])) return j;
    return -1;
}

// The first column of row xr that is NaN or outside [alpha, beta], or -1.
template <class F>
inline int64_t first_outside_range(const F* xr, int64_t d, double alpha, double beta) {
    int bad = 0;
    for (int64_t j = 0; j < d; ++j) bad |= (int)outside_range(xr[j], alpha, beta);
    if (bad)
        for (int64_t j = 0; j < d; ++j)
            if (outside_range(xr[j], alpha, beta)) return j;
    return -1;
}

// One pass over rows [b, e) of an (n, d) input (row_bytes each), block by block: the block's
// seeds (rowkeys::derive_seeds: given, or derived from the rows' bytes, which then stay in cache),
// the input check of each row (first(i): its first bad column, or -1) until one fails, then
// body(i0, i1, seeds).  Returns the flat index of the first bad value, or -1.  The bodies stay
// defined on bad values (and are run on them, as the CUDA kernels do: the caller drops the output).
template <class First, class Body>
__attribute__((always_inline)) inline int64_t keyed_pass(const RowSeeds& S, const void* x, int64_t d, int64_t b,
                                                         int64_t e, First first, Body body) {
    uint64_t seeds[rowkeys::MAX_ROWS];
    const int64_t RB = row_block(S.nbytes);
    int64_t bad = -1;
    for (int64_t i0 = b; i0 < e; i0 += RB) {
        const int64_t i1 = std::min(e, i0 + RB);
        derive_seeds(S, (const uint8_t*)x, i0, i1, seeds);
        for (int64_t i = i0; i < i1 && bad < 0; ++i) {
            const int64_t j = first(i);
            if (j >= 0) bad = i * d + j;
        }
        body(i0, i1, seeds);
    }
    return bad;
}

// chunk(b, e) over [0, n) on the worker threads; the smallest flat index a chunk returned, or -1
// (chunks are in row order, so the first hit is the smallest).
template <class Chunk>
int64_t run_chunks(int64_t n, int64_t min_chunk, Chunk chunk) {
    std::vector<int64_t> first(std::max(1, get_num_threads()), -1);
    parallel_for(n, [&](int64_t b, int64_t e, int t) { first[t] = chunk(b, e); }, min_chunk);
    for (int64_t v : first)
        if (v >= 0) return v;
    return -1;
}

template <class I>
static int64_t grr_chunk(const RowSeeds& S, const I* x, I* out, int64_t d, const int64_t* k,
                                    const uint64_t* T, int64_t b, int64_t e) {
    return keyed_pass(S, x, d, b, e, [&](int64_t i) { return first_outside_domain(x + i * d, d, k); },
                      [&](int64_t i0, int64_t i1, const uint64_t* seeds) {
                          for (int64_t i = i0; i < i1; ++i)
                              grr_row<WordStream>(x + i * d, out + i * d, d, k, T, seeds[i - i0], 0);
                      });
}

template <class I>
int64_t grr_t(const RowSeeds& S, const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T) {
    return run_chunks(n, row_chunk(d), [&](int64_t b, int64_t e) { return grr_chunk(S, x, out, d, k, T, b, e); });
}

// GRR-FS: each step of fs_slots / fs_select / fs_finish runs for the whole checked block before
// the next (the block's rows are in cache since its digest).
template <class I>
static int64_t grr_fs_chunk(const RowSeeds& S, const I* x, I* out, int64_t d, const int64_t* k,
                                       const uint64_t* T, int64_t m, FsFlags f, int64_t b, int64_t e) {
    return keyed_pass(S, x, d, b, e, [&](int64_t i) { return first_outside_domain(x + i * d, d, k); },
                      [&](int64_t i0, int64_t i1, const uint64_t* seeds) {
                          if (m != d)
                              for (int64_t i = i0; i < i1; ++i) {
                                  fs_slots(out + i * d, d, k, f, seeds[i - i0], 0);
                                  fs_select<WordStream>(out + i * d, d, m, seeds[i - i0], 0, [](int64_t) {});
                              }
                          for (int64_t i = i0; i < i1; ++i)
                              fs_finish<WordStream>(x + i * d, out + i * d, d, m, k, T, f, seeds[i - i0], 0);
                      });
}

template <class I>
int64_t grr_fs_t(const RowSeeds& S, const I* x, I* out, int64_t n, int64_t d, const int64_t* k, const uint64_t* T,
                 int64_t m) {
    const FsFlags f = fs_flags(k, d);
    return run_chunks(n, row_chunk(d),
                      [&](int64_t b, int64_t e) { return grr_fs_chunk(S, x, out, d, k, T, m, f, b, e); });
}

template <class F>
static int64_t onebit_chunk(const RowSeeds& S, const F* x, int8_t* out, int64_t d, double alpha,
                                       double beta, uint64_t T_lo, double span, int64_t b, int64_t e) {
    return keyed_pass(S, x, d, b, e, [&](int64_t i) { return first_outside_range(x + i * d, d, alpha, beta); },
                      [&](int64_t i0, int64_t i1, const uint64_t* seeds) {
                          for (int64_t i = i0; i < i1; ++i)
                              for (int64_t q = 0; 4 * q < d; ++q)
                                  onebit_block(x + i * d, out + i * d, d, q, alpha, beta, T_lo, span, seeds[i - i0],
                                               SUB_ONEBIT, 0);
                      });
}

template <class F>
int64_t onebit_t(const RowSeeds& S, const F* x, int8_t* out, int64_t n, int64_t d, double alpha, double beta,
                 uint64_t T_lo, double span) {
    return run_chunks(n, row_chunk(d), [&](int64_t b, int64_t e) {
        return onebit_chunk(S, x, out, d, alpha, beta, T_lo, span, b, e);
    });
}

template <class F>
static int64_t multibit_chunk(const RowSeeds& S, const F* x, int8_t* out, int64_t d, int64_t m,
                                         double alpha, double beta, uint64_t T_lo, double span, int64_t b,
                                         int64_t e) {
    return keyed_pass(S, x, d, b, e, [&](int64_t i) { return first_outside_range(x + i * d, d, alpha, beta); },
                      [&](int64_t i0, int64_t i1, const uint64_t* seeds) {
                          for (int64_t i = i0; i < i1; ++i)
                              multibit_row<WordStream>(x + i * d, out + i * d, d, m, alpha, beta, T_lo, span,
                                                       seeds[i - i0], 0);
                      });
}

template <class F>
int64_t multibit_t(const RowSeeds& S, const F* x, int8_t* out, int64_t n, int64_t d, int64_t m, double alpha,
                   double beta, uint64_t T_lo, double span) {
    return run_chunks(n, row_chunk(d), [&](int64_t b, int64_t e) {
        return multibit_chunk(S, x, out, d, m, alpha, beta, T_lo, span, b, e);
    });
}

// Labels: a row is one label (its bytes digested), checked only where the mask randomises it.
template <class I>
int64_t rr_labels_t(const RowSeeds& S, const I* y, const bool* mask, I* out, int64_t n, uint64_t c, uint64_t T) {
    return run_chunks(n, 4096, [&](int64_t b, int64_t e) {
        return keyed_pass(S, y, 1, b, e,
                          [&](int64_t i) -> int64_t { return mask[i] && outside_domain(y[i], (int64_t)c) ? 0 : -1; },
                          [&](int64_t i0, int64_t i1, const uint64_t* seeds) {
                              for (int64_t i = i0; i < i1; ++i) out[i] = rr_label(y[i], mask[i], c, T, seeds[i - i0], 0);
                          });
    });
}

// First flat index (row-major) of a value outside [0, k[col]), or -1.
template <class I>
int64_t check_categorical_t(const I* x, int64_t n, int64_t d, const int64_t* k) {
    return run_chunks(n, row_chunk(d), [&](int64_t b, int64_t e) -> int64_t {
        for (int64_t i = b; i < e; ++i) {
            const int64_t j = first_outside_domain(x + i * d, d, k);
            if (j >= 0) return i * d + j;
        }
        return -1;
    });
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

// The seeds argument of a mechanism (ldpfast/privacy/users.py): an array of n given per-row
// seeds (uint64, or int64 holding the same bits, as torch stores them), or the release's keys as
// the tuple (ukeys, extra or None, k_nh, k_pad, k_prf, k_a, k_b, k_c, seeds_out, rids or None)
// (int64 arrays of n; ldpfast/mechanisms/features.py _cpu_row_keys): the kernel derives each
// row's seed from its bytes in its own pass (rowkeys.h) and writes it to seeds_out, and the
// report id to rids if given.
uk::RowKeys row_keys_of(const py::object& seeds, int64_t n) {
    uk::RowKeys rk{};
    if (!py::isinstance<py::tuple>(seeds)) {
        py::array a = seeds.cast<py::array>();
        check_size(a, n, "seeds");
        rk.seeds_in = py::isinstance<carray<int64_t>>(a)
                          ? cdata_ptr<int64_t>(a, "seeds")
                          : reinterpret_cast<const int64_t*>(cdata_ptr<uint64_t>(a, "seeds"));
        return rk;  // (the array is the caller's argument: alive for the call)
    }
    py::tuple t = seeds.cast<py::tuple>();
    if (t.size() != 10) throw std::invalid_argument("seeds: expected an array or a tuple of 10 row-key fields");
    auto arr = [&](int f, const char* name, bool out) -> int64_t* {
        if (t[f].is_none()) {
            if (f == 1 || f == 9) return nullptr;  // extra, rids: optional
            throw std::invalid_argument(std::string(name) + ": required");
        }
        py::array a = t[f].cast<py::array>();
        check_size(a, n, name);
        return out ? data_ptr<int64_t>(a, name, true) : const_cast<int64_t*>(cdata_ptr<int64_t>(a, name));
    };
    rk.ukeys = arr(0, "ukeys", false);
    rk.extra = arr(1, "extra", false);
    rk.k_nh = t[2].cast<uint64_t>();
    rk.k_pad = t[3].cast<uint64_t>();
    rk.k_prf = t[4].cast<uint64_t>();
    rk.k_a = t[5].cast<uint64_t>();
    rk.k_b = t[6].cast<uint64_t>();
    rk.k_c = t[7].cast<uint64_t>();
    rk.seeds_out = arr(8, "seeds_out", true);
    rk.rids = arr(9, "rids", true);
    return rk;
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

// The mechanisms return the first flat index of an input value outside its domain or range
// (checked in the same pass), or -1; on a bad index `out` must be discarded.

int64_t grr(py::array x, py::array k, py::array T, py::object seeds, py::array out) {
    Cat c = cat_args(x, out, k, T);
    const uk::RowKeys rk = row_keys_of(seeds, c.n);
    return with_index(x, "x", [&](auto xp) {
        auto* op = like_index<index_t<decltype(xp)>>(out, "out");
        py::gil_scoped_release nogil;
        const RowSeeds S(rk, c.d * (int64_t)sizeof(*xp));
        return grr_t(S, xp, op, c.n, c.d, c.k, c.T);
    });
}

int64_t grr_fs(py::array x, py::array k, py::array T, int64_t m, py::object seeds, py::array out) {
    Cat c = cat_args(x, out, k, T);
    const uk::RowKeys rk = row_keys_of(seeds, c.n);
    if (m < 1 || m > c.d) throw std::invalid_argument("m: expected an int in [1, d]");
    return with_index(x, "x", [&](auto xp) {
        auto* op = like_index<index_t<decltype(xp)>>(out, "out");
        py::gil_scoped_release nogil;
        const RowSeeds S(rk, c.d * (int64_t)sizeof(*xp));
        return grr_fs_t(S, xp, op, c.n, c.d, c.k, c.T, m);
    });
}

void check_onebit_args(double alpha, double beta, uint64_t T_lo, double span) {
    if (!(alpha < beta)) throw std::invalid_argument("alpha, beta: expected alpha < beta");
    if (T_lo < 1 || T_lo > (uint64_t(1) << 31) || !(span >= 0.0) ||
        (double)T_lo * 2.0 + span > 4294967296.0)
        throw std::invalid_argument("t_lo, span: expected 1 <= t_lo <= 2^31 and 2 t_lo + span <= 2^32");
}

// f(typed x pointer) for a float32 / float64 x.
template <class Fn>
int64_t with_float(const py::array& x, Fn&& f) {
    if (py::isinstance<carray<float>>(x)) return f(cdata_ptr<float>(x, "x"));
    return f(cdata_ptr<double>(x, "x"));
}

int64_t onebit(py::array x, double alpha, double beta, uint64_t T_lo, double span, py::object seeds, py::array out) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    check_onebit_args(alpha, beta, T_lo, span);
    int8_t* op = data_ptr<int8_t>(out, "out", true);
    int64_t n = x.shape(0), d = x.shape(1);
    const uk::RowKeys rk = row_keys_of(seeds, n);
    return with_float(x, [&](auto xp) {
        py::gil_scoped_release nogil;
        const RowSeeds S(rk, d * (int64_t)sizeof(*xp));
        return onebit_t(S, xp, op, n, d, alpha, beta, T_lo, span);
    });
}

int64_t multibit_encode(py::array x, int64_t m, double alpha, double beta, uint64_t T_lo, double span,
                        py::object seeds, py::array out) {
    check_2d(x, "x");
    check_same_shape(x, out, "x", "out");
    check_onebit_args(alpha, beta, T_lo, span);
    int64_t n = x.shape(0), d = x.shape(1);
    if (m < 1 || m > d) throw std::invalid_argument("m: expected an int in [1, d]");
    int8_t* op = data_ptr<int8_t>(out, "out", true);
    const uk::RowKeys rk = row_keys_of(seeds, n);
    return with_float(x, [&](auto xp) {
        py::gil_scoped_release nogil;
        const RowSeeds S(rk, d * (int64_t)sizeof(*xp));
        return multibit_t(S, xp, op, n, d, m, alpha, beta, T_lo, span);
    });
}

// Returns the first masked node whose label is outside [0, num_classes), or -1.
int64_t rr_labels(py::array y, py::array mask, int64_t c, uint64_t T, py::object seeds, py::array out) {
    if (y.ndim() != 1) throw std::invalid_argument("y: expected a 1-D array");
    check_same_shape(y, out, "y", "out");
    int64_t n = y.shape(0);
    check_size(mask, n, "mask");
    if (c < 1 || c > (int64_t(1) << 31)) throw std::invalid_argument("num_classes: expected an int in [1, 2^31]");
    if (T > (uint64_t(1) << 32)) throw std::invalid_argument("threshold: must be <= 2^32");
    const bool* mp = cdata_ptr<bool>(mask, "mask");
    const uk::RowKeys rk = row_keys_of(seeds, n);
    return with_index(y, "y", [&](auto yp) {
        auto* op = like_index<index_t<decltype(yp)>>(out, "out");
        py::gil_scoped_release nogil;
        const RowSeeds S(rk, (int64_t)sizeof(*yp));
        return rr_labels_t(S, yp, mp, op, n, (uint64_t)c, T);
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
    // The mechanisms return the first bad flat index of the input, or -1 (see above).
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
