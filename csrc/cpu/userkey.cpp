// C++ launchers of the per-user report keys (construction and contract in
// csrc/common/userkey.h): std::thread over rows (digests, seeds) or over neighbour rows (set
// digests).  Every output cell is a function of its own row only, so the thread count never
// changes a bit.
#include <algorithm>
#include <vector>

#include "../common/userkey.h"
#include "buffers.h"
#include "parallel.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the row digest reads words with memcpy: little-endian hosts only (as the CUDA build)"
#endif

namespace ldp {
namespace {

using namespace fp;

// row_digests(rows: uint8 (n, nbytes), k_nh, k_pad, k_prf, out: uint64 (n, 2)).
void row_digests(py::array rows, uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, py::array out) {
    if (rows.ndim() != 2) throw std::invalid_argument("rows: expected a 2-D uint8 array");
    const uint8_t* p = cdata_ptr<uint8_t>(rows, "rows");
    uint64_t* o = data_ptr<uint64_t>(out, "out", true);
    const int64_t n = rows.shape(0), nbytes = rows.shape(1);
    check_size(out, 2 * n, "out");
    uint32_t K[KEY_WORDS];
    for (int q = 0; q < KEY_WORDS / 4; ++q) nh_key_block(k_nh, q, K);
    py::gil_scoped_release nogil;
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) uk::row_digest(p + i * nbytes, nbytes, K, k_pad, k_prf, o[2 * i], o[2 * i + 1]);
    }, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, nbytes)));
}

// set_digests(rowptr: int64 (n + 1), col: int32/int64, node_keys: int64 (N), k_set, out: uint64 (n, 2)):
// row i's digest is the sum of set_term(node_keys[col[e]]) over its entries.
void set_digests(py::array rowptr, py::array col, py::array node_keys, uint64_t k_set, py::array out) {
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const int64_t* keys = cdata_ptr<int64_t>(node_keys, "node_keys");
    uint64_t* o = data_ptr<uint64_t>(out, "out", true);
    const int64_t n = (int64_t)rowptr.size() - 1, nk = (int64_t)node_keys.size();
    check_size(out, 2 * n, "out");
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i) {
                uint64_t s0 = 0, s1 = 0, t0, t1;
                for (int64_t q = rp[i]; q < rp[i + 1]; ++q) {
                    const int64_t j = (int64_t)c[q];
                    if (j < 0 || j >= nk) throw std::out_of_range("col: entry outside [0, len(node_keys))");
                    uk::set_term(keys[j], k_set, t0, t1);
                    s0 += t0;
                    s1 += t1;
                }
                o[2 * i] = s0;
                o[2 * i + 1] = s1;
            }
        });
    });
}

// report_keys(ukeys: int64 (n), extra: uint64 (n) or None, digests: uint64 (n, 2) or None,
//             k_a, k_b, k_c, seeds: uint64 (n), rids: uint64 (n) or None).
void report_keys(py::array ukeys, py::object extra, py::object digests, uint64_t k_a, uint64_t k_b, uint64_t k_c,
                 py::array seeds, py::object rids) {
    const int64_t* u = cdata_ptr<int64_t>(ukeys, "ukeys");
    const int64_t n = (int64_t)ukeys.size();
    const uint64_t* ex = nullptr;
    const uint64_t* dg = nullptr;
    uint64_t* rid = nullptr;
    py::array exa, dga, ria;
    if (!extra.is_none()) {
        exa = extra.cast<py::array>();
        ex = cdata_ptr<uint64_t>(exa, "extra");
        check_size(exa, n, "extra");
    }
    if (!digests.is_none()) {
        dga = digests.cast<py::array>();
        dg = cdata_ptr<uint64_t>(dga, "digests");
        check_size(dga, 2 * n, "digests");
    }
    if (!rids.is_none()) {
        ria = rids.cast<py::array>();
        rid = data_ptr<uint64_t>(ria, "rids", true);
        check_size(ria, n, "rids");
    }
    uint64_t* s = data_ptr<uint64_t>(seeds, "seeds", true);
    check_size(seeds, n, "seeds");
    py::gil_scoped_release nogil;
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            uint64_t r;
            uk::report_key(u[i], ex ? ex[i] : 0, dg ? dg[2 * i] : 0, dg ? dg[2 * i + 1] : 0, k_a, k_b, k_c, s[i], r);
            if (rid) rid[i] = r;
        }
    }, 4096);
}

// check_keys(keys: int64 (n)) -> (smallest negative key or None, smallest key held twice or None):
// what ldpfast/privacy/users.py requires of user keys (distinct, in [0, 2^63)), in O(n) when the
// keys span at most 64 n values (a bitmap: row indices, ids from a counter), else by a sort.
py::tuple check_keys(py::array keys) {
    const int64_t* k = cdata_ptr<int64_t>(keys, "keys");
    const int64_t n = (int64_t)keys.size();
    if (n == 0) return py::make_tuple(py::none(), py::none());
    int64_t lo = k[0], hi = k[0], dup = 0;
    bool has_dup = false;
    {
        py::gil_scoped_release nogil;
        for (int64_t i = 1; i < n; ++i) {
            lo = std::min(lo, k[i]);
            hi = std::max(hi, k[i]);
        }
        if (lo >= 0) {
            const uint64_t span = (uint64_t)(hi - lo) + 1;
            if (span / 64 <= (uint64_t)n) {
                std::vector<uint64_t> seen(span / 64 + 1, 0);
                for (int64_t i = 0; i < n; ++i) {
                    const uint64_t v = (uint64_t)(k[i] - lo), bit = 1ull << (v & 63);
                    uint64_t& w = seen[v >> 6];
                    if ((w & bit) && (!has_dup || k[i] < dup)) {
                        dup = k[i];
                        has_dup = true;
                    }
                    w |= bit;
                }
            } else {
                std::vector<int64_t> s(k, k + n);
                std::sort(s.begin(), s.end());
                for (int64_t i = 1; i < n && !has_dup; ++i)
                    if (s[i] == s[i - 1]) {
                        dup = s[i];
                        has_dup = true;
                    }
            }
        }
    }
    if (lo < 0) return py::make_tuple(lo, py::none());
    return py::make_tuple(py::none(), has_dup ? py::object(py::int_(dup)) : py::object(py::none()));
}

}  // namespace

void register_userkey(py::module_& m) {
    m.def("check_keys", &check_keys, "(smallest negative key or None, smallest repeated key or None) of int64 user keys",
          py::arg("keys"));
    m.def("row_digests", &row_digests, "Keyed digest of each row of a uint8 (n, nbytes) array (csrc/common/userkey.h)",
          py::arg("rows"), py::arg("k_nh"), py::arg("k_pad"), py::arg("k_prf"), py::arg("out"));
    m.def("set_digests", &set_digests, "Keyed digest of each CSR row's set of neighbour keys (csrc/common/userkey.h)",
          py::arg("rowptr"), py::arg("col"), py::arg("node_keys"), py::arg("k_set"), py::arg("out"));
    m.def("report_keys", &report_keys, "Per-user report seeds and report ids (csrc/common/userkey.h)",
          py::arg("ukeys"), py::arg("extra"), py::arg("digests"), py::arg("k_a"), py::arg("k_b"), py::arg("k_c"),
          py::arg("seeds"), py::arg("rids"));
}

}  // namespace ldp
