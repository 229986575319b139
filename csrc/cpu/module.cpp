// ldpfast._C: one pybind11 module, one register_* per kernel family (one .cpp each).
#include <cstdlib>
#include <thread>

#include "buffers.h"
#include "parallel.h"

namespace ldp {

static int g_num_threads = 0;

int get_num_threads() {
    if (g_num_threads > 0) return g_num_threads;
    if (const char* env = std::getenv("LDPFAST_NUM_THREADS")) {
        int v = std::atoi(env);
        if (v > 0) return v;
    }
    unsigned hc = std::thread::hardware_concurrency();
    return hc ? (int)hc : 1;
}

void set_num_threads(int n) {
    if (n < 0) throw std::invalid_argument("num_threads: must be >= 0 (0 = automatic)");
    g_num_threads = n;
}

void register_rng(py::module_& m);
void register_graph(py::module_& m);
void register_synthetic(py::module_& m);
void register_features(py::module_& m);
void register_edges(py::module_& m);
void register_propagate(py::module_& m);
void register_reconstruct(py::module_& m);
void register_sampling(py::module_& m);
void register_fingerprint(py::module_& m);
void register_userkey(py::module_& m);
void register_edges_keyed(py::module_& m);

}  // namespace ldp

PYBIND11_MODULE(_C, m) {
    m.doc() = "ldpfast compiled CPU kernels (pybind11, std::thread, no libtorch)";
    m.def("get_num_threads", &ldp::get_num_threads);
    m.def("set_num_threads", &ldp::set_num_threads);
    ldp::register_rng(m);
    ldp::register_graph(m);
    ldp::register_synthetic(m);
    ldp::register_features(m);
    ldp::register_edges(m);
    ldp::register_propagate(m);
    ldp::register_reconstruct(m);
    ldp::register_sampling(m);
    ldp::register_fingerprint(m);
    ldp::register_userkey(m);
    ldp::register_edges_keyed(m);
}
