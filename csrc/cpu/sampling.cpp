// HeterPoisson sub-graph sampling (Xiang, Wang & Wang, "Preserving Node-level Privacy in
// Graph Neural Networks", Algorithms 2 and 3, section 4.4).
// Python API: ldpfast/sampling/heterpoisson.py.  Numba twin: ldpfast/_numba/sampling.py
// (same names, same sampler calls in the same order, so outputs are bit-identical).
//
// Graph: CSR of neighbour lists NB(i) = { j : (j -> i) in E } (rows sorted, no duplicates),
// deg[j] = out-degree of j in the whole graph (Alg. 3 line 5).
//
// The per-sub-graph bodies (central trial, node list, edges) are in csrc/common/sampling.h,
// shared with the CUDA launchers csrc/cuda/sampling.cu.
//
// Randomness (counter-addressed, so the output never depends on the thread count):
//   * central trial of candidate node v at step t  (Alg. 2 lines 5-6):
//       CellRng(seed, STREAM_HETER_CENTRAL, v, t).bernoulli(q_b)
//   * peripheral trial of neighbour j = col[e] of central node v at step t (Alg. 3 lines
//     4-6), addressed by the CSR position e of the entry (v, j):
//       CellRng(seed, STREAM_HETER_PERIPHERAL, e, t).bernoulli(M / deg[j])
//   (exact Bernoulli: uniform() < p would never fire below p = 2^-54, audit F5)
//   * inference (section 4.4): the neighbours of test node v are ranked by the key
//       CellRng(seed, STREAM_HETER_INFERENCE, e, t).next_u64()
//     and the n_test smallest (key, j) are kept: a uniform sample without replacement.
// "Is j a central node at step t" (Alg. 2 lines 14-23) is recomputed from the same central
// trial, so no O(n) per-step state is kept: work per step is O(#candidates) cheap trials
// plus O(sum of the central nodes' degrees) peripheral trials.
//
// Passes (each row-parallel, balanced by degree):
//   heter_central       central trials of a candidate list -> uint8 flags
//   heter_nodes         the node list of every sub-graph, one pass into per-sub-graph slots
//                       of 1 + deg(centre) (the caller compacts): the central node
//                       first, then its peripheral nodes in ascending id order; a
//                       peripheral that is itself central is dropped (overlap = drop) or
//                       kept with its zeroed flag set (overlap = zero, Alg. 2 line 20)
//   heter_infer_nodes   (count | fill) inference sub-graphs (section 4.4)
//   heter_edges         (count | fill) the edges of the sub-graph induced on each node list
//                       (Alg. 2 line 10), or only its edges incident to the central node
//                       (star), as local ids of the block-diagonal batch; for each target
//                       in local order, sources in local order.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../common/rng.h"
#include "../common/sampling.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {

