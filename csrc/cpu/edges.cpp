// Edge-LDP kernels (Hidano & Murakami, "Degree-Preserving Randomized Response for Graph
// Neural Networks under Local Differential Privacy"): DPRR and Warner's RR on neighbour
// lists, the LocalLap baseline's candidate sampler, and the server-side CSR helpers
// (transpose, combine) used to turn the n noisy lists into one graph.
// Python API: ldpfast/mechanisms/edges/.  Numba twin: ldpfast/_numba/edges.py (same
// names, same sampler calls in the same order, so outputs are bit-identical).
// The per-row bodies (RR row count / fill, DPRR probabilities, LocalLap values and candidates,
// row combination, the CSR check) are in csrc/common/edges.h and graph.h, shared with the CUDA
// launchers csrc/cuda/edges.cu and graph.cu; what stays here is threading, the one-pass block
// buffers (a CPU memory / speed path drawing the same cells) and the pybind11 entry points.
//
// Sparse RR sampler (rr_row): user i's noisy list a~_i has, independently per j != i,
//   P[a~_ij = 1] = p_true[i]  if a_ij = 1,     p_false[i] otherwise
// (DPRR eq. 7: p_true = p q_i, p_false = (1-p) q_i; Warner RR: p, 1-p).  True edges get one exact
// Bernoulli each (keep_true: one 32-bit word), drawn in neighbour order from CellRng(seed,
// stream_t, i, col_t); the n-1-d_i non-neighbours are never enumerated: the positions of the false
// edges among them are drawn by skip sampling (geometric gaps, CellRng(seed, stream_f, i, col_f);
// geom_draw in rng.h: full support, each factor of the gap law within relative 2^-49 of
// Geometric's, so every likelihood ratio is the product-of-Bernoulli(p_false) one up to
// e^(+-2^-46), audit F5), and the k-th non-neighbour is mapped to its node id by merging with the
// sorted exclusion list N(i) + {i}.  Work and memory O(d_i + output) per row.  edges_rr_sample
// draws every row once into block buffers and writes the outputs (CSR and / or edge_index) after;
// the two-pass kernels (*_count writes each row's size, Python prefix-sums it, *_fill regenerates
// the same draws and writes the sorted rows) are kept as its reference.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>  // RawBuf maps its pages directly
#endif

#include <pybind11/stl.h>  // std::vector<py::array> arguments (locallap_symmetric)

#include "../common/edges.h"
#include "../common/graph.h"
#include "buffers.h"
#include "parallel.h"
#include "scatter.h"

namespace ldp {

using namespace edges;  // the shared per-row bodies (csrc/common/edges.h)


static RRArgs rr_args(int64_t n, uint64_t seed, uint32_t st_t, uint32_t c_t, uint32_t st_f, uint32_t c_f,
                      py::array& p_true, py::array& p_false, py::array& pub) {
    check_size(p_true, n, "p_true");
    check_size(p_false, n, "p_false");
    RRArgs A;
    A.seed = seed;
    A.st_t = st_t;
    A.c_t = c_t;
    A.st_f = st_f;
    A.c_f = c_f;
    A.pt = cdata_ptr<double>(p_true, "p_true");
    A.pf = cdata_ptr<double>(p_false, "p_false");
    A.n = n;
    if (pub.size() == 0) {
        A.pub = nullptr;
    } else {
        check_size(pub, n, "public");
        A.pub = cdata_ptr<uint8_t>(pub, "public");
    }
    return A;
}

template <class C>
static void rr_count_t(const RRArgs& A, const int64_t* rp, const C* col, int64_t* out, bool by_degree) {
    auto body = [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) out[i + 1] = rr_row_count(A, i, col + rp[i], rp[i + 1] - rp[i]);
    };
    out[0] = 0;
    if (by_degree)
        parallel_for_weighted(A.n, rp, body);
    else
        parallel_for(A.n, body, 256);
}

template <class C>
static void rr_fill_t(const RRArgs& A, const int64_t* rp, const C* col, const int64_t* orp, C* ocol) {
    parallel_for_weighted(A.n, orp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            int64_t got = rr_row_fill(A, i, col + rp[i], rp[i + 1] - rp[i], ocol + orp[i]);
            if (got != orp[i + 1] - orp[i])
                throw std::runtime_error("edges_rr_fill: row " + std::to_string(i) +
                                         " regenerated a different size than edges_rr_count (bug)");
        }
    });
}

// Pass 1: out_rowptr[i+1] = size of user i's noisy list, out_rowptr[0] = 0 (not summed).
static void edges_rr_count(py::array rowptr, py::array col, uint64_t seed, uint32_t st_t, uint32_t c_t,
                           uint32_t st_f, uint32_t c_f, py::array p_true, py::array p_false, py::array pub,
                           py::array out_rowptr, bool by_degree) {
    int64_t n = rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    RRArgs A = rr_args(n, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub);
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    int64_t* out = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        rr_count_t(A, rp, c, out, by_degree);
    });
}

// Pass 2: fill out_col (same dtype as col) given the prefix-summed out_rowptr.
static void edges_rr_fill(py::array rowptr, py::array col, uint64_t seed, uint32_t st_t, uint32_t c_t,
                          uint32_t st_f, uint32_t c_f, py::array p_true, py::array p_false, py::array pub,
                          py::array out_rowptr, py::array out_col) {
    int64_t n = rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    RRArgs A = rr_args(n, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub);
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const int64_t* orp = cdata_ptr<int64_t>(out_rowptr, "out_rowptr");
    check_size(out_col, orp[n], "out_col");
    with_index(col, "col", [&](auto c) {
        auto* oc = like_index<index_t<decltype(c)>>(out_col, "out_col");
        py::gil_scoped_release nogil;
        rr_fill_t(A, rp, c, orp, oc);
    });
}

// ---- one pass: sample into row blocks, then write the outputs --------------------------------
// The two-pass kernels above draw every random number twice (count, then fill).  These draw
// each once: rows are cut into blocks, threads take blocks in turn (so a core shared with
// another process slows one thread, not the whole call) and append each block's sorted rows to
// the block's own buffer, writing the row sizes, prefix-summed at the end; the caller then
// allocates the outputs at their exact size, and EdgeSample::write copies each block into
// place (CSR columns, values, and/or a PyG edge_index) and frees it.  Every row uses the same
// cells and words as the two-pass kernels, so the output is the same bits for any thread
// count and any block cut.  Scratch: the block buffers (the size of the output columns, freed
// block by block while writing) and O(max degree + row output) per thread.

