// Synthetic power-law graphs with planted classes (Chung & Lu 2002 expected-degree model,
// generated in O(|E| + n * C) by the skip algorithm of Miller & Hagberg 2011), the exact-
// edge-count trim, the symmetric CSR build and class-correlated node features.
// Python side: ldpfast/datasets/synthetic.py.  Numba twin: ldpfast/_numba/synthetic.py
// (same function names, same RNG words in the same order: outputs are bit-identical).
//
// Node "positions" s = 0..n-1 order the nodes by (class, target weight descending); class
// k occupies positions [seg[k], seg[k+1]).  An undirected pair {s, t}, s < t, is an edge
// with probability p_st = min(1, (scale * W[s] * f[c_s, c_t]) * W[t]).  Row s draws its
// upper-triangle neighbours t > s, one class segment k at a time, from its own generator
// CellRng(seed, STREAM_SYNTH_EDGES, s, attempt * C + k): nothing depends on threads.
// The per-row / per-cell bodies (walk, expected count, trim priorities, feature cells) are
// in csrc/common/synthetic.h, shared with csrc/cuda/synthetic.cu.
#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "../common/synthetic.h"
#include "buffers.h"
#include "parallel.h"

namespace ldp {

namespace {

using synth::BLOCK_SHIFT;

struct Plan {
    const double* W;      // (n) target weight per position, descending inside a class
    const int32_t* cls;   // (n) class per position
    const int64_t* seg;   // (C + 1) class segment starts
    const double* fmat;   // (C * C) homophily factors
    int64_t n, C;
    double scale;         // alpha / S
    std::vector<double> wmax, wmin;  // max / min of W over each block of 2^BLOCK_SHIFT positions
    synth::View view() const {
        return synth::View{W, cls, seg, fmat, wmax.empty() ? nullptr : wmax.data(),
                           wmin.empty() ? nullptr : wmin.data(), n, C, scale};
    }
};

Plan make_plan(py::array W, py::array cls, py::array seg, py::array fmat, double scale, bool tables = false) {
    Plan p;
    p.n = W.size();
    p.C = seg.size() - 1;
    if (p.C < 1) throw std::invalid_argument("seg: expected num_classes + 1 >= 2 entries");
    check_size(cls, p.n, "cls");
    check_size(fmat, p.C * p.C, "fmat");
    p.W = cdata_ptr<double>(W, "W");
    p.cls = cdata_ptr<int32_t>(cls, "cls");
    p.seg = cdata_ptr<int64_t>(seg, "seg");
    p.fmat = cdata_ptr<double>(fmat, "fmat");
    if (p.seg[0] != 0 || p.seg[p.C] != p.n) throw std::invalid_argument("seg: must run from 0 to n");
    for (int64_t k = 0; k < p.C; ++k)
        if (p.seg[k] > p.seg[k + 1]) throw std::invalid_argument("seg: must be non-decreasing");
    for (int64_t s = 0; s < p.n; ++s) {
        if (p.cls[s] < 0 || p.cls[s] >= p.C || s < p.seg[p.cls[s]] || s >= p.seg[p.cls[s] + 1])
            throw std::invalid_argument("cls: inconsistent with seg");
        if (!(p.W[s] > 0.0) || !(p.W[s] < 1e300)) throw std::invalid_argument("W: weights must be finite and > 0");
        if (s > 0 && p.cls[s] == p.cls[s - 1] && p.W[s] > p.W[s - 1])
            throw std::invalid_argument("W: must be non-increasing inside every class segment");
    }
    p.scale = scale;
    if (tables) {
        const int64_t nb = (p.n + (1 << BLOCK_SHIFT) - 1) >> BLOCK_SHIFT;
        p.wmax.assign(nb, 0.0);
        p.wmin.assign(nb, 0.0);
        for (int64_t b = 0; b < nb; ++b) {
            const int64_t s0 = b << BLOCK_SHIFT, s1 = std::min(p.n, s0 + (1 << BLOCK_SHIFT));
            double hi = p.W[s0], lo = p.W[s0];
            for (int64_t s = s0 + 1; s < s1; ++s) {
                hi = p.W[s] > hi ? p.W[s] : hi;
                lo = p.W[s] < lo ? p.W[s] : lo;
            }
            p.wmax[b] = hi;
            p.wmin[b] = lo;
        }
    }
    return p;
}

// Run f(begin, end, t) on the given row blocks [cuts[t], cuts[t + 1]), one thread each.
template <class F>
void run_blocks(const std::vector<int64_t>& cuts, F&& f) {
    const int nt = (int)cuts.size() - 1;
    if (nt == 1) {
        f(cuts[0], cuts[1], 0);
        return;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errs(nt);
    for (int t = 0; t < nt; ++t)
        pool.emplace_back([&, t] {
            try {
                f(cuts[t], cuts[t + 1], t);
            } catch (...) {
                errs[t] = std::current_exception();
            }
        });
    for (auto& th : pool) th.join();
    for (auto& e : errs)
        if (e) std::rethrow_exception(e);
}

// Row blocks for nt threads, balanced by a non-decreasing prefix array (as in
// parallel_for_weighted, but returned so that several passes can share one split and size
// per-thread buffers by it).  Small inputs get one block.
std::vector<int64_t> make_cuts(int64_t n, const int64_t* prefix, int64_t nt) {
    const int64_t total = prefix[n] - prefix[0];
    if (nt < 1 || total + n < 4096) nt = 1;
    std::vector<int64_t> cuts(nt + 1, n);
    cuts[0] = 0;
    for (int64_t t = 1; t < nt; ++t) {
        cuts[t] = std::lower_bound(prefix, prefix + n, prefix[0] + total * t / nt) - prefix;
        cuts[t] = std::max(cuts[t], cuts[t - 1]);
    }
    return cuts;
}

}  // namespace

// Class of every weight rank (stratified: each block of C consecutive ranks gets a random
// permutation of the classes, Fisher-Yates with CellRng(seed, SYNTH_CLASS, block, 0)) and a
// 64-bit key per rank (CellRng(seed, SYNTH_DEGREE, rank, 0)) whose sort order assigns
// node ids to ranks.
static void synth_nodes(uint64_t seed, int64_t C, py::array cls, py::array key) {
    int64_t n = cls.size();
    check_size(key, n, "key");
    if (C < 1) throw std::invalid_argument("num_classes: must be >= 1");
    int32_t* c = data_ptr<int32_t>(cls, "cls", true);
    uint64_t* k = data_ptr<uint64_t>(key, "key", true);
    py::gil_scoped_release nogil;
    int64_t nb = (n + C - 1) / C;
    parallel_for(nb, [&](int64_t b, int64_t e, int) {
        std::vector<int32_t> perm(C);
        for (int64_t blk = b; blk < e; ++blk) {
            synth::class_block(seed, C, blk, perm.data());
            int64_t r0 = blk * C, m = std::min<int64_t>(C, n - r0);
            for (int64_t i = 0; i < m; ++i) c[r0 + i] = perm[i];
        }
    }, std::max<int64_t>(1, 4096 / C));
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) k[r] = synth::node_key(seed, r);
    });
}