namespace {

template <class C>
struct Graph {
    const int64_t* rp;
    const C* col;
    int64_t n;
};

// Below this many work units (trials / adjacency entries) a kernel runs on the calling
// thread: spawning threads costs more than the work (and results never depend on it).
constexpr int64_t SERIAL_WORK = 1 << 17;

template <class F>
void run_weighted(int64_t n, const int64_t* prefix, F&& f) {
    if (n <= 0) return;
    if (prefix[n] - prefix[0] + n < SERIAL_WORK) {
        f(int64_t(0), n, 0);
        return;
    }
    parallel_for_weighted(n, prefix, f);
}

using heter::central_trial;

// Node list of every sub-graph (Alg. 2 + 3) in one pass: sub-graph b is written at
// ub_ptr[b] (room for the centre and all its neighbours) and counts[b] is its size; the
// caller compacts.
template <class C>
void nodes_t(const Graph<C>& G, const int64_t* deg, const int64_t* centers, int64_t B,
             const uint8_t* cand, const uint8_t* allow, uint64_t seed, uint32_t step, double q,
             double M, bool drop, const int64_t* ub_ptr, int64_t* counts, int64_t* n_id,
             uint8_t* zeroed) {
    run_weighted(B, ub_ptr, [&](int64_t lo, int64_t hi, int) {
        for (int64_t b = lo; b < hi; ++b) {
            const int64_t out = ub_ptr[b];
            const int64_t cnt = heter::nodes_row(G.rp, G.col, deg, centers[b], cand, allow, seed, step, q, M, drop,
                                                 n_id + out, zeroed + out);
            counts[b] = cnt;
        }
    });
}

// Rows with k * d above this take nth_element (O(d) keys) instead of the shared body's O(k d)
// scans (heter::infer_row, what each CUDA thread runs); both keep the same set of pairs.
constexpr int64_t INFER_SCAN_WORK = 1 << 16;

template <class C>
void infer_t(const Graph<C>& G, const int64_t* centers, int64_t B, const uint8_t* allow,
             uint64_t seed, uint32_t step, int64_t n_test, const int64_t* node_ptr,
             int64_t* counts, int64_t* n_id, bool fill) {
    std::vector<int64_t> w(B + 1, 0);
    for (int64_t b = 0; b < B; ++b) {
        int64_t v = centers[b];
        w[b + 1] = w[b] + 1 + (G.rp[v + 1] - G.rp[v]);
    }
    run_weighted(B, w.data(), [&](int64_t lo, int64_t hi, int) {
        std::vector<std::pair<uint64_t, int64_t>> keys;
        for (int64_t b = lo; b < hi; ++b) {
            const int64_t v = centers[b];
            const int64_t size = heter::infer_count(G.rp, G.col, v, allow, n_test), k = size - 1;
            if (!fill) {
                counts[b] = size;
                continue;
            }
            const int64_t out = node_ptr[b];
            if (node_ptr[b + 1] - out != size)
                throw std::runtime_error("heter_infer_nodes: fill size differs from count (bug)");
            const int64_t d = G.rp[v + 1] - G.rp[v];
            if (k * d <= INFER_SCAN_WORK) {
                heter::infer_row(G.rp, G.col, v, allow, seed, step, n_test, n_id + out);
                continue;
            }
            n_id[out] = v;
            keys.clear();
            for (int64_t e = G.rp[v]; e < G.rp[v + 1]; ++e) {
                int64_t j = (int64_t)G.col[e];
                if (heter::infer_admissible(j, v, allow)) keys.emplace_back(heter::infer_key(seed, step, e), j);
            }
            if ((int64_t)keys.size() > k)  // the k smallest (key, id) pairs
                std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end());
            std::vector<int64_t> sel;
            sel.reserve(k);
            for (int64_t i = 0; i < k; ++i) sel.push_back(keys[i].second);
            std::sort(sel.begin(), sel.end());  // ascending ids
            for (int64_t i = 0; i < k; ++i) n_id[out + 1 + i] = sel[i];
        }
    });
}

// Edges of sub-graph b: for each target t (local order), sources s (local order) with
// (s -> t) in E, i.e. global(s) in NB(global(t)); star: only pairs involving the centre.
template <class C>
void edges_t(const Graph<C>& G, const int64_t* n_id, const int64_t* node_ptr, int64_t B,
             bool induced, const int64_t* edge_ptr, int64_t* counts, int64_t* src, int64_t* dst,
             bool fill) {
    run_weighted(B, node_ptr, [&](int64_t lo, int64_t hi, int) {
        for (int64_t b = lo; b < hi; ++b) {
            const int64_t p0 = node_ptr[b];
            const int64_t L = node_ptr[b + 1] - p0;
            const int64_t base = fill ? edge_ptr[b] : 0;
            int64_t k = 0;
            const int64_t cnt = heter::edges_row(G.rp, G.col, n_id, p0, L, induced, [&](int64_t ls, int64_t lt) {
                if (fill) {
                    src[base + k] = p0 + ls;
                    dst[base + k] = p0 + lt;
                }
                ++k;
            });
            if (fill) {
                if (cnt != edge_ptr[b + 1] - edge_ptr[b])
                    throw std::runtime_error("heter_edges: fill regenerated a different size than count (bug)");
            } else {
                counts[b] = cnt;
            }
        }
    });
}