// Growable, uninitialised buffer (std::vector::resize would zero-fill).  On Linux its pages are
// mapped directly (grown by mremap, no copy) and unmapped on release, so the memory of a block
// leaves the process as soon as it is written out: the peak is input + output + the blocks in
// flight, not + all buffers (a malloc arena would keep them resident).
template <class T>
struct RawBuf {
    T* p = nullptr;
    int64_t size = 0, cap = 0;
    RawBuf() = default;
    RawBuf(const RawBuf&) = delete;
    RawBuf& operator=(const RawBuf&) = delete;
    RawBuf(RawBuf&& o) noexcept : p(o.p), size(o.size), cap(o.cap) {
        o.p = nullptr;
        o.size = o.cap = 0;
    }
    RawBuf& operator=(RawBuf&& o) noexcept {
        if (this != &o) {
            release();
            p = o.p;
            size = o.size;
            cap = o.cap;
            o.p = nullptr;
            o.size = o.cap = 0;
        }
        return *this;
    }
    ~RawBuf() { release(); }
    T* room(int64_t extra) {  // `extra` writable slots after the end
        if (size + extra > cap) grow(std::max<int64_t>(size + extra, cap + cap / 2 + 64));
        return p + size;
    }
    void release() {
        if (!p) return;
#if defined(__linux__)
        munmap(p, (size_t)cap * sizeof(T));
#else
        std::free(p);
#endif
        p = nullptr;
        size = cap = 0;
    }

  private:
    void grow(int64_t c) {
#if defined(__linux__)
        const size_t page = 4096, bytes = ((size_t)c * sizeof(T) + page - 1) / page * page;
        void* q = p ? mremap(p, (size_t)cap * sizeof(T), bytes, MREMAP_MAYMOVE)
                    : mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED) throw std::bad_alloc();
        p = static_cast<T*>(q);
        cap = (int64_t)(bytes / sizeof(T));
#else
        T* q = static_cast<T*>(std::realloc(p, (size_t)c * sizeof(T)));
        if (!q) throw std::bad_alloc();
        p = q;
        cap = c;
#endif
    }
};

struct EdgeSample {
    int64_t n = 0, nnz = 0;
    bool wide = false;     // int64 columns
    bool has_val = false;  // per-entry int64 values (LocalLap candidates)
    bool written = false;
    py::array rowptr;      // the out_rowptr the sampler filled (kept alive for write)
    std::vector<int64_t> cuts;
    std::vector<RawBuf<int32_t>> c32;
    std::vector<RawBuf<int64_t>> c64, val;

    template <class C>
    std::vector<RawBuf<C>>& cols() {
        if constexpr (std::is_same_v<C, int32_t>)
            return c32;
        else
            return c64;
    }
    void write(py::array out_col, py::array out_val, py::array out_ei, int layout);
};

// Cut [0, n) into blocks of about equal weight W(i + 1) - W(i) (W non-decreasing, W(0) = 0);
// many blocks per thread, so the dynamic hand-out balances a busy core.  Never changes output.
template <class W>
static std::vector<int64_t> row_blocks(int64_t n, W&& weight, double unit = 32768.0) {
    int nt = std::max(1, get_num_threads());
    double total = weight(n);
    int64_t nb = nt == 1 ? 1 : std::max<int64_t>(1, std::min<int64_t>((int64_t)(total / unit), 64 * (int64_t)nt));
    nb = std::min<int64_t>(nb, std::max<int64_t>(n, 1));
    std::vector<int64_t> cuts(nb + 1, n);
    cuts[0] = 0;
    int64_t lo = 0;
    for (int64_t b = 1; b < nb; ++b) {
        double target = total * (double)b / (double)nb;
        int64_t a = lo, z = n;  // first i with weight(i) >= target
        while (a < z) {
            int64_t mid = a + (z - a) / 2;
            if (weight(mid) < target)
                a = mid + 1;
            else
                z = mid;
        }
        cuts[b] = lo = a;
    }
    return cuts;
}

// A short sorted exclusion list as offsets b[t] = excl[t] - t - base (non-decreasing): the k-th
// free slot from base is base + k + #{t : b[t] <= k}.  Counted for each k on its own by a compare
// over the padded list (vectorised), with no chain of dependent loads from one step of a merge
// to the next.  Offsets fit int32 (n <= 2^31 - 1).
struct ShortSkip {
    static constexpr int64_t MAX = 60;
    alignas(16) int32_t b[64];
    int64_t len;
    template <class At>
    ShortSkip(int64_t m, At&& at) : len((m + 3) & ~(int64_t)3) {
        for (int64_t t = 0; t < m; ++t) b[t] = (int32_t)at(t);
        for (int64_t t = m; t < len; ++t) b[t] = std::numeric_limits<int32_t>::max();
    }
    int64_t count(int64_t k) const {
        const int32_t k32 = (int32_t)k;
        int32_t cnt = 0;
        for (int64_t t = 0; t < len; ++t) cnt += b[t] <= k32;
        return cnt;
    }
};

template <class C>
struct RowScratch {
    std::vector<int64_t> pos;  // false positions among the non-neighbours
    std::vector<int64_t> b;    // exclusion list N(i) + {i}, minus its index, + sentinel
    std::vector<C> ids;        // node ids of the false positions (when they must be merged)
    GeomCache geom;            // p_false's geometric params, reused while rows share it
};

// Row i appended, sorted, to `out`: the same draws as rr_row_fill, reordered by cell (the true
// cell's Bernoullis in neighbour order, the false cell's gaps in position order).  The k-th
// non-neighbour is k + #{t : excl[t] - t <= k} (excl = N(i) + {i}, sorted), counted for each k
// alone when the list is short, else by a merge whose only branch is the loop test.
template <class Ci, class C>
static void rr_row_append(const RRArgs& A, int64_t i, const Ci* nb, int64_t d, RawBuf<C>& out, RowScratch<C>& s,
                          std::vector<C>& kbuf) {
    if (A.pub && A.pub[i]) {
        std::copy(nb, nb + d, out.room(d));
        out.size += d;
        return;
    }
    const double pt = A.pt[i];
    const C* kept = kbuf.data();
    int64_t nk = 0;
    if (pt > 0.0 && d > 0) {
        if ((int64_t)kbuf.size() < d) kbuf.resize(d);
        C* kb = kbuf.data();
        kept = kb;
        if (pt >= 1.0) {  // every true edge kept, no draw
            std::copy(nb, nb + d, kb);
            nk = d;
        } else {
            CellRng rt = true_cell(A, i);
            const BernoulliWords keep(pt);  // keep_true's draws, its first digit taken once per row
            for (int64_t e = 0; e < d; ++e) {
                kb[nk] = (C)nb[e];
                nk += keep(rt) ? 1 : 0;
            }
        }
    }
    auto& pos = s.pos;
    pos.clear();
    rr_false_positions(A, i, A.n - 1 - d, [&](int64_t k) { pos.push_back(k); }, &s.geom);
    const int64_t F = (int64_t)pos.size();
    C* w = out.room(nk + F);
    if (F > 0) {
        auto& b = s.b;
        b.resize(d + 2);
        const int64_t xpos = std::lower_bound(nb, nb + d, (Ci)i) - nb;
        for (int64_t t = 0; t < xpos; ++t) b[t] = (int64_t)nb[t] - t;
        b[xpos] = i - xpos;
        for (int64_t t = xpos; t < d; ++t) b[t + 1] = (int64_t)nb[t] - (t + 1);
        b[d + 1] = std::numeric_limits<int64_t>::max();  // sentinel: the merge never runs past it
        // node ids straight into the output when no true edge was kept (DPRR's usual case)
        C* wc = nullptr;
        if (nk == 0) {
            wc = w;
        } else {
            s.ids.resize(F);
            wc = s.ids.data();
        }
        if (d + 1 <= ShortSkip::MAX && A.n <= std::numeric_limits<int32_t>::max()) {
            ShortSkip sk(d + 1, [&](int64_t t) { return b[t]; });
            for (int64_t f = 0; f < F; ++f) wc[f] = (C)(pos[f] + sk.count(pos[f]));
        } else {
            int64_t t = 0, f = 0;
            while (f < F) {
                const int64_t k = pos[f];
                const bool adv = b[t] <= k;
                wc[f] = (C)(k + t);  // rewritten until f moves on
                t += adv;
                f += !adv;
            }
        }
    }
    if (nk > 0) {  // both sorted, disjoint (kept is in N(i), the others are not)
        const C* ids = s.ids.data();
        int64_t x = 0, f = 0, o = 0;
        while (x < nk && f < F) {
            if (kept[x] < ids[f])
                w[o++] = kept[x++];
            else
                w[o++] = ids[f++];
        }
        for (; x < nk; ++x) w[o++] = kept[x];
        for (; f < F; ++f) w[o++] = ids[f];
    }
    out.size += nk + F;
}

