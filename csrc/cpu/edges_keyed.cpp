// C++ launchers of the user-keyed edge randomisers (bodies and the privacy argument in
// csrc/common/edges_keyed.h): std::thread over rows.  keyed_rr_rows draws every row once into a
// buffer per thread and copies the buffers into the prefix-summed CSR; keyed_rr keeps the two-pass
// form of the Numba twin (count the rows' sizes, then fill with the same draws).  Mode 1's 49
// levels' geometric parameters are made once per call and the band test once per row (not per
// row and level, per hit): the same values, so the same bits.  Row i: the kept true edges, then the false-
// edge hits (sorted by key, deduplicated keeping each position's top level, filtered), merged
// and sorted by row index.  Every row depends only on its own cells, so the thread count never
// changes a bit.
#include <algorithm>
#include <utility>
#include <vector>

#include "../common/edges_keyed.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {
namespace {

using namespace keyed;

// Row i's noisy list (row indices, sorted) into out (cleared first).
template <class K, class C>
void keyed_row(const KeyedArgs<K>& A, const GeomParams* level_gp, int64_t i, const C* nb, int64_t d,
               std::vector<std::pair<int64_t, int>>& hits, std::vector<int64_t>& out) {
    out.clear();
    if (A.pub && A.pub[i]) {
        for (int64_t e = 0; e < d; ++e) out.push_back((int64_t)nb[e]);
        return;
    }
    for (int64_t e = 0; e < d; ++e)
        if (keep_pair(A, i, (int64_t)nb[e])) out.push_back((int64_t)nb[e]);
    hits.clear();
    const Band band = A.mode == 1 ? band_of(A, i) : Band{0, 0.0};
    false_hits(A, i, level_gp, [&](int64_t k, int L) { hits.emplace_back(k, L); });
    if (A.mode == 1) {  // several fields: by position, the top level first
        std::sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) {
            return a.first != b.first ? a.first < b.first : a.second > b.second;
        });
    }
    for (size_t h = 0; h < hits.size(); ++h) {
        if (h > 0 && hits[h].first == hits[h - 1].first) continue;  // a lower level of a position seen
        const int64_t j = candidate(A, i, nb, d, hits[h].first);
        if (j >= 0 && false_keep(A, i, hits[h].first, hits[h].second, band)) out.push_back(j);
    }
    std::sort(out.begin(), out.end());
}

template <class K, class C, class O>
void keyed_t(const KeyedArgs<K>& A, const int64_t* rp, const C* col, int64_t n, int64_t* orp, O* ocol) {
    GeomParams level_gp[L_TOP + 1];  // mode 1's levels depend on pm alone: once per call, not per row
    if (A.mode == 1) level_params(A.pm, level_gp);
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        std::vector<std::pair<int64_t, int>> hits;
        std::vector<int64_t> row;
        for (int64_t i = b; i < e; ++i) {
            keyed_row(A, level_gp, i, col + rp[i], rp[i + 1] - rp[i], hits, row);
            if (ocol == nullptr) {
                orp[i + 1] = (int64_t)row.size();
            } else {
                if ((int64_t)row.size() != orp[i + 1] - orp[i])
                    throw std::logic_error("keyed_rr: the fill pass drew another row size than the count pass");
                std::copy(row.begin(), row.end(), ocol + orp[i]);
            }
        }
    });
}

// One pass: each thread's rows [b, e) into its own buffer (row sizes into orp[i + 1]); the caller
// prefix-sums orp and copies the buffers (bufs[t] starts at row first[t]).
template <class K, class C>
void keyed_once(const KeyedArgs<K>& A, const int64_t* rp, const C* col, int64_t n, int64_t* orp,
                std::vector<std::vector<int64_t>>& bufs, std::vector<int64_t>& first) {
    GeomParams level_gp[L_TOP + 1];
    if (A.mode == 1) level_params(A.pm, level_gp);
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int t) {
        std::vector<std::pair<int64_t, int>> hits;
        std::vector<int64_t> row, & buf = bufs[t];
        first[t] = b;
        for (int64_t i = b; i < e; ++i) {
            keyed_row(A, level_gp, i, col + rp[i], rp[i + 1] - rp[i], hits, row);
            orp[i + 1] = (int64_t)row.size();
            buf.insert(buf.end(), row.begin(), row.end());
        }
    });
}

KeyedArgs<int64_t> keyed_args(py::array rowptr, py::array keys, py::array row_of_key, py::array seeds, uint32_t st_t,
                              uint32_t st_f, int mode, py::array p_true, py::array p_false, double pm,
                              const py::object& pub, py::array& puba, int64_t row0) {
    const int64_t n = (int64_t)rowptr.size() - 1;
    KeyedArgs<int64_t> A;
    A.keys = cdata_ptr<int64_t>(keys, "keys");
    if ((int64_t)keys.size() < row0 + n) throw std::invalid_argument("keys: expected one key per user of the graph");
    A.row0 = row0;
    A.row_of_key = cdata_ptr<int64_t>(row_of_key, "row_of_key");
    A.S = (int64_t)row_of_key.size();
    A.seeds = cdata_ptr<uint64_t>(seeds, "seeds");
    check_size(seeds, n, "seeds");
    A.st_t = st_t;
    A.st_f = st_f;
    if (mode != 0 && mode != 1) throw std::invalid_argument("mode: expected 0 (RR) or 1 (DPRR)");
    A.mode = mode;
    A.pt = cdata_ptr<double>(p_true, "p_true");
    A.pf = cdata_ptr<double>(p_false, "p_false");
    check_size(p_true, n, "p_true");
    check_size(p_false, n, "p_false");
    A.pm = pm;
    A.pub = nullptr;
    if (!pub.is_none()) {  // puba: the caller's, alive while A is used
        puba = pub.cast<py::array>();
        A.pub = cdata_ptr<uint8_t>(puba, "pub");
        check_size(puba, n, "pub");
    }
    return A;
}