// Expected number of upper-triangle edges of every row at the given scale, split into the
// truncated part (pairs with p = 1) and the linear part; returns (sum E, sum linear), summed
// serially in row order (identical bits for any thread count).  P = prefix sums of W.
static py::tuple synth_expected(py::array W, py::array cls, py::array seg, py::array fmat, double scale,
                                py::array prefix, py::array erow, py::array lrow) {
    Plan pl = make_plan(W, cls, seg, fmat, scale);
    check_size(prefix, pl.n + 1, "prefix");
    check_size(erow, pl.n, "erow");
    check_size(lrow, pl.n, "lrow");
    const double* P = cdata_ptr<double>(prefix, "prefix");
    double* er = data_ptr<double>(erow, "erow", true);
    double* lr = data_ptr<double>(lrow, "lrow", true);
    double E = 0.0, L = 0.0;
    {
        py::gil_scoped_release nogil;
        parallel_for(pl.n, [&](int64_t b, int64_t e, int) {
            const synth::View V = pl.view();
            for (int64_t s = b; s < e; ++s) er[s] = synth::expected_row(V, P, s, &lr[s]);
        }, 1024);
        for (int64_t s = 0; s < pl.n; ++s) {
            E += er[s];
            L += lr[s];
        }
    }
    return py::make_tuple(E, L);
}