template <class Ci, class C>
static void rr_sample_t(const RRArgs& A, const int64_t* rp, const Ci* col, int64_t* orp, bool by_degree,
                        EdgeSample& S) {
    const int64_t n = A.n;
    S.cuts = by_degree ? row_blocks(n, [&](int64_t i) { return (double)(rp[i] - rp[0]) + (double)i; })
                       : row_blocks(n, [&](int64_t i) { return (double)i; }, 4096.0);
    const int64_t nb = (int64_t)S.cuts.size() - 1;
    auto& bufs = S.cols<C>();
    bufs.resize(nb);
    for_blocks(nb, [&](int64_t blk) {
        RowScratch<C> s;
        std::vector<C> kbuf;
        // filled in a local and moved in at the end: the RawBufs of neighbouring blocks share a
        // cache line, and writing their sizes row by row from two threads made it bounce
        RawBuf<C> out;
        double expect = 0.0;  // reserve the expected size (+ 4 sd): usually no regrowth
        for (int64_t i = S.cuts[blk]; i < S.cuts[blk + 1]; ++i) {
            double d = (double)(rp[i + 1] - rp[i]);
            expect += (A.pub && A.pub[i]) ? d : std::min(1.0, A.pt[i]) * d + std::min(1.0, A.pf[i]) * ((double)n - 1.0 - d);
        }
        out.room((int64_t)(expect + 4.0 * std::sqrt(expect) + 64.0));
        for (int64_t i = S.cuts[blk]; i < S.cuts[blk + 1]; ++i) {
            const int64_t before = out.size;
            rr_row_append(A, i, col + rp[i], rp[i + 1] - rp[i], out, s, kbuf);
            orp[i + 1] = out.size - before;
        }
        bufs[blk] = std::move(out);
    });
    orp[0] = 0;
    for (int64_t i = 0; i < n; ++i) orp[i + 1] += orp[i];
    S.nnz = orp[n];
}

// f((T*)nullptr) with T the block buffers' column type: int32 whenever the node ids fit, whatever
// the input's dtype (an int64 input is often the caller's edge_index row, read in place; the
// blocks are scratch, and write() widens them to the output's dtype).
template <class F>
static void with_block_index(int64_t n, F&& f) {
    if (n <= (int64_t)std::numeric_limits<int32_t>::max())
        f((int32_t*)nullptr);
    else
        f((int64_t*)nullptr);
}

// One pass: out_rowptr (n + 1) gets the prefix-summed row sizes; returns the sample, whose
// write() fills the columns (int32 or int64) and / or an edge_index.
static std::unique_ptr<EdgeSample> edges_rr_sample(py::array rowptr, py::array col, uint64_t seed, uint32_t st_t,
                                                   uint32_t c_t, uint32_t st_f, uint32_t c_f, py::array p_true,
                                                   py::array p_false, py::array pub, py::array out_rowptr,
                                                   bool by_degree) {
    int64_t n = rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    RRArgs A = rr_args(n, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub);
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    auto S = std::make_unique<EdgeSample>();
    S->n = n;
    S->rowptr = out_rowptr;
    with_index(col, "col", [&](auto c) {
        with_block_index(n, [&](auto blk) {
            using C = index_t<decltype(blk)>;
            S->wide = std::is_same_v<C, int64_t>;
            py::gil_scoped_release nogil;
            rr_sample_t<index_t<decltype(c)>, C>(A, rp, c, orp, by_degree, *S);
        });
    });
    return S;
}

template <class B, class C>
static void sample_write_t(EdgeSample& S, const int64_t* orp, C* oc, int64_t* ov, int64_t* ei, int layout) {
    auto& bufs = S.cols<B>();
    const int64_t nb = (int64_t)bufs.size(), nnz = S.nnz;
    int64_t* e_col = ei ? ei + (layout == 0 ? 0 : nnz) : nullptr;  // layout 0: (col, row), 1: (row, col)
    int64_t* e_row = ei ? ei + (layout == 0 ? nnz : 0) : nullptr;
    for_blocks(nb, [&](int64_t blk) {
        const int64_t r0 = S.cuts[blk], r1 = S.cuts[blk + 1], off = orp[r0];
        const RawBuf<B>& src = bufs[blk];
        if (oc) std::copy(src.p, src.p + src.size, oc + off);  // (a memcpy when B = C)
        if (ov) std::memcpy(ov + off, S.val[blk].p, (size_t)src.size * sizeof(int64_t));
        if (ei) {
            for (int64_t k = 0; k < src.size; ++k) e_col[off + k] = (int64_t)src.p[k];
            for (int64_t i = r0; i < r1; ++i) std::fill(e_row + orp[i], e_row + orp[i + 1], i);
        }
        bufs[blk].release();
        if (S.has_val) S.val[blk].release();
    });
}

