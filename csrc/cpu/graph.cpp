// CSR construction in O(|E| + n): counting sort of COO edges by source, then a per-row
// sort + unique (rows are short on average; std::sort per row is O(d log d)).  rowptr is
// always int64 so graphs with more than 2^31 edges work; col is int32 or int64.
#include <algorithm>
#include <numeric>

#include "buffers.h"
#include "parallel.h"

namespace ldp {

// rowptr (n+1) and col (E) from src/dst (E each); stable within a row (edge order).
template <class I, class C>
static void coo_to_csr_t(const I* src, const I* dst, int64_t E, int64_t n, int64_t* rowptr, C* col) {
    std::fill(rowptr, rowptr + n + 1, 0);
    for (int64_t e = 0; e < E; ++e) {
        int64_t s = (int64_t)src[e], d = (int64_t)dst[e];
        if (s < 0 || s >= n || d < 0 || d >= n) throw std::out_of_range("edge_index: node id outside [0, num_nodes)");
        rowptr[s + 1]++;
    }
    for (int64_t i = 0; i < n; ++i) rowptr[i + 1] += rowptr[i];
    std::vector<int64_t> fill(rowptr, rowptr + n);
    for (int64_t e = 0; e < E; ++e) col[fill[(int64_t)src[e]]++] = (C)dst[e];
}

static void coo_to_csr(py::array src, py::array dst, int64_t n, py::array rowptr, py::array col) {
    int64_t E = src.size();
    check_size(dst, E, "dst");
    check_size(rowptr, n + 1, "rowptr");
    check_size(col, E, "col");
    int64_t* rp = data_ptr<int64_t>(rowptr, "rowptr", true);
    const int64_t* s = cdata_ptr<int64_t>(src, "src");
    const int64_t* d = cdata_ptr<int64_t>(dst, "dst");
    with_index_mut(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        coo_to_csr_t(s, d, E, n, rp, c);
    });
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
    // Compact serially (memmove left, order preserved); O(|E|).
    int64_t out = 0;
    for (int64_t i = 0; i < n; ++i) {
        int64_t b = rp[i], k = keep[i + 1];
        if (out != b) std::copy(col + b, col + b + k, col + out);
        rp[i] = out;
        out += k;
    }
    rp[n] = out;
    return out;
}

static int64_t csr_sort_unique(py::array rowptr, py::array col, bool drop_self) {
    int64_t n = rowptr.size() - 1;
    int64_t* rp = data_ptr<int64_t>(rowptr, "rowptr", true);
    return with_index_mut(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        return csr_sort_unique_t(n, rp, c, drop_self);
    });
}

void register_graph(py::module_& m) {
    m.def("coo_to_csr", &coo_to_csr, "Counting-sort COO (int64 src, dst) into CSR (int64 rowptr, int32/int64 col)");
    m.def("csr_sort_unique", &csr_sort_unique, "Sort rows, drop duplicates / self loops in place; returns nnz");
}

}  // namespace ldp