// Pass 1: number of upper-triangle edges of every row into cnt (n).  work (n + 1) is a
// prefix of estimated row costs, used only to balance threads.
static void synth_edge_count(uint64_t seed, int64_t attempt, py::array W, py::array cls, py::array seg,
                             py::array fmat, double scale, py::array work, py::array cnt) {
    Plan pl = make_plan(W, cls, seg, fmat, scale, true);
    check_size(work, pl.n + 1, "work");
    check_size(cnt, pl.n, "cnt");
    const int64_t* wp = cdata_ptr<int64_t>(work, "work");
    int64_t* c = data_ptr<int64_t>(cnt, "cnt", true);
    py::gil_scoped_release nogil;
    const synth::View V = pl.view();
    parallel_for_weighted(pl.n, wp, [&](int64_t b, int64_t e, int) {
        for (int64_t s = b; s < e; ++s) {
            int64_t m = 0;
            synth::walk_row(V, seed, attempt, s, [&](int64_t) { ++m; });
            c[s] = m;
        }
    });
}

// Pass 2: the same walk, writing row s's neighbours (positions, int32) to
// col[rowptr[s] : rowptr[s + 1]] in ascending order.
static void synth_edge_fill(uint64_t seed, int64_t attempt, py::array W, py::array cls, py::array seg,
                            py::array fmat, double scale, py::array work, py::array rowptr, py::array col) {
    Plan pl = make_plan(W, cls, seg, fmat, scale, true);
    check_size(work, pl.n + 1, "work");
    check_size(rowptr, pl.n + 1, "rowptr");
    const int64_t* wp = cdata_ptr<int64_t>(work, "work");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    check_size(col, rp[pl.n], "col");
    int32_t* cl = data_ptr<int32_t>(col, "col", true);
    py::gil_scoped_release nogil;
    const synth::View V = pl.view();
    parallel_for_weighted(pl.n, wp, [&](int64_t b, int64_t e, int) {
        for (int64_t s = b; s < e; ++s) {
            int64_t w = rp[s];
            const int64_t end = rp[s + 1];
            synth::walk_row(V, seed, attempt, s, [&](int64_t t) {
                if (w < end) cl[w] = (int32_t)t;
                ++w;
            });
            if (w != end) throw std::runtime_error("synth_edge_fill: row count differs from pass 1");
        }
    });
}

// Capacity of a thread's output region for e expected edges: 10+ standard deviations.
static inline int64_t region_cap(int64_t e) { return e + e / 32 + 4096; }

// Single pass: every thread walks a contiguous block of rows (balanced by the `work` prefix)
// and writes into its own region of col, sized from the `expect` prefix (expected edges,
// rounded up) by region_cap; the regions are then moved together in row order.  rowptr
// (n + 1) receives the CSR offsets.  Returns the number of edges, or -1 if col is too small
// for the regions or a region overflowed (then use synth_edge_count + synth_edge_fill).
// The output equals that of the two-pass kernels: each row uses only its own generator.
static int64_t synth_edge_sample(uint64_t seed, int64_t attempt, py::array W, py::array cls, py::array seg,
                                 py::array fmat, double scale, py::array work, py::array expect,
                                 py::array rowptr, py::array col) {
    Plan pl = make_plan(W, cls, seg, fmat, scale, true);
    const int64_t n = pl.n;
    check_size(work, n + 1, "work");
    check_size(expect, n + 1, "expect");
    check_size(rowptr, n + 1, "rowptr");
    const int64_t* wp = cdata_ptr<int64_t>(work, "work");
    const int64_t* ex = cdata_ptr<int64_t>(expect, "expect");
    int64_t* rp = data_ptr<int64_t>(rowptr, "rowptr", true);
    int32_t* cl = data_ptr<int32_t>(col, "col", true);
    const int64_t capacity = col.size();
    py::gil_scoped_release nogil;
    const std::vector<int64_t> cuts = make_cuts(n, wp, get_num_threads());
    const int nt = (int)cuts.size() - 1;
    std::vector<int64_t> start(nt + 1, 0), used(nt, 0);
    for (int t = 0; t < nt; ++t) start[t + 1] = start[t] + region_cap(ex[cuts[t + 1]] - ex[cuts[t]]);
    if (start[nt] > capacity) return -1;
    std::vector<char> ok(nt, 1);
    const synth::View V = pl.view();
    run_blocks(cuts, [&](int64_t b, int64_t e, int t) {
        int64_t w = start[t];
        const int64_t lim = start[t + 1];
        for (int64_t s = b; s < e; ++s) {
            int64_t m = 0;
            synth::walk_row(V, seed, attempt, s, [&](int64_t v) {
                if (w < lim) cl[w] = (int32_t)v;
                ++w;
                ++m;
            });
            rp[s + 1] = m;
        }
        used[t] = w - start[t];
        ok[t] = w <= lim;
    });
    for (int t = 0; t < nt; ++t)
        if (!ok[t]) return -1;
    int64_t off = 0;
    for (int t = 0; t < nt; ++t) {
        if (off != start[t] && used[t] > 0) std::memmove(cl + off, cl + start[t], (size_t)used[t] * sizeof(int32_t));
        off += used[t];
    }
    rp[0] = 0;
    for (int64_t s = 0; s < n; ++s) rp[s + 1] += rp[s];
    return off;
}