void EdgeSample::write(py::array out_col, py::array out_val, py::array out_ei, int layout) {
    if (written) throw std::runtime_error("EdgeSample.write: already written (the buffers are freed)");
    if (layout != 0 && layout != 1) throw std::invalid_argument("layout: expected 0 (col, row) or 1 (row, col)");
    const int64_t* orp = cdata_ptr<int64_t>(rowptr, "rowptr");
    if (orp[n] != nnz) throw std::invalid_argument("rowptr: changed since the sample was drawn");
    const int64_t nb = (int64_t)cuts.size() - 1;
    for (int64_t b = 0; b < nb; ++b) {
        int64_t sz = wide ? c64[b].size : c32[b].size;
        if (orp[cuts[b + 1]] - orp[cuts[b]] != sz) throw std::invalid_argument("rowptr: changed since the sample was drawn");
    }
    int64_t* ov = nullptr;
    if (out_val.size() != 0) {
        if (!has_val) throw std::invalid_argument("out_val: this sample has no values");
        check_size(out_val, nnz, "out_val");
        ov = data_ptr<int64_t>(out_val, "out_val", true);
    }
    int64_t* ei = nullptr;
    if (out_ei.size() != 0) {
        check_size(out_ei, 2 * nnz, "out_ei");
        ei = data_ptr<int64_t>(out_ei, "out_ei", true);
    }
    // the blocks (int32 unless n needs int64) into out_col's dtype; int32 out of int64 blocks
    // could truncate, so it is refused
    auto run = [&](auto* oc) {
        using C = index_t<decltype(oc)>;
        py::gil_scoped_release nogil;
        if (wide)
            sample_write_t<int64_t, C>(*this, orp, oc, ov, ei, layout);
        else
            sample_write_t<int32_t, C>(*this, orp, oc, ov, ei, layout);
    };
    if (out_col.size() == 0) {
        run((int64_t*)nullptr);
    } else {
        check_size(out_col, nnz, "out_col");
        if (wide && py::isinstance<carray<int32_t>>(out_col))
            throw std::invalid_argument("out_col: expected int64 (the node ids need 64 bits)");
        with_index_mut(out_col, "out_col (int32 or int64)", [&](auto oc) { run(oc); });
    }
    written = true;
}

// (2, nnz) int64 edge_index of a CSR in one parallel pass: layout 0 gives (col, row) (the
// "none" rule: node i aggregates over its own list), 1 gives (row, col).
template <class C>
static void csr_to_ei_t(int64_t n, const int64_t* rp, const C* col, int64_t* ei, int layout) {
    const int64_t nnz = rp[n];
    int64_t* e_col = ei + (layout == 0 ? 0 : nnz);
    int64_t* e_row = ei + (layout == 0 ? nnz : 0);
    const std::vector<int64_t> cuts = row_blocks(n, [&](int64_t i) { return (double)rp[i] + (double)i; });
    for_blocks((int64_t)cuts.size() - 1, [&](int64_t blk) {
        const int64_t b = cuts[blk], e = cuts[blk + 1];
        for (int64_t k = rp[b]; k < rp[e]; ++k) e_col[k] = (int64_t)col[k];
        for (int64_t i = b; i < e; ++i) std::fill(e_row + rp[i], e_row + rp[i + 1], i);
    });
}

static void csr_to_edge_index(py::array rowptr, py::array col, py::array out_ei, int layout) {
    int64_t n = rowptr.size() - 1;
    if (layout != 0 && layout != 1) throw std::invalid_argument("layout: expected 0 (col, row) or 1 (row, col)");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    if (rp[0] != 0 || rp[n] != (int64_t)col.size()) throw std::invalid_argument("rowptr: must run from 0 to len(col)");
    check_size(out_ei, 2 * (int64_t)col.size(), "out_ei");
    int64_t* ei = data_ptr<int64_t>(out_ei, "out_ei", true);
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        csr_to_ei_t(n, rp, c, ei, layout);
    });
}

// ---- LocalLap -------------------------------------------------------------------------------
// Values of the true upper-triangular entries in round rnd (ll_edge_row, csrc/common/edges.h):
// out_val[e] = one + L for the entries (i, j > i) at or above the threshold lo, LL_NOT_CAND for
// the others, INT64_MIN for j < i.  Round rnd >= 1 decides only the entries still LL_NOT_CAND
// (out_val holds the earlier rounds' result).  p = P[L >= lo - one] (double) for the skip path.
template <class C>
static void ll_edge_values_t(int64_t n, const int64_t* rp, const C* col, uint64_t seed, uint64_t t, uint64_t s,
                             int64_t one, uint32_t rnd, int64_t lo, int64_t hi, double p, int64_t* out) {
    const bool fast = ll_edge_fast(rnd, lo, hi, one);
    const GeomParams gp = geom_params(fast ? p : 0.0);  // once per call
    // blocks handed out in turn: a core shared with another process does not hold up the call
    const std::vector<int64_t> cuts = row_blocks(n, [&](int64_t i) { return (double)(rp[i] - rp[0]) + (double)i; });
    for_blocks((int64_t)cuts.size() - 1, [&](int64_t blk) {
        for (int64_t i = cuts[blk]; i < cuts[blk + 1]; ++i)
            ll_edge_row(i, col + rp[i], rp[i + 1] - rp[i], seed, t, s, one, rnd, lo, hi, fast, gp, out + rp[i]);
    });
}

static void locallap_edge_values(py::array rowptr, py::array col, uint64_t seed, uint64_t t, uint64_t s,
                                 int64_t one, uint32_t rnd, int64_t lo, int64_t hi, double p, py::array out_val) {
    int64_t n = rowptr.size() - 1;
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    check_size(out_val, col.size(), "out_val");
    int64_t* o = data_ptr<int64_t>(out_val, "out_val", true);
    if (t == 0 || s == 0) throw std::invalid_argument("t, s: expected >= 1");
    if (rnd > 254) throw std::invalid_argument("rnd: expected <= 254");
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        ll_edge_values_t(n, rp, c, seed, t, s, one, rnd, lo, hi, p, o);
    });
}

// Round 0 on the skip path (ll_edge_fast) without the dense output: the candidates' indices in
// col (increasing) and values, the same draws as locallap_edge_values (ll_edge_skip_candidates).
// There are few (about T / n0 of the upper entries), so per-block vectors joined in order.
static py::tuple locallap_edge_candidates(py::array rowptr, py::array col, uint64_t seed, uint64_t t, uint64_t s,
                                          int64_t one, int64_t lo, double p) {
    int64_t n = rowptr.size() - 1;
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    if (t == 0 || s == 0) throw std::invalid_argument("t, s: expected >= 1");
    if (!ll_edge_fast(0, lo, I64_MAX, one)) throw std::invalid_argument("lo: the skip path needs lo - one >= 1");
    const GeomParams gp = geom_params(p);
    std::vector<std::vector<int64_t>> idx, val;
    with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        const std::vector<int64_t> cuts = row_blocks(n, [&](int64_t i) { return (double)(rp[i] - rp[0]) + (double)i; });
        const int64_t nb = (int64_t)cuts.size() - 1;
        idx.resize(nb);
        val.resize(nb);
        for_blocks(nb, [&](int64_t blk) {
            for (int64_t i = cuts[blk]; i < cuts[blk + 1]; ++i)
                ll_edge_skip_candidates(i, c + rp[i], rp[i + 1] - rp[i], seed, t, s, lo, gp, [&](int64_t e, int64_t v) {
                    idx[blk].push_back(rp[i] + e);
                    val[blk].push_back(v);
                });
        });
    });
    int64_t total = 0;
    for (auto& v : idx) total += (int64_t)v.size();
    carray<int64_t> oi(total), ov(total);
    int64_t* pi = oi.mutable_data();
    int64_t* pv = ov.mutable_data();
    for (size_t b = 0; b < idx.size(); ++b) {
        std::copy(idx[b].begin(), idx[b].end(), pi);
        std::copy(val[b].begin(), val[b].end(), pv);
        pi += idx[b].size();
        pv += val[b].size();
    }
    return py::make_tuple(oi, ov);
}

