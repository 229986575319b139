// CSR construction in O(|E| + n): counting sort of COO edges by source, then a per-row
// sort + unique (rows are short on average; std::sort per row is O(d log d)).  rowptr is
// always int64 so graphs with more than 2^31 edges work; col is int32 or int64.
//
// Weighted graphs carry a value array through every step: the counting sort moves it with
// its column, sort + unique sums the values of repeated entries in their original order
// (as torch's coalesce()), and the transpose returns the permutation that reorders them.
// The Numba twin (ldpfast/_numba/graph.py) sums in the same order, so both give the same
// bits.
#include <algorithm>
#include <numeric>
#include <vector>

#include "buffers.h"
#include "parallel.h"
#include "scatter.h"

namespace ldp {

// Stable parallel counting sort, first half.  Items [0, E) are cut into contiguous chunks
// (cuts[t] = first item of chunk t, cuts[nt] = E); each chunk counts its keys, then gets
// its own slice of every bucket, placed after the slices of the chunks before it, so
// emitting each chunk's items in order at start[t][key]++ gives exactly the serial stable
// order whatever the thread count.  Writes rowptr (n + 1); returns the per-chunk cursors.
// key(i) must lie in [0, n) (checked by the caller).
template <class Key>
static std::vector<std::vector<int64_t>> bucket_starts(int64_t n, int64_t* rowptr,
                                                       const std::vector<int64_t>& cuts, Key key) {
    const int nt = (int)cuts.size() - 1;
    std::vector<std::vector<int64_t>> cnt(nt);
    parallel_for(nt, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            cnt[t].assign(n, 0);
            int64_t* c = cnt[t].data();
            for (int64_t i = cuts[t]; i < cuts[t + 1]; ++i) c[key(i)]++;
        }
    }, 1);
    rowptr[0] = 0;  // serial O(nt * n): counts -> starts in place
    for (int64_t r = 0; r < n; ++r) {
        int64_t pos = rowptr[r];
        for (int t = 0; t < nt; ++t) {
            const int64_t c = cnt[t][r];
            cnt[t][r] = pos;
            pos += c;
        }
        rowptr[r + 1] = pos;
    }
    return cnt;
}

// Number of chunks for bucket_starts: the threads, fewer when the per-chunk counters
// (n int64 each) would outweigh the E items.
static int sort_chunks(int64_t E, int64_t n) {
    int64_t nt = get_num_threads();
    nt = std::min<int64_t>(nt, std::max<int64_t>(1, E / std::max<int64_t>(1, 4 * n)));
    if (E < 65536) nt = 1;
    return (int)std::max<int64_t>(1, nt);
}

// rowptr (n+1) and col (E) from src/dst (E each); stable within a row (edge order).
// vin/vout (may be null): values moved with their entries.
template <class I, class C, class V>
static void coo_to_csr_t(const I* src, const I* dst, int64_t E, int64_t n, int64_t* rowptr, C* col,
                         const V* vin, V* vout) {
    const int nt = sort_chunks(E, n);
    std::vector<int64_t> cuts(nt + 1);
    for (int t = 0; t <= nt; ++t) cuts[t] = E * t / nt;
    // Range check first (parallel), so the sort can index without checks; and whether src is
    // already in order (then the one-step scatter writes sequentially and is the faster one).
    std::vector<char> bad(nt, 0), unsorted(nt, 0);
    parallel_for(nt, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            int64_t prev = cuts[t] > 0 ? (int64_t)src[cuts[t] - 1] : 0;
            bool down = false;
            for (int64_t i = cuts[t]; i < cuts[t + 1]; ++i) {
                const int64_t s = (int64_t)src[i], d = (int64_t)dst[i];
                if (s < 0 || s >= n || d < 0 || d >= n) {
                    bad[t] = 1;
                    break;
                }
                down |= s < prev;
                prev = s;
            }
            unsorted[t] = down;
        }
    }, 1);
    for (char f : bad)
        if (f) throw std::out_of_range("edge_index: node id outside [0, num_nodes)");
    auto start = bucket_starts(n, rowptr, cuts, [&](int64_t e) { return (int64_t)src[e]; });
    const bool in_order = std::none_of(unsorted.begin(), unsorted.end(), [](char u) { return u != 0; });
    if (!vin && !in_order && n <= ((int64_t)1 << 32)) {  // no values to carry: two steps (scatter.h)
        two_step_scatter(n, rowptr, start, col, [&](int64_t t, auto push) {
            for (int64_t i = cuts[t]; i < cuts[t + 1]; ++i) push((int64_t)src[i], (uint32_t)dst[i]);
        });
        return;
    }
    parallel_for(nt, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            int64_t* c = start[t].data();
            for (int64_t i = cuts[t]; i < cuts[t + 1]; ++i) {
                const int64_t p = c[(int64_t)src[i]]++;
                col[p] = (C)dst[i];
                if (vin) vout[p] = vin[i];
            }
        }
    }, 1);
}