template <class F>
void with_graph(py::array rowptr, py::array col, F&& f) {
    int64_t n = (int64_t)rowptr.size() - 1;
    if (n < 0) throw std::invalid_argument("rowptr: expected at least one element");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    with_index(col, "col", [&](auto c) {
        Graph<index_t<decltype(c)>> G{rp, c, n};
        f(G);
    });
}

const uint8_t* opt_mask(const py::array& a, int64_t n, const char* name) {
    if (a.size() == 0) return nullptr;
    check_size(a, n, name);
    return cdata_ptr<uint8_t>(a, name);
}

}  // namespace

// flags[i] = central trial of node cand[i] at step; returns the number of central nodes.
static int64_t heter_central(py::array cand, uint64_t seed, uint32_t step, double q_b, py::array flags) {
    int64_t m = cand.size();
    check_size(flags, m, "flags");
    const int64_t* c = cdata_ptr<int64_t>(cand, "cand");
    uint8_t* f = data_ptr<uint8_t>(flags, "flags", true);
    std::vector<int64_t> part(std::max(1, get_num_threads()), 0);
    {
        py::gil_scoped_release nogil;
        parallel_for(m, [&](int64_t b, int64_t e, int t) {  // serial below SERIAL_WORK candidates
            int64_t k = 0;
            for (int64_t i = b; i < e; ++i) {
                bool x = central_trial(seed, step, c[i], q_b);
                f[i] = x ? 1 : 0;
                k += x;
            }
            part[t] += k;
        }, SERIAL_WORK);
    }
    int64_t total = 0;
    for (int64_t k : part) total += k;
    return total;
}

static void heter_nodes(py::array rowptr, py::array col, py::array deg, py::array centers,
                        py::array cand_mask, py::array allow_mask, uint64_t seed, uint32_t step,
                        double q_b, double M, bool drop, py::array ub_ptr, py::array counts,
                        py::array n_id, py::array zeroed) {
    with_graph(rowptr, col, [&](auto& G) {
        int64_t B = centers.size();
        check_size(deg, G.n, "deg");
        check_size(cand_mask, G.n, "cand_mask");
        check_size(ub_ptr, B + 1, "ub_ptr");
        check_size(counts, B, "counts");
        const int64_t* dg = cdata_ptr<int64_t>(deg, "deg");
        const int64_t* ce = cdata_ptr<int64_t>(centers, "centers");
        const uint8_t* cm = cdata_ptr<uint8_t>(cand_mask, "cand_mask");
        const uint8_t* al = opt_mask(allow_mask, G.n, "allow_mask");
        const int64_t* up = cdata_ptr<int64_t>(ub_ptr, "ub_ptr");
        for (int64_t b = 0; b < B; ++b) {
            if (ce[b] < 0 || ce[b] >= G.n) throw std::out_of_range("centers: node id outside [0, n)");
            if (up[b + 1] - up[b] < 1 + (G.rp[ce[b] + 1] - G.rp[ce[b]]))
                throw std::invalid_argument("ub_ptr: sub-graph b needs 1 + deg(centers[b]) slots");
        }
        check_size(n_id, up[B], "n_id");
        check_size(zeroed, up[B], "zeroed");
        int64_t* cn = data_ptr<int64_t>(counts, "counts", true);
        int64_t* ni = data_ptr<int64_t>(n_id, "n_id", true);
        uint8_t* z = data_ptr<uint8_t>(zeroed, "zeroed", true);
        py::gil_scoped_release nogil;
        nodes_t(G, dg, ce, B, cm, al, seed, step, q_b, M, drop, up, cn, ni, z);
    });
}

