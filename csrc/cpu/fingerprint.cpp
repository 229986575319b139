// C++ launcher of the keyed fingerprint (construction and contract in
// csrc/common/fingerprint.h): std::thread over 256-byte blocks, each thread summing its blocks'
// PRF terms, the per-thread sums added at the end (mod 2^64: the order does not matter, so
// the result is the same for every thread count).
#include <cstring>
#include <vector>

#include "../common/fingerprint.h"
#include "buffers.h"
#include "parallel.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the fingerprint reads words with memcpy: little-endian hosts only (as the CUDA build)"
#endif

namespace ldp {
namespace {

using namespace fp;

// fingerprint(data: uint8 array, k_nh, k_pad, k_prf, out: uint64[2]) -> None; out = (S0, S1).
void fingerprint(py::array data, uint64_t k_nh, uint64_t k_pad, uint64_t k_prf, py::array out) {
    const uint8_t* p = cdata_ptr<uint8_t>(data, "data");
    uint64_t* o = data_ptr<uint64_t>(out, "out", true);
    check_size(out, 2, "out");
    const int64_t nbytes = (int64_t)data.size();
    uint32_t K[KEY_WORDS];
    for (int q = 0; q < KEY_WORDS / 4; ++q) nh_key_block(k_nh, q, K);
    const int64_t nfull = nbytes / BLOCK_BYTES;  // blocks read as whole words
    const int64_t nb = (nbytes + BLOCK_BYTES - 1) / BLOCK_BYTES;
    std::vector<uint64_t> part(2 * (size_t)get_num_threads() + 2, 0);
    {
        py::gil_scoped_release nogil;
        parallel_for(nb, [&](int64_t b0, int64_t b1, int t) {
            uint64_t s0 = 0, s1 = 0, y0, y1;
            uint32_t m[BLOCK_WORDS];
            for (int64_t b = b0; b < b1; ++b) {
                if (b < nfull) {
                    std::memcpy(m, p + b * BLOCK_BYTES, BLOCK_BYTES);  // any alignment; little endian
                    nh_block(m, K, y0, y1);
                } else {
                    nh_block_tail(p, nbytes, b, K, y0, y1);
                }
                block_term(y0, y1, (uint64_t)b, k_pad, k_prf, s0, s1);
            }
            part[2 * t] = s0;
            part[2 * t + 1] = s1;
        }, 4096);  // 1 MiB per chunk at least
    }
    uint64_t s0 = 0, s1 = 0;
    for (size_t t = 0; t + 1 < part.size(); t += 2) {
        s0 += part[t];
        s1 += part[t + 1];
    }
    o[0] = s0;
    o[1] = s1;
}

}  // namespace

void register_fingerprint(py::module_& m) {
    m.def("fingerprint", &fingerprint,
          "Keyed fingerprint of a uint8 array into out (uint64[2]); see csrc/common/fingerprint.h");
}

}  // namespace ldp