// keyed_rr(rowptr, col, keys, row_of_key, seeds, st_t, st_f, mode, p_true, p_false_or_q, pm, pub,
//          out_rowptr, out_col, row0): out_col None = count pass (out_rowptr[i + 1] = row i's size),
//          else the fill pass into out_col (int64) at the prefix-summed out_rowptr.  The m local
//          rows are rows [row0, row0 + m) of the graph: col, keys (every user's key) and
//          row_of_key are global; seeds, p_true, p_false and pub are per local row.
void keyed_rr(py::array rowptr, py::array col, py::array keys, py::array row_of_key, py::array seeds, uint32_t st_t,
              uint32_t st_f, int mode, py::array p_true, py::array p_false, double pm, py::object pub,
              py::array out_rowptr, py::object out_col, int64_t row0) {
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const int64_t n = (int64_t)rowptr.size() - 1;
    py::array puba;
    const KeyedArgs<int64_t> A = keyed_args(rowptr, keys, row_of_key, seeds, st_t, st_f, mode, p_true, p_false, pm,
                                            pub, puba, row0);
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    check_size(out_rowptr, n + 1, "out_rowptr");
    int64_t* oc = nullptr;
    py::array oca;
    if (!out_col.is_none()) {
        oca = out_col.cast<py::array>();
        oc = data_ptr<int64_t>(oca, "out_col", true);
        check_size(oca, orp[n], "out_col");
    }
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        keyed_t(A, rp, c, n, orp, oc);
    });
}

// keyed_rr_rows(rowptr, col, keys, row_of_key, seeds, st_t, st_f, mode, p_true, p_false_or_q, pm, pub,
//               out_rowptr, row0) -> out_col (int64): keyed_rr's count and fill in one pass
//               (out_rowptr: the prefix-summed row sizes; the same bits).
py::array keyed_rr_rows(py::array rowptr, py::array col, py::array keys, py::array row_of_key, py::array seeds,
                        uint32_t st_t, uint32_t st_f, int mode, py::array p_true, py::array p_false, double pm,
                        py::object pub, py::array out_rowptr, int64_t row0) {
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const int64_t n = (int64_t)rowptr.size() - 1;
    py::array puba;
    const KeyedArgs<int64_t> A = keyed_args(rowptr, keys, row_of_key, seeds, st_t, st_f, mode, p_true, p_false, pm,
                                            pub, puba, row0);
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    check_size(out_rowptr, n + 1, "out_rowptr");
    const int nt = std::max(1, get_num_threads());
    std::vector<std::vector<int64_t>> bufs(nt);
    std::vector<int64_t> first(nt, -1);
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        orp[0] = 0;
        keyed_once(A, rp, c, n, orp, bufs, first);
        for (int64_t i = 0; i < n; ++i) orp[i + 1] += orp[i];
    });
    py::array_t<int64_t> out(orp[n]);
    int64_t* o = out.mutable_data();
    {
        py::gil_scoped_release nogil;
        parallel_for(nt, [&](int64_t b, int64_t e, int) {
            for (int64_t t = b; t < e; ++t)
                if (first[t] >= 0) std::copy(bufs[t].begin(), bufs[t].end(), o + orp[first[t]]);
        }, 1);
    }
    return out;
}

// keyed_dlap(seeds: uint64 (n), t, s, out: int64 (n)): DPRR's degree noise per user.
void keyed_dlap(py::array seeds, uint64_t t, uint64_t s, py::array out) {
    const uint64_t* sp = cdata_ptr<uint64_t>(seeds, "seeds");
    const int64_t n = (int64_t)seeds.size();
    int64_t* o = data_ptr<int64_t>(out, "out", true);
    check_size(out, n, "out");
    if (t < 1 || s < 1) throw std::invalid_argument("t, s: expected integers >= 1");
    py::gil_scoped_release nogil;
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) o[i] = degree_noise(sp[i], t, s);
    }, 1024);
}

}  // namespace

void register_edges_keyed(py::module_& m) {
    m.def("keyed_rr", &keyed_rr, "User-keyed Warner RR / DPRR sampler, count or fill pass (csrc/common/edges_keyed.h)",
          py::arg("rowptr"), py::arg("col"), py::arg("keys"), py::arg("row_of_key"), py::arg("seeds"), py::arg("st_t"),
          py::arg("st_f"), py::arg("mode"), py::arg("p_true"), py::arg("p_false"), py::arg("pm"), py::arg("pub"),
          py::arg("out_rowptr"), py::arg("out_col"), py::arg("row0") = 0);
    m.def("keyed_rr_rows", &keyed_rr_rows,
          "User-keyed Warner RR / DPRR sampler, count and fill in one pass: returns out_col (csrc/common/edges_keyed.h)",
          py::arg("rowptr"), py::arg("col"), py::arg("keys"), py::arg("row_of_key"), py::arg("seeds"), py::arg("st_t"),
          py::arg("st_f"), py::arg("mode"), py::arg("p_true"), py::arg("p_false"), py::arg("pm"), py::arg("pub"),
          py::arg("out_rowptr"), py::arg("row0") = 0);
    m.def("keyed_dlap", &keyed_dlap, "DPRR's per-user degree noise from per-user seeds", py::arg("seeds"), py::arg("t"),
          py::arg("s"), py::arg("out"));
}

}  // namespace ldp