// `split` needs lo >= 1 and (hi - lo) s < 2^63 (see ll_zero_row).
static void check_split(bool split, int64_t lo, int64_t hi, uint64_t s) {
    if (split && !(lo >= 1 && hi > lo && (uint64_t)(hi - lo) <= (uint64_t)I64_MAX / s))
        throw std::invalid_argument("split: needs 1 <= lo < hi and (hi - lo) * s < 2^63");
}

template <class C>
static void ll_zero_t(int64_t n, const int64_t* erp, const C* ecol, uint64_t seed, uint32_t round, double pi,
                      int64_t lo, int64_t hi, bool split, uint64_t t, uint64_t s, int64_t* orp, C* oc, int64_t* ov) {
    if (!oc) {
        orp[0] = 0;
        parallel_for(n, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i)
                orp[i + 1] = ll_zero_row(i, n, ecol + erp[i], erp[i + 1] - erp[i], seed, round, pi, lo, hi, split, t, s,
                                         false, [](int64_t, int64_t) {});
        }, 256);
        return;
    }
    parallel_for_weighted(n, orp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            C* wc = oc + orp[i];
            int64_t* wv = ov + orp[i];
            int64_t o = 0;
            int64_t got = ll_zero_row(i, n, ecol + erp[i], erp[i + 1] - erp[i], seed, round, pi, lo, hi, split, t, s,
                                      true, [&](int64_t c, int64_t v) {
                                          if (o < orp[i + 1] - orp[i]) {  // never past the row (checked below)
                                              wc[o] = (C)c;
                                              wv[o] = v;
                                          }
                                          ++o;
                                      });
            if (got != orp[i + 1] - orp[i])
                throw std::runtime_error("locallap_zero_fill: count mismatch (bug)");
        }
    });
}

static void locallap_zero(py::array excl_rowptr, py::array excl_col, uint64_t seed, uint32_t round, double pi,
                          int64_t lo, int64_t hi, bool split, uint64_t t, uint64_t s, py::array out_rowptr, py::array out_col,
                          py::array out_val, bool fill) {
    int64_t n = excl_rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    if (t == 0 || s == 0) throw std::invalid_argument("t, s: expected >= 1");
    check_split(split, lo, hi, s);
    const int64_t* erp = cdata_ptr<int64_t>(excl_rowptr, "excl_rowptr");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    int64_t* ov = nullptr;
    if (fill) {
        check_size(out_col, orp[n], "out_col");
        check_size(out_val, orp[n], "out_val");
        ov = data_ptr<int64_t>(out_val, "out_val", true);
    }
    with_index(excl_col, "excl_col", [&](auto c) {
        auto* oc = like_index<index_t<decltype(c)>>(out_col, "out_col", fill);
        py::gil_scoped_release nogil;
        ll_zero_t(n, erp, c, seed, round, pi, lo, hi, split, t, s, orp, oc, ov);
    });
}

// One pass of ll_zero_row: the picks of row i appended to the block's buffers (the positions
// from the gap cell first, then one value per pick from the value cell, in pick order: the
// same words as ll_zero_row).
template <class Ci, class C>
static void ll_zero_append(int64_t i, int64_t n, const Ci* ex, int64_t le, uint64_t seed, uint32_t round, double pi,
                           int64_t lo, int64_t hi, uint64_t t, uint64_t s, const GeomParams& gp, const ExpNeg* high,
                           RawBuf<C>& oc, RawBuf<int64_t>& ov, std::vector<int64_t>& pos) {
    int64_t skip = upper_index(ex, le, i);
    ex += skip;
    le -= skip;
    int64_t m = n - 1 - i - le;
    if (m <= 0 || pi <= 0.0) return;
    CellRng rg(seed, STREAM_LOCALLAP, LOCALLAP_ROW_OFFSET + (uint64_t)i, 2u * round);
    pos.clear();
    for (int64_t k = -1;;) {
        int64_t g = geom_draw(rg, gp);
        if (g >= m - 1 - k) break;
        k += g + 1;
        pos.push_back(k);
    }
    const int64_t F = (int64_t)pos.size();
    if (F == 0) return;
    CellRng rv(seed, STREAM_LOCALLAP, LOCALLAP_ROW_OFFSET + (uint64_t)i, 2u * round + 1u);
    C* wc = oc.room(F);
    int64_t* wv = ov.room(F);
    if (le <= ShortSkip::MAX && n <= std::numeric_limits<int32_t>::max()) {  // SkipMap's ids, counted
        ShortSkip sk(le, [&](int64_t q) { return (int64_t)ex[q] - (i + 1) - q; });
        for (int64_t f = 0; f < F; ++f) wc[f] = (C)(i + 1 + pos[f] + sk.count(pos[f]));
    } else {
        SkipMap<Ci> sm(ex, le, -1, i + 1);
        for (int64_t f = 0; f < F; ++f) wc[f] = (C)sm.map(pos[f]);
    }
    for (int64_t f = 0; f < F; ++f)
        wv[f] = high && bernoulli_exp_neg_any(rv, *high) ? LL_HIGH : dlap_band(rv, t, s, lo, hi);
    oc.size += F;
    ov.size += F;
}

static std::unique_ptr<EdgeSample> locallap_zero_sample(py::array excl_rowptr, py::array excl_col, uint64_t seed,
                                                        uint32_t round, double pi, int64_t lo, int64_t hi, bool split,
                                                        uint64_t t, uint64_t s, py::array out_rowptr) {
    int64_t n = excl_rowptr.size() - 1;
    check_size(out_rowptr, n + 1, "out_rowptr");
    if (t == 0 || s == 0) throw std::invalid_argument("t, s: expected >= 1");
    check_split(split, lo, hi, s);
    const int64_t* erp = cdata_ptr<int64_t>(excl_rowptr, "excl_rowptr");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    auto S = std::make_unique<EdgeSample>();
    S->n = n;
    S->rowptr = out_rowptr;
    S->has_val = true;
    // the same for every row: the gap law and the split's exponent, taken once per call
    const GeomParams gp = geom_params(pi);
    const ExpNeg high = exp_neg_of(split ? (uint64_t)(hi - lo) * s : 0, t);
    with_index(excl_col, "excl_col", [&](auto ec) {
        with_block_index(n, [&](auto blk_t) {
            using Ci = index_t<decltype(ec)>;
            using C = index_t<decltype(blk_t)>;
            S->wide = std::is_same_v<C, int64_t>;
            py::gil_scoped_release nogil;
            // row i has about pi (n - 1 - i) picks: cut by that, plus a constant per row
            const double dn = (double)n;
            S->cuts = row_blocks(n, [&](int64_t i) {
                double x = (double)i;
                return pi * (x * (dn - 1.0) - x * (x - 1.0) / 2.0) + 4.0 * x;
            });
            const int64_t nb = (int64_t)S->cuts.size() - 1;
            auto& bc = S->cols<C>();
            bc.resize(nb);
            S->val.resize(nb);
            for_blocks(nb, [&](int64_t blk) {
                std::vector<int64_t> pos;
                RawBuf<C> oc;  // locals, moved in at the end (no false sharing: see rr_sample_t)
                RawBuf<int64_t> ov;
                for (int64_t i = S->cuts[blk]; i < S->cuts[blk + 1]; ++i) {
                    const int64_t before = oc.size;
                    ll_zero_append<Ci, C>(i, n, ec + erp[i], erp[i + 1] - erp[i], seed, round, pi, lo, hi, t, s, gp,
                                          split ? &high : nullptr, oc, ov, pos);
                    orp[i + 1] = oc.size - before;
                }
                bc[blk] = std::move(oc);
                S->val[blk] = std::move(ov);
            });
            orp[0] = 0;
            for (int64_t i = 0; i < n; ++i) orp[i + 1] += orp[i];
            S->nnz = orp[n];
        });
    });
    return S;
}