// Calls f with typed (const V* in, V* out) value pointers (float32 / float64), or with
// (nullptr, nullptr) of type double when both are None.
template <class F>
static void with_values(py::object vin, py::object vout, int64_t E, F&& f) {
    if (vin.is_none() != vout.is_none()) throw std::invalid_argument("val_in, val_out: pass both or neither");
    if (vin.is_none()) return f((const double*)nullptr, (double*)nullptr);
    py::array ai = vin, ao = vout;
    check_size(ai, E, "val_in");
    check_size(ao, E, "val_out");
    if (py::isinstance<carray<float>>(ai))
        return f(cdata_ptr<float>(ai, "val_in"), data_ptr<float>(ao, "val_out", true));
    return f(cdata_ptr<double>(ai, "val_in"), data_ptr<double>(ao, "val_out", true));
}

static void coo_to_csr(py::array src, py::array dst, int64_t n, py::array rowptr, py::array col,
                       py::object val_in, py::object val_out) {
    int64_t E = src.size();
    check_size(dst, E, "dst");
    check_size(rowptr, n + 1, "rowptr");
    check_size(col, E, "col");
    int64_t* rp = data_ptr<int64_t>(rowptr, "rowptr", true);
    const int64_t* s = cdata_ptr<int64_t>(src, "src");
    const int64_t* d = cdata_ptr<int64_t>(dst, "dst");
    with_values(val_in, val_out, E, [&](auto vi, auto vo) {
        with_index_mut(col, "col", [&](auto c) {
            py::gil_scoped_release nogil;
            coo_to_csr_t(s, d, E, n, rp, c, vi, vo);
        });
    });
}

// Compacts the kept prefix of every row to the front (memmove left, order preserved) and
// rewrites rowptr; O(|E|), serial.  keep[i + 1] = entries kept in row i.
template <class C, class V>
static int64_t compact_rows(int64_t n, int64_t* rp, C* col, V* val, const std::vector<int64_t>& keep) {
    int64_t out = 0;
    for (int64_t i = 0; i < n; ++i) {
        int64_t b = rp[i], k = keep[i + 1];
        if (out != b) {
            std::copy(col + b, col + b + k, col + out);
            if (val) std::copy(val + b, val + b + k, val + out);
        }
        rp[i] = out;
        out += k;
    }
    rp[n] = out;
    return out;
}

// In place: sort each row, drop duplicates (and self loops if asked), compact.  Returns
// the new number of entries; rowptr is rewritten.
template <class C>
static int64_t csr_sort_unique_t(int64_t n, int64_t* rp, C* col, bool drop_self) {
    std::vector<int64_t> keep(n + 1, 0);
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            C* lo = col + rp[i];
            C* hi = col + rp[i + 1];
            std::sort(lo, hi);
            C* w = lo;
            for (C* r = lo; r < hi; ++r) {
                if (drop_self && (int64_t)*r == i) continue;
                if (w != lo && *(w - 1) == *r) continue;
                *w++ = *r;
            }
            keep[i + 1] = w - lo;
        }
    });
    return compact_rows(n, rp, col, (double*)nullptr, keep);
}

// Weighted version: entries of a row are ordered by (column, original position), repeated
// columns become one entry whose value is the sum of theirs in original order.
template <class C, class V>
static int64_t csr_sort_unique_w(int64_t n, int64_t* rp, C* col, V* val, bool drop_self) {
    std::vector<int64_t> keep(n + 1, 0);
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        std::vector<std::pair<C, int64_t>> ord;
        std::vector<V> v;
        for (int64_t i = b; i < e; ++i) {
            const int64_t lo = rp[i], len = rp[i + 1] - lo;
            ord.resize(len);
            v.assign(val + lo, val + lo + len);
            for (int64_t k = 0; k < len; ++k) ord[k] = {col[lo + k], k};
            std::sort(ord.begin(), ord.end());
            int64_t w = 0;
            for (int64_t k = 0; k < len; ++k) {
                const C c = ord[k].first;
                if (drop_self && (int64_t)c == i) continue;
                if (w > 0 && col[lo + w - 1] == c) {
                    val[lo + w - 1] += v[ord[k].second];
                    continue;
                }
                col[lo + w] = c;
                val[lo + w] = v[ord[k].second];
                ++w;
            }
            keep[i + 1] = w;
        }
    });
    return compact_rows(n, rp, col, val, keep);
}