// Remove exactly `drop` edges from the upper triangle (rowptr, col), uniformly at random.
// The k-th edge of row s has the 32-bit priority = k-th word of CellRng(seed, SYNTH_TRIM,
// s, 0).  The `drop` lowest priorities go, ties at the threshold broken by edge order
// (earlier edges go first).  The threshold is found with a 65536-bin histogram of the high
// 16 bits, then of the low 16 bits inside the boundary bin: O(|E|) time, O(threads * 2^16)
// memory.  Rows are compacted in place (kept edges first, order kept); cnt[s] = kept count.
static void synth_trim(uint64_t seed, py::array rowptr, py::array col, int64_t drop, py::array cnt) {
    int64_t n = rowptr.size() - 1;
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    int64_t E = rp[n];
    check_size(col, E, "col");
    check_size(cnt, n, "cnt");
    int32_t* cl = data_ptr<int32_t>(col, "col", true);
    int64_t* c = data_ptr<int64_t>(cnt, "cnt", true);
    if (drop < 0 || drop > E) throw std::invalid_argument("drop: expected 0 <= drop <= number of edges");
    py::gil_scoped_release nogil;
    if (drop == 0) {
        for (int64_t s = 0; s < n; ++s) c[s] = rp[s + 1] - rp[s];
        return;
    }
    const std::vector<int64_t> cuts = make_cuts(n, rp, get_num_threads());
    const int nt = (int)cuts.size() - 1;
    const int64_t NB = 65536;
    std::vector<int64_t> hist((size_t)nt * NB, 0), tot(NB, 0);
    // histogram of (priority >> shift) over edges whose priority matches `hi` above 16 bits
    auto histogram = [&](bool low, uint32_t hi_bin) {
        std::fill(hist.begin(), hist.end(), 0);
        run_blocks(cuts, [&](int64_t b, int64_t e, int t) {
            int64_t* h = hist.data() + (size_t)t * NB;
            for (int64_t s = b; s < e; ++s) {
                CellRng g = synth::trim_rng(seed, s);
                for (int64_t j = rp[s]; j < rp[s + 1]; ++j) {
                    uint32_t p = g.next_u32();
                    if (!low) h[p >> 16]++;
                    else if ((p >> 16) == hi_bin) h[p & 0xffffu]++;
                }
            }
        });
        std::fill(tot.begin(), tot.end(), 0);
        for (int t = 0; t < nt; ++t)
            for (int64_t i = 0; i < NB; ++i) tot[i] += hist[(size_t)t * NB + i];
    };
    // smallest bin whose cumulative count exceeds `drop`
    auto boundary = [&](int64_t below, int64_t& out_below) {
        for (int64_t i = 0; i < NB; ++i) {
            if (below + tot[i] > drop) {
                out_below = below;
                return (uint32_t)i;
            }
            below += tot[i];
        }
        throw std::logic_error("synth_trim: histogram does not cover the edges");
    };
    histogram(false, 0);
    int64_t below_hi = 0, below = 0;
    uint32_t H = boundary(0, below_hi);
    histogram(true, H);
    uint32_t Lb = boundary(below_hi, below);
    const uint32_t T = (H << 16) | Lb;
    int64_t r = drop - below;  // ties (priority == T) to drop, in edge order; 0 <= r < ties
    std::vector<int64_t> dropped;
    if (r > 0) {
        for (int64_t s = 0; s < n && (int64_t)dropped.size() < r; ++s) {
            CellRng g = synth::trim_rng(seed, s);
            for (int64_t j = rp[s]; j < rp[s + 1] && (int64_t)dropped.size() < r; ++j)
                if (g.next_u32() == T) dropped.push_back(j);
        }
    }
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        for (int64_t s = b; s < e; ++s) {
            CellRng g = synth::trim_rng(seed, s);
            int64_t w = rp[s];
            for (int64_t j = rp[s]; j < rp[s + 1]; ++j) {
                uint32_t p = g.next_u32();
                bool keep = p > T;
                if (p == T) keep = !std::binary_search(dropped.begin(), dropped.end(), j);
                if (keep) cl[w++] = cl[j];
            }
            c[s] = w - rp[s];
        }
    });
}