// ---- LocalLap output: kept upper entries -> symmetric graph, one kernel -------------------------
// The kept upper triangle U is the union of disjoint sources (each round's zero picks, the true
// candidates): each a CSR of upper entries (j > i, sorted within a row) with a keep mask.  The
// output is U + U^T with row i = (U^T row i, ascending) then (U row i, ascending), the graph
// _csr_combine(transpose(U), U, "lower") builds, written in two passes over the sources (count,
// fill) instead of five over intermediate CSRs.  The lower halves are a counting sort by column
// with per-chunk cursors (bucket_starts' scheme: chunk t's rows land after chunk t-1's in every
// row), so the output never depends on the thread count.  Outputs: rowptr, and either the (2, nnz)
// int64 edge_index (layout 1, (row, col); its second row is then the CSR's col) or col alone.
// Row i of U, ascending, at w: the kept entries of every source appended (a branch-free filtered
// copy), then sorted when more than one source has entries in the row (rare: the true candidates).
// The copy writes every entry at w[q] and advances q only on a kept one, so it stops once the row's
// `cap` kept entries are in: a write at w[cap] would land in the next row's lower half.
template <class C, class W>
static void ll_upper_row(int64_t i, int K, const std::vector<const int64_t*>& rps, const std::vector<const C*>& cols,
                         const std::vector<const bool*>& keeps, W* w, int64_t cap) {
    int64_t q = 0;
    int nonempty = 0;
    for (int p = 0; p < K && q < cap; ++p) {
        const int64_t a = rps[p][i], z = rps[p][i + 1];
        nonempty += a < z;
        const C* cp = cols[p];
        const bool* kp = keeps[p];
        for (int64_t k = a; k < z && q < cap; ++k) {
            w[q] = (W)cp[k];
            q += kp[k];
        }
    }
    if (nonempty > 1) std::sort(w, w + q);
}

template <class C>
static void ll_symmetric_t(int64_t n, const std::vector<const int64_t*>& rps, const std::vector<const C*>& cols,
                           const std::vector<const bool*>& keeps, int64_t half, int64_t* orp, C* oc, int64_t* ei) {
    const int K = (int)rps.size();
    std::vector<int64_t> w(n + 1, 0);  // row weights: source entries, for the chunk cut
    for (int64_t i = 0; i <= n; ++i)
        for (int p = 0; p < K; ++p) w[i] += rps[p][i];
    const int64_t E = w[n];
    // chunks: the threads, fewer when the cursors (n int64 each) would outweigh the output
    int nt = (int)std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), (4 * half) / std::max<int64_t>(1, n)));
    if (E < 65536) nt = 1;
    std::vector<int64_t> rcut(nt + 1, n);
    rcut[0] = 0;
    for (int t = 1; t < nt; ++t) rcut[t] = std::lower_bound(w.begin(), w.begin() + n, E * t / nt) - w.begin();
    std::vector<std::vector<int64_t>> cur(nt);
    std::vector<int64_t>& up = w;  // reused: up[i] = |U row i|, then the start of row i's upper half
    std::vector<char> bad(nt, 0);
    parallel_for(nt, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            cur[t].assign(n, 0);
            int64_t* c = cur[t].data();
            for (int64_t i = rcut[t]; i < rcut[t + 1]; ++i) {
                int64_t u = 0;
                for (int p = 0; p < K; ++p)
                    for (int64_t k = rps[p][i]; k < rps[p][i + 1]; ++k) {
                        if (!keeps[p][k]) continue;
                        const int64_t j = (int64_t)cols[p][k];
                        if (j <= i || j >= n) {  // not an upper entry: would write out of bounds
                            bad[t] = 1;
                            return;
                        }
                        ++c[j];
                        ++u;
                    }
                up[i] = u;
            }
        }
    }, 1);
    for (char f : bad)
        if (f) throw std::invalid_argument("cols: a kept entry is not above the diagonal (j <= i or j >= n)");
    // the lower halves in two steps for int32 columns (scatter.h: (j, i) pairs to buckets of rows
    // j, then each bucket into its rows); one step, straight to the rows, misses the cache on
    // almost every entry.  Bucket offsets from the per-chunk counts, before they become cursors.
    constexpr bool two_step = std::is_same_v<C, int32_t>;
    std::optional<TwoStepScatter> sc;
    if constexpr (two_step) sc.emplace(n, 2 * half, nt, [&](int t, int64_t j) { return cur[t][j]; });
    orp[0] = 0;  // serial O(nt n): counts -> cursors in place, then rowptr
    for (int64_t j = 0; j < n; ++j) {
        int64_t pos = orp[j];
        for (int t = 0; t < nt; ++t) {
            const int64_t c = cur[t][j];
            cur[t][j] = pos;
            pos += c;
        }
        orp[j + 1] = pos + up[j];
        up[j] = pos;
    }
    if (orp[n] != 2 * half) throw std::invalid_argument("keep: the sources keep " + std::to_string(orp[n] / 2) +
                                                        " entries, expected " + std::to_string(half));
    // edge_index: the columns are scattered as C into ei's first row (2T C fit in 2T int64), then
    // widened into the second row and the first row filled with the row ids, in two parallel
    // passes: the scatter then works on half the bytes (int32), as in the col output
    C* o_col = ei ? reinterpret_cast<C*>(ei) : oc;
    // the pairs (half of them, 8 bytes each) in ei's second row, still free, or a buffer
    std::unique_ptr<uint64_t[]> own(two_step && !ei ? new uint64_t[half] : nullptr);
    uint64_t* pairs = ei ? reinterpret_cast<uint64_t*>(ei + 2 * half) : own.get();
    // chunk t's upper rows written in place, emit(j, i) for each entry (the lower half's (j, i))
    auto rows = [&](int64_t t, auto&& emit) {
        for (int64_t i = rcut[t]; i < rcut[t + 1]; ++i) {
            const int64_t u0 = up[i], u1 = orp[i + 1];
            ll_upper_row(i, K, rps, cols, keeps, o_col + u0, u1 - u0);
            for (int64_t x = u0; x < u1; ++x) emit((int64_t)o_col[x], i);
        }
    };
    parallel_for(nt, [&](int64_t b, int64_t e, int) {
        for (int64_t t = b; t < e; ++t) {
            if constexpr (two_step) {
                sc->append((int)t, pairs, [&](auto push) { rows(t, [&](int64_t j, int64_t i) { push(j, (uint32_t)i); }); });
            } else {
                int64_t* c = cur[t].data();
                rows(t, [&](int64_t j, int64_t i) { o_col[c[j]++] = (C)i; });
            }
        }
    }, 1);
    if constexpr (two_step) sc->scatter(pairs, cur, o_col);  // chunk by chunk: the one-step output
    if (!ei) return;
    const int64_t nnz = orp[n];
    int64_t* e_col = ei + nnz;
    parallel_for(nnz, [&](int64_t b, int64_t e, int) {
        for (int64_t x = b; x < e; ++x) e_col[x] = (int64_t)o_col[x];
    });
    parallel_for_weighted(n, orp, [&](int64_t b, int64_t e, int) {  // overwrites o_col: after the widening
        for (int64_t i = b; i < e; ++i) std::fill(ei + orp[i], ei + orp[i + 1], i);
    });
}