static int64_t csr_sort_unique(py::array rowptr, py::array col, bool drop_self, py::object val) {
    int64_t n = rowptr.size() - 1;
    int64_t* rp = data_ptr<int64_t>(rowptr, "rowptr", true);
    return with_index_mut(col, "col", [&](auto c) -> int64_t {
        if (val.is_none()) {
            py::gil_scoped_release nogil;
            return csr_sort_unique_t(n, rp, c, drop_self);
        }
        py::array va = val;
        check_size(va, col.size(), "val");
        if (py::isinstance<carray<float>>(va)) {
            float* pv = data_ptr<float>(va, "val", true);
            py::gil_scoped_release nogil;
            return csr_sort_unique_w(n, rp, c, pv, drop_self);
        }
        double* pv = data_ptr<double>(va, "val", true);
        py::gil_scoped_release nogil;
        return csr_sort_unique_w(n, rp, c, pv, drop_self);
    });
}

// CSR of A^T in O(|E| + n) (counting sort by column; sources are visited in order, so the
// rows come out sorted).  perm (may be null): perm[q] = position in A of entry q of A^T,
// so the values of A^T are val[perm].  Chunks are whole rows of A (balanced by entries).
template <class C>
static void transpose_perm_t(int64_t n, const int64_t* rp, const C* col, int64_t* orp, C* oc, int64_t* perm) {
    const int64_t E = rp[n];
    const int nt = sort_chunks(E, n);
    std::vector<int64_t> rcut(nt + 1, n), cuts(nt + 1, E);
    rcut[0] = 0;
    cuts[0] = 0;
    for (int t = 1; t < nt; ++t) {
        rcut[t] = std::lower_bound(rp, rp + n, E * t / nt) - rp;
        cuts[t] = rp[rcut[t]];
    }
    std::vector<char> bad(nt, 0);
    parallel_for(nt, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t)
            for (int64_t k = cuts[t]; k < cuts[t + 1]; ++k)
                if ((int64_t)col[k] < 0 || (int64_t)col[k] >= n) {
                    bad[t] = 1;
                    break;
                }
    }, 1);
    for (char f : bad)
        if (f) throw std::out_of_range("col: node id outside [0, num_nodes)");
    auto start = bucket_starts(n, orp, cuts, [&](int64_t k) { return (int64_t)col[k]; });
    if (!perm && n <= ((int64_t)1 << 32)) {  // no values to carry: two steps (scatter.h)
        two_step_scatter(n, orp, start, oc, [&](int64_t t, auto push) {
            for (int64_t i = rcut[t]; i < rcut[t + 1]; ++i)
                for (int64_t k = rp[i]; k < rp[i + 1]; ++k) push((int64_t)col[k], (uint32_t)i);
        });
        return;
    }
    parallel_for(nt, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            int64_t* c = start[t].data();
            for (int64_t i = rcut[t]; i < rcut[t + 1]; ++i)
                for (int64_t k = rp[i]; k < rp[i + 1]; ++k) {
                    const int64_t q = c[(int64_t)col[k]]++;
                    oc[q] = (C)i;
                    if (perm) perm[q] = k;
                }
        }
    }, 1);
}

static void csr_transpose_perm(py::array rowptr, py::array col, py::array out_rowptr, py::array out_col,
                               py::object out_perm) {
    int64_t n = rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    check_size(out_col, col.size(), "out_col");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    if (rp[n] != (int64_t)col.size()) throw std::invalid_argument("rowptr: last entry must equal len(col)");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    int64_t* perm = nullptr;
    py::array pa;
    if (!out_perm.is_none()) {
        pa = out_perm;
        check_size(pa, col.size(), "out_perm");
        perm = data_ptr<int64_t>(pa, "out_perm", true);
    }
    with_index(col, "col", [&](auto c) {
        auto* oc = like_index<index_t<decltype(c)>>(out_col, "out_col");
        py::gil_scoped_release nogil;
        transpose_perm_t(n, rp, c, orp, oc, perm);
    });
}

void register_graph(py::module_& m) {
    m.def("coo_to_csr", &coo_to_csr,
          "Counting-sort COO (int64 src, dst) into CSR (int64 rowptr, int32/int64 col); values moved along",
          py::arg("src"), py::arg("dst"), py::arg("n"), py::arg("rowptr"), py::arg("col"),
          py::arg("val_in") = py::none(), py::arg("val_out") = py::none());
    m.def("csr_sort_unique", &csr_sort_unique,
          "Sort rows, drop duplicates (summing values) / self loops in place; returns nnz",
          py::arg("rowptr"), py::arg("col"), py::arg("drop_self"), py::arg("val") = py::none());
    m.def("csr_transpose_perm", &csr_transpose_perm,
          "CSR transpose, O(|E| + n), sorted rows; optional permutation of the values",
          py::arg("rowptr"), py::arg("col"), py::arg("out_rowptr"), py::arg("out_col"),
          py::arg("out_perm") = py::none());
}

}  // namespace ldp