// Trim priority of every upper-triangle edge (rowptr: n + 1) into prio (rowptr[n], int64):
// the C++ twin of synthetic.cu's synth_priorities, whose output the CUDA path sorts (stable,
// so the `drop` lowest with ties in edge order go: the edges synth_trim removes).
static void synth_priorities(uint64_t seed, py::array rowptr, py::array prio) {
    const int64_t n = rowptr.size() - 1;
    if (n < 0) throw std::invalid_argument("rowptr: expected n + 1 >= 1 entries");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    check_size(prio, rp[n], "prio");
    int64_t* pr = data_ptr<int64_t>(prio, "prio", true);
    py::gil_scoped_release nogil;
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        for (int64_t s = b; s < e; ++s) {
            CellRng g = synth::trim_rng(seed, s);
            for (int64_t j = rp[s]; j < rp[s + 1]; ++j) pr[j] = (int64_t)g.next_u32();
        }
    });
}

// Symmetric CSR by node id from the upper triangle by position: row s holds
// ucol[uptr[s] : uptr[s] + ucnt[s]]; ids[s] is the node id of position s.  Writes rowptr
// (n + 1, int64) and col (2 * sum(ucnt), int32) with every row sorted ascending.
// Parallel counting sort without atomics: thread t counts the entries it will write to
// every row, the counts become per-thread write offsets, the same blocks scatter, then
// every row is sorted.  The per-thread offset arrays (8 bytes * n each) are limited to
// 1 + |E| / (2n) threads, so they never take more memory than n * 8 + 4 |E| bytes.
static void synth_symmetrize(py::array uptr, py::array ucnt, py::array ucol, py::array ids, py::array rowptr,
                             py::array col) {
    int64_t n = ucnt.size();
    check_size(uptr, n + 1, "uptr");
    check_size(ids, n, "ids");
    check_size(rowptr, n + 1, "rowptr");
    const int64_t* up = cdata_ptr<int64_t>(uptr, "uptr");
    const int64_t* uc = cdata_ptr<int64_t>(ucnt, "ucnt");
    const int32_t* ucl = cdata_ptr<int32_t>(ucol, "ucol");
    const int32_t* id = cdata_ptr<int32_t>(ids, "ids");
    int64_t* rp = data_ptr<int64_t>(rowptr, "rowptr", true);
    int32_t* cl = data_ptr<int32_t>(col, "col", true);
    int64_t M = 0;
    for (int64_t s = 0; s < n; ++s) {
        if (uc[s] < 0 || uc[s] > up[s + 1] - up[s]) throw std::invalid_argument("ucnt: outside the rows of uptr");
        if (id[s] < 0 || id[s] >= n) throw std::invalid_argument("ids: outside [0, n)");
        M += uc[s];
    }
    check_size(col, 2 * M, "col");
    if (ucol.size() < up[n]) throw std::invalid_argument("ucol: shorter than uptr[n]");
    py::gil_scoped_release nogil;
    if (n == 0) {
        rp[0] = 0;
        return;
    }
    // blocks of rows balanced by the number of upper edges (+1 per row)
    std::vector<int64_t> wpre(n + 1);
    for (int64_t s = 0; s <= n; ++s) wpre[s] = up[s] + s;
    const int64_t ntmax = std::min<int64_t>(std::max(1, get_num_threads()), 1 + M / std::max<int64_t>(1, 2 * n));
    const std::vector<int64_t> cuts = make_cuts(n, wpre.data(), ntmax);
    std::vector<int64_t>().swap(wpre);
    const int64_t nt = (int64_t)cuts.size() - 1;
    std::vector<int64_t> off((size_t)(nt * n), 0);
    run_blocks(cuts, [&](int64_t b, int64_t e, int t) {
        int64_t* c = off.data() + (size_t)t * n;
        for (int64_t s = b; s < e; ++s) {
            c[id[s]] += uc[s];
            for (int64_t j = up[s], end = up[s] + uc[s]; j < end; ++j) c[id[ucl[j]]]++;
        }
    });
    // degrees -> rowptr (serial prefix), then per-thread offsets inside every row
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t a = b; a < e; ++a) {
            int64_t d = 0;
            for (int64_t t = 0; t < nt; ++t) d += off[(size_t)(t * n + a)];
            rp[a + 1] = d;
        }
    });
    rp[0] = 0;
    for (int64_t a = 0; a < n; ++a) rp[a + 1] += rp[a];
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t a = b; a < e; ++a) {
            int64_t o = rp[a];
            for (int64_t t = 0; t < nt; ++t) {
                int64_t c = off[(size_t)(t * n + a)];
                off[(size_t)(t * n + a)] = o;
                o += c;
            }
        }
    });
    run_blocks(cuts, [&](int64_t b, int64_t e, int t) {
        int64_t* o = off.data() + (size_t)t * n;
        for (int64_t s = b; s < e; ++s) {
            const int32_t a = id[s];
            int64_t w = o[a];
            for (int64_t j = up[s], end = up[s] + uc[s]; j < end; ++j) {
                const int32_t bn = id[ucl[j]];
                cl[w++] = bn;
                cl[o[bn]++] = a;
            }
            o[a] = w;
        }
    });
    std::vector<int64_t>().swap(off);
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) std::sort(cl + rp[i], cl + rp[i + 1]);
    });
}