static void locallap_symmetric(std::vector<py::array> rowptrs, std::vector<py::array> cols, std::vector<py::array> keeps,
                               int64_t half, py::array out_rowptr, py::array out_col, py::array out_ei) {
    const size_t K = rowptrs.size();
    if (K == 0 || cols.size() != K || keeps.size() != K)
        throw std::invalid_argument("rowptrs, cols, keeps: expected the same number (>= 1) of sources");
    const int64_t n = (int64_t)out_rowptr.size() - 1;
    if (n < 0 || half < 0) throw std::invalid_argument("out_rowptr, half: expected n + 1 >= 1 entries and half >= 0");
    std::vector<const int64_t*> rps(K);
    std::vector<const bool*> kp(K);
    for (size_t p = 0; p < K; ++p) {
        check_size(rowptrs[p], n + 1, "rowptrs[p]");
        rps[p] = cdata_ptr<int64_t>(rowptrs[p], "rowptrs[p]");
        if (rps[p][0] != 0 || rps[p][n] != (int64_t)cols[p].size())
            throw std::invalid_argument("rowptrs[p]: must run from 0 to len(cols[p])");
        for (int64_t i = 0; i < n; ++i)
            if (rps[p][i + 1] < rps[p][i]) throw std::invalid_argument("rowptrs[p]: must be non-decreasing");
        check_size(keeps[p], (int64_t)cols[p].size(), "keeps[p]");
        kp[p] = cdata_ptr<bool>(keeps[p], "keeps[p] (bool)");
    }
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    const bool to_ei = out_ei.size() != 0;
    if (to_ei) check_size(out_ei, 4 * half, "out_ei");
    else check_size(out_col, 2 * half, "out_col");
    int64_t* ei = to_ei ? data_ptr<int64_t>(out_ei, "out_ei", true) : nullptr;
    with_index(cols[0], "cols[0]", [&](auto c0) {
        using C = index_t<decltype(c0)>;
        std::vector<const C*> cp(K);
        for (size_t p = 0; p < K; ++p) cp[p] = cdata_ptr<C>(cols[p], "cols[p] (same dtype as cols[0])");
        C* oc = like_index<C>(out_col, "out_col (same dtype as cols[0])", !to_ei);
        py::gil_scoped_release nogil;
        ll_symmetric_t<C>(n, rps, cp, kp, half, orp, oc, ei);
    });
}

// ---- server side: combine, checks ------------------------------------------------------------
template <class C>
static void combine_t(int64_t n, const int64_t* ra, const C* ca, const int64_t* rb, const C* cb, int mode,
                      int64_t* orp, C* oc) {
    if (!oc) {
        orp[0] = 0;
        parallel_for_weighted(n, ra, [&](int64_t b, int64_t e, int) {
            for (int64_t i = b; i < e; ++i)
                orp[i + 1] = combine_row<C>(i, ca + ra[i], ra[i + 1] - ra[i], cb + rb[i], rb[i + 1] - rb[i], mode,
                                            nullptr);
        });
        return;
    }
    parallel_for_weighted(n, orp, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i)
            combine_row<C>(i, ca + ra[i], ra[i + 1] - ra[i], cb + rb[i], rb[i + 1] - rb[i], mode, oc + orp[i]);
    });
}

static void csr_combine(py::array rowptr_a, py::array col_a, py::array rowptr_b, py::array col_b, int mode,
                        py::array out_rowptr, py::array out_col, bool fill) {
    int64_t n = rowptr_a.size() - 1;
    check_size(rowptr_b, n + 1, "rowptr_b");
    check_size(out_rowptr, n + 1, "out_rowptr");
    if (mode < 0 || mode > 3) throw std::invalid_argument("mode: expected 0..3");
    const int64_t* ra = cdata_ptr<int64_t>(rowptr_a, "rowptr_a");
    const int64_t* rb = cdata_ptr<int64_t>(rowptr_b, "rowptr_b");
    int64_t* orp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    if (fill) check_size(out_col, orp[n], "out_col");
    with_index(col_a, "col_a", [&](auto a) {
        using C = index_t<decltype(a)>;
        const C* b = cdata_ptr<C>(col_b, "col_b");
        C* oc = like_index<C>(out_col, "out_col", fill);
        py::gil_scoped_release nogil;
        combine_t(n, ra, a, rb, b, mode, orp, oc);
    });
}

// Flags: 1 col outside [0, n); 2 a row not strictly increasing (unsorted or duplicate);
// 4 self loop; 8 asymmetric.  Symmetry fingerprint: sum over entries (i, j) of
// +hash(i, j) if i < j and -hash(j, i) if i > j, mod 2^64; every matched pair cancels, so
// a symmetric graph gives 0 and an asymmetric one a nonzero sum except with probability
// about 2^-64.  One hash per entry, O(|E|), no extra memory.
template <class C>
static int64_t check_t(int64_t n, const int64_t* rp, const C* col) {
    int nt = std::max(1, get_num_threads());
    std::vector<int64_t> flags(nt, 0);
    std::vector<uint64_t> hs(nt, 0);
    parallel_for_weighted(n, rp, [&](int64_t b, int64_t e, int tid) {
        int64_t f = 0;
        uint64_t h = 0;
        for (int64_t i = b; i < e; ++i) {
            f |= graph::check_row(i, n, col + rp[i], rp[i + 1] - rp[i], h);
        }
        flags[tid] |= f;
        hs[tid] += h;
    });
    int64_t f = 0;
    uint64_t h = 0;
    for (int t = 0; t < nt; ++t) {
        f |= flags[t];
        h += hs[t];
    }
    if (h != 0) f |= 8;
    return f;
}

