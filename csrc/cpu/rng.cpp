// RNG kernels: raw Philox blocks (known-answer tests) and per-cell sampler fills used to
// prove that C++, Numba, NumPy (and CUDA) produce the same bits for one seed.
#include <stdexcept>

#include "../common/rng.h"

#include "buffers.h"
#include "parallel.h"

namespace ldp {

static void philox_blocks(py::array ctr, py::array key, py::array out) {
    const uint32_t* c = cdata_ptr<uint32_t>(ctr, "ctr");
    const uint32_t* k = cdata_ptr<uint32_t>(key, "key");
    uint32_t* o = data_ptr<uint32_t>(out, "out", true);
    int64_t n = ctr.size() / 4;
    check_size(key, 2 * n, "key");
    check_size(out, 4 * n, "out");
    py::gil_scoped_release nogil;
    parallel_for(n, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) {
            u32x4 in = {{c[4 * i], c[4 * i + 1], c[4 * i + 2], c[4 * i + 3]}};
            u32x4 r = philox4x32_10(in, k[2 * i], k[2 * i + 1]);
            for (int j = 0; j < 4; ++j) o[4 * i + j] = r.v[j];
        }
    });
}

// out[r, c] = draw(CellRng(seed, stream, row0 + r, c)) for an (R, C) output.
template <class T, class Draw>
static void fill_cells(py::array out, uint64_t seed, uint32_t stream, uint64_t row0, Draw draw) {
    if (out.ndim() != 2) throw std::invalid_argument("out: expected a 2-D array");
    T* o = data_ptr<T>(out, "out", true);
    int64_t R = out.shape(0), C = out.shape(1);
    py::gil_scoped_release nogil;
    parallel_for(R, [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r)
            for (int64_t c = 0; c < C; ++c) {
                CellRng g(seed, stream, row0 + (uint64_t)r, (uint32_t)c);
                o[r * C + c] = draw(g);
            }
    }, 64);
}

// A word source over a given array (tests drive the samplers with chosen words).
struct ArrayWords {
    const uint32_t* w;
    int64_t n, pos;
    uint32_t next_u32() {
        if (pos >= n) throw std::out_of_range("words: exhausted");
        return w[pos++];
    }
    uint64_t next_u64() {
        uint64_t hi = next_u32();
        return (hi << 32) | next_u32();
    }
};

void register_rng(py::module_& m) {
    m.def("philox_blocks", &philox_blocks, "Raw Philox4x32-10 on (n,4) counters and (n,2) keys");
    m.def("fill_u32", [](py::array out, uint64_t seed, uint32_t stream, uint64_t row0) {
        fill_cells<uint32_t>(out, seed, stream, row0, [](CellRng& g) { return g.next_u32(); });
    });
    m.def("fill_uniform", [](py::array out, uint64_t seed, uint32_t stream, uint64_t row0) {
        fill_cells<double>(out, seed, stream, row0, [](CellRng& g) { return g.uniform(); });
    });
    m.def("fill_randint", [](py::array out, uint64_t seed, uint32_t stream, uint64_t row0, uint64_t k) {
        fill_cells<int64_t>(out, seed, stream, row0, [k](CellRng& g) { return (int64_t)g.randint(k); });
    });
    m.def("fill_geometric", [](py::array out, uint64_t seed, uint32_t stream, uint64_t row0, double p) {
        fill_cells<int64_t>(out, seed, stream, row0, [p](CellRng& g) { return g.geometric(p); });
    });
    m.def("fill_binomial", [](py::array out, uint64_t seed, uint32_t stream, uint64_t row0, int64_t n, double p) {
        fill_cells<int64_t>(out, seed, stream, row0, [n, p](CellRng& g) { return g.binomial(n, p); });
    });
    m.def("fill_discrete_laplace", [](py::array out, uint64_t seed, uint32_t stream, uint64_t row0, uint64_t t, uint64_t s) {
        fill_cells<int64_t>(out, seed, stream, row0, [t, s](CellRng& g) { return g.discrete_laplace(t, s); });
    });
    m.def("fill_bernoulli", [](py::array out, uint64_t seed, uint32_t stream, uint64_t row0, double p) {
        fill_cells<uint8_t>(out, seed, stream, row0, [p](CellRng& g) { return (uint8_t)g.bernoulli(p); });
    });
    m.def("geom_params", [](double p) {
        GeomParams P = geom_params(p);
        return py::make_tuple(P.kind, P.B, P.lam, P.stop);
    }, "Parameters of the geometric sampler (kind, B, lam, stop); see rng.h");
    m.def("geometric_words", [](double p, py::array words) {
        ArrayWords src{cdata_ptr<uint32_t>(words, "words"), (int64_t)words.size(), 0};
        int64_t g = geom_draw(src, geom_params(p));
        return py::make_tuple(g, src.pos);
    }, "Geometric(p) drawn from the given uint32 words: (gap, words used)");
    m.def("bernoulli_words", [](double q, py::array words) {
        ArrayWords src{cdata_ptr<uint32_t>(words, "words"), (int64_t)words.size(), 0};
        bool b = bernoulli_words(src, q);
        return py::make_tuple(b, src.pos);
    }, "Exact Bernoulli(q) from the given uint32 words: (outcome, words used)");
    m.def("bernoulli_u53_words", [](double p, py::array words) {
        ArrayWords src{cdata_ptr<uint32_t>(words, "words"), (int64_t)words.size(), 0};
        bool b = bernoulli_u53(src, p);
        return py::make_tuple(b, src.pos);
    }, "CellRng::bernoulli(p) from the given uint32 words: (outcome, words used)");
    m.def("det_exp_neg", [](double y) { return det_exp_neg(y); });
    m.def("det_neg_expm1", [](double t) { return det_neg_expm1(t); });
    m.def("det_log", [](double x) { return det_log(x); });
    m.def("det_log1p", [](double x) { return det_log1p(x); });
}

}  // namespace ldp