// Class-correlated features.  Prototype of (class c, feature j):
//   q[c, j] = 0.5 + signal * (U - 0.5),  U = uniform of CellRng(seed, SYNTH_FEATURES, 2^47 + c, j)
// kind 0 (binary):     x[v, j] = 1 if uniform(CellRng(seed, SYNTH_FEATURES, v, j)) < q[y_v, j]
// kind 1 (continuous): x[v, j] = clip(q[y_v, j] + U_vj - 0.5, 0, 1)
// x is float32 (n, d) or, for binary, uint8.
template <class T>
static void features_t(uint64_t seed, const int64_t* y, int64_t n, int64_t C, double signal, int kind, T* x,
                       int64_t d) {
    std::vector<double> q((size_t)(C * d));
    for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < d; ++j)
            q[(size_t)(c * d + j)] = synth::feature_proto(seed, c, j, signal);
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t v = b; v < e; ++v) {
            const double* qr = q.data() + (size_t)(y[v] * d);
            T* xr = x + v * d;
            for (int64_t j = 0; j < d; ++j) xr[j] = (T)synth::feature_value(seed, v, j, qr[j], kind);
        }
    }, 256);
}

static void synth_features(uint64_t seed, py::array y, int64_t C, double signal, int kind, py::array x) {
    if (x.ndim() != 2) throw std::invalid_argument("x: expected a 2-D array");
    int64_t n = x.shape(0), d = x.shape(1);
    check_size(y, n, "y");
    const int64_t* yy = cdata_ptr<int64_t>(y, "y");
    for (int64_t v = 0; v < n; ++v)
        if (yy[v] < 0 || yy[v] >= C) throw std::invalid_argument("y: labels outside [0, num_classes)");
    if (kind != 0 && kind != 1) throw std::invalid_argument("kind: 0 (binary) or 1 (continuous)");
    if (py::isinstance<carray<uint8_t>>(x)) {
        if (kind != 0) throw std::invalid_argument("x: uint8 output is for binary features only");
        uint8_t* xp = data_ptr<uint8_t>(x, "x", true);
        py::gil_scoped_release nogil;
        features_t(seed, yy, n, C, signal, kind, xp, d);
    } else {
        float* xp = data_ptr<float>(x, "x", true);
        py::gil_scoped_release nogil;
        features_t(seed, yy, n, C, signal, kind, xp, d);
    }
}

void register_synthetic(py::module_& m) {
    m.def("synth_nodes", &synth_nodes, "Stratified class per weight rank and a 64-bit id-permutation key per rank");
    m.def("synth_expected", &synth_expected,
          "Expected upper-triangle edges per row (truncated + linear parts); returns (sum, linear sum)");
    m.def("synth_edge_count", &synth_edge_count, "Miller-Hagberg pass 1: edges per row");
    m.def("synth_edge_fill", &synth_edge_fill, "Miller-Hagberg pass 2: fill the upper-triangle CSR");
    m.def("synth_edge_sample", &synth_edge_sample,
          "Single-pass Miller-Hagberg sampling into per-thread regions; returns |E| or -1 (use count + fill)");
    m.def("synth_trim", &synth_trim, "Drop exactly `drop` edges by 32-bit priority (histogram threshold)");
    m.def("synth_priorities", &synth_priorities, "Trim priority (32-bit word) of every upper-triangle edge");
    m.def("synth_symmetrize", &synth_symmetrize, "Symmetric sorted CSR by node id from the upper triangle");
    m.def("synth_features", &synth_features, "Class-correlated binary or continuous features");
}

}  // namespace ldp