// One pass over a PyG edge_index sorted by (source, target), PyG's coalesced order: the
// flags of check_t (same symmetry fingerprint) and, while it is sorted and in range, its CSR:
// rowptr from the row boundaries, col = the targets.  With no flag this is the CSR to_csr
// builds (sorting and deduplicating a sorted list without repeats or self loops changes
// nothing), already checked; with any flag the caller discards it and takes the general path.
template <class I, class C, bool WriteCol>
static int64_t sorted_csr_t(int64_t n, int64_t E, const I* src, const I* dst, int64_t* rp, C* col) {
    int nt = std::max(1, get_num_threads());
    std::vector<int64_t> flags(nt, 0);
    std::vector<uint64_t> hs(nt, 0);
    parallel_for(E, [&](int64_t b, int64_t e_end, int tid) {
        int64_t f = 0;
        uint64_t h = 0;
        for (int64_t e = b; e < e_end; ++e) {
            int64_t r, c, pr;
            const int64_t fe = graph::sorted_entry(n, e, src, dst, r, c, pr);
            f |= fe;
            if (fe & (graph::FLAG_RANGE | graph::FLAG_ORDER)) break;  // the general path will say what is wrong
            if constexpr (WriteCol) col[e] = (C)c;
            for (int64_t rr = std::max<int64_t>(pr + 1, 0); rr <= r; ++rr) rp[rr] = e;  // rows (pr, r] start here
            h += graph::sym_term(r, c);
        }
        flags[tid] |= f;
        hs[tid] += h;
    }, 65536);
    int64_t f = 0;
    uint64_t h = 0;
    for (int t = 0; t < nt; ++t) {
        f |= flags[t];
        h += hs[t];
    }
    if (f & 3) return f;
    if (h != 0) f |= 8;
    const int64_t last = E > 0 ? (int64_t)src[E - 1] : -1;
    for (int64_t rr = last + 1; rr <= n; ++rr) rp[rr] = E;
    return f;
}

// out_col empty (E > 0): rowptr and flags only, the caller taking dst itself as the CSR's col
// (no copy of the columns: the sampler kernels read int32 or int64 columns alike).
static int64_t edges_sorted_csr(py::array src, py::array dst, int64_t n, py::array out_rowptr, py::array out_col) {
    const int64_t E = (int64_t)src.size();
    check_size(dst, E, "dst");
    check_size(out_rowptr, n + 1, "out_rowptr");
    const bool write_col = out_col.size() != 0;
    if (write_col) check_size(out_col, E, "out_col");
    if (n < 0) throw std::invalid_argument("n: expected >= 0");
    int64_t* rp = data_ptr<int64_t>(out_rowptr, "out_rowptr", true);
    return with_index(src, "src", [&](auto s) -> int64_t {
        using I = index_t<decltype(s)>;
        const I* d = cdata_ptr<I>(dst, "dst (same dtype as src)");
        if (!write_col) {
            py::gil_scoped_release nogil;
            return sorted_csr_t<I, I, false>(n, E, s, d, rp, nullptr);
        }
        return with_index_mut(out_col, "out_col", [&](auto c) -> int64_t {
            py::gil_scoped_release nogil;
            return sorted_csr_t<I, index_t<decltype(c)>, true>(n, E, s, d, rp, c);
        });
    });
}

static int64_t edges_check_csr(py::array rowptr, py::array col) {
    int64_t n = rowptr.size() - 1;
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    return with_index(col, "col", [&](auto c) {
        py::gil_scoped_release nogil;
        return check_t(n, rp, c);
    });
}

// DPRR lines 2-7 for every user (body: edges::dprr_probs): float64 outputs of length n.
static void dprr_probs_py(py::array rowptr, py::array noise, double g, double p, double pm, py::array d_star,
                          py::array q, py::array p_true, py::array p_false) {
    const int64_t n = rowptr.size() - 1;
    check_size(noise, n, "noise");
    const int64_t* rp = cdata_ptr<int64_t>(rowptr, "rowptr");
    const int64_t* nz = cdata_ptr<int64_t>(noise, "noise");
    double* out[4];
    py::array* arrs[4] = {&d_star, &q, &p_true, &p_false};
    const char* names[4] = {"d_star", "q", "p_true", "p_false"};
    for (int a = 0; a < 4; ++a) {
        check_size(*arrs[a], n, names[a]);
        out[a] = data_ptr<double>(*arrs[a], names[a], true);
    }
    py::gil_scoped_release nogil;
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            const DprrProbs r = edges::dprr_probs(rp[i + 1] - rp[i], nz[i], g, n, p, pm);
            out[0][i] = r.d_star;
            out[1][i] = r.q;
            out[2][i] = r.p_true;
            out[3][i] = r.p_false;
        }
    }, 4096);
}

void register_edges(py::module_& m) {
    m.def("dprr_probs", &dprr_probs_py,
          "DPRR per-user d_star, q, p_true, p_false from the CSR degrees and the degree noise (grid units)");
    m.def("edges_rr_count", &edges_rr_count,
          "Sparse RR + sampling, pass 1: per-row output sizes into out_rowptr[1:]");
    m.def("edges_rr_fill", &edges_rr_fill, "Sparse RR + sampling, pass 2: fill sorted rows");
    py::class_<EdgeSample>(m, "EdgeSample", "Rows sampled in one pass, held until written into the outputs")
        .def_readonly("nnz", &EdgeSample::nnz)
        .def("write", &EdgeSample::write, py::arg("out_col"), py::arg("out_val"), py::arg("out_ei"),
             py::arg("layout"),
             "Fill the columns / values / (2, nnz) int64 edge_index (empty arrays: skipped; layout 0 "
             "(col, row), 1 (row, col)) and free the buffers");
    m.def("edges_rr_sample", &edges_rr_sample,
          "Sparse RR + sampling in one pass: row sizes prefix-summed into out_rowptr; returns an EdgeSample");
    m.def("locallap_zero_sample", &locallap_zero_sample,
          "LocalLap zero-entry candidates in one pass: out_rowptr prefix-summed; returns an EdgeSample with values");
    m.def("csr_to_edge_index", &csr_to_edge_index, "(2, nnz) int64 edge_index of a CSR: layout 0 (col, row), 1 (row, col)");
    m.def("locallap_edge_values", &locallap_edge_values, "LocalLap: noisy values of upper-triangular edges");
    m.def("locallap_edge_candidates", &locallap_edge_candidates,
          "LocalLap round 0, skip path: (indices, values) of the true upper entries that are candidates");
    m.def("locallap_zero", &locallap_zero, "LocalLap: zero-entry candidates above a threshold (count / fill)");
    m.def("locallap_symmetric", &locallap_symmetric, py::arg("rowptrs"), py::arg("cols"), py::arg("keeps"),
          py::arg("half"), py::arg("out_rowptr"), py::arg("out_col"), py::arg("out_ei"),
          "LocalLap output: the kept entries of disjoint upper-triangular sources, symmetrised, into rowptr and "
          "col or a (2, nnz) int64 edge_index (row, col) (empty array: not written)");
    m.def("csr_combine", &csr_combine, "Row-wise union / intersection / lower / upper of two CSRs (count / fill)");
    m.def("edges_check_csr", &edges_check_csr, "Flags: 1 range, 2 unsorted/duplicate, 4 self loop, 8 asymmetric");
    m.def("edges_sorted_csr", &edges_sorted_csr,
          "CSR of an edge_index sorted by (source, target) with the edges_check_csr flags, in one pass "
          "(flags & 3: not built)");
}

}  // namespace ldp