static void heter_infer_nodes(py::array rowptr, py::array col, py::array centers, py::array allow_mask,
                              uint64_t seed, uint32_t step, int64_t n_test, py::array counts_or_ptr,
                              py::array n_id, bool fill) {
    if (n_test < 0) throw std::invalid_argument("n_test: expected >= 0");
    with_graph(rowptr, col, [&](auto& G) {
        int64_t B = centers.size();
        const int64_t* ce = cdata_ptr<int64_t>(centers, "centers");
        const uint8_t* al = opt_mask(allow_mask, G.n, "allow_mask");
        for (int64_t b = 0; b < B; ++b)
            if (ce[b] < 0 || ce[b] >= G.n) throw std::out_of_range("centers: node id outside [0, n)");
        if (fill) {
            check_size(counts_or_ptr, B + 1, "node_ptr");
            const int64_t* np_ = cdata_ptr<int64_t>(counts_or_ptr, "node_ptr");
            check_size(n_id, np_[B], "n_id");
            int64_t* ni = data_ptr<int64_t>(n_id, "n_id", true);
            py::gil_scoped_release nogil;
            infer_t(G, ce, B, al, seed, step, n_test, np_, nullptr, ni, true);
        } else {
            check_size(counts_or_ptr, B, "counts");
            int64_t* cn = data_ptr<int64_t>(counts_or_ptr, "counts", true);
            py::gil_scoped_release nogil;
            infer_t(G, ce, B, al, seed, step, n_test, nullptr, cn, nullptr, false);
        }
    });
}

static void heter_edges(py::array rowptr, py::array col, py::array n_id, py::array node_ptr, bool induced,
                        py::array counts_or_ptr, py::array src, py::array dst, bool fill) {
    with_graph(rowptr, col, [&](auto& G) {
        int64_t B = (int64_t)node_ptr.size() - 1;
        if (B < 0) throw std::invalid_argument("node_ptr: expected at least one element");
        const int64_t* np_ = cdata_ptr<int64_t>(node_ptr, "node_ptr");
        check_size(n_id, np_[B], "n_id");
        const int64_t* ni = cdata_ptr<int64_t>(n_id, "n_id");
        for (int64_t b = 0; b < B; ++b)
            if (np_[b + 1] <= np_[b]) throw std::invalid_argument("node_ptr: every sub-graph needs >= 1 node");
        for (int64_t i = 0; i < np_[B]; ++i)
            if (ni[i] < 0 || ni[i] >= G.n) throw std::out_of_range("n_id: node id outside [0, n)");
        if (fill) {
            check_size(counts_or_ptr, B + 1, "edge_ptr");
            const int64_t* ep = cdata_ptr<int64_t>(counts_or_ptr, "edge_ptr");
            check_size(src, ep[B], "src");
            check_size(dst, ep[B], "dst");
            int64_t* s = data_ptr<int64_t>(src, "src", true);
            int64_t* d = data_ptr<int64_t>(dst, "dst", true);
            py::gil_scoped_release nogil;
            edges_t(G, ni, np_, B, induced, ep, nullptr, s, d, true);
        } else {
            check_size(counts_or_ptr, B, "counts");
            int64_t* cn = data_ptr<int64_t>(counts_or_ptr, "counts", true);
            py::gil_scoped_release nogil;
            edges_t(G, ni, np_, B, induced, nullptr, cn, nullptr, nullptr, false);
        }
    });
}

void register_sampling(py::module_& m) {
    m.def("heter_central", &heter_central, "HeterPoisson central trials (Alg. 2 lines 5-6); returns the count");
    m.def("heter_nodes", &heter_nodes,
          "HeterPoisson node lists (Alg. 2 + 3), one pass into slots ub_ptr[b] (>= 1 + deg); sizes in counts");
    m.def("heter_infer_nodes", &heter_infer_nodes,
          "Inference sub-graphs (section 4.4): <= n_test admissible neighbours, uniform without replacement");
    m.def("heter_edges", &heter_edges,
          "Edges of the induced (or star) sub-graph of every node list, block-diagonal local ids (count / fill)");
}

}  // namespace ldp
