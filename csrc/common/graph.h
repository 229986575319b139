// Graph-structure bodies shared by csrc/cpu/edges.cpp (the edge mechanisms' input checks and
// edge_index writer) and csrc/cuda/graph.cu: the O(|E|) check of a CSR (range, order,
// repeats, self loops, symmetry fingerprint).  Integer maths only.
#pragma once
#include "philox.h"

namespace ldp {
namespace graph {

// Check flags: 1 col outside [0, n); 2 a row not strictly increasing (unsorted or duplicate);
// 4 self loop; 8 asymmetric.
constexpr int64_t FLAG_RANGE = 1, FLAG_ORDER = 2, FLAG_SELF = 4, FLAG_ASYM = 8;

// splitmix64 finaliser: the hash behind the O(|E|) symmetry fingerprint.
LDP_HD uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Fingerprint term of entry (i, j): +hash(i, j) if i < j, -hash(j, i) if i > j, so a matched
// pair cancels mod 2^64 and a symmetric graph sums to 0 (an asymmetric one to nonzero except
// with probability about 2^-64).  Addition mod 2^64 commutes: any summation order (threads,
// atomics) gives the same total.
LDP_HD uint64_t sym_term(int64_t i, int64_t j) {
    const uint64_t lo = (uint64_t)(i < j ? i : j), hi = (uint64_t)(i < j ? j : i);
    const uint64_t x = mix64((lo << 32) ^ hi ^ 0x9E3779B97F4A7C15ull);
    return i < j ? x : (uint64_t)0 - x;
}

// Flags of row i (neighbours nb[0..d) of an n-node CSR); the row's fingerprint terms are
// added to h.
template <class C>
LDP_HD int64_t check_row(int64_t i, int64_t n, const C* nb, int64_t d, uint64_t& h) {
    int64_t f = 0;
    for (int64_t k = 0; k < d; ++k) {
        const int64_t j = (int64_t)nb[k];
        if (j < 0 || j >= n) f |= FLAG_RANGE;
        if (k > 0 && (int64_t)nb[k - 1] >= j) f |= FLAG_ORDER;
        if (j == i) f |= FLAG_SELF;
        h += sym_term(i, j);
    }
    return f;
}

// Edge e of an edge_index (src, dst) expected sorted by (source, target), PyG's coalesced
// order: FLAG_RANGE (an id outside [0, n)), FLAG_ORDER (not strictly after edge e - 1) or
// FLAG_SELF; r, c get its ids and pr the previous source (-1 for e = 0).  With neither of the
// first two flags on any edge, the CSR is rowptr from the row boundaries and col = dst.
template <class I>
LDP_HD int64_t sorted_entry(int64_t n, int64_t e, const I* src, const I* dst, int64_t& r, int64_t& c, int64_t& pr) {
    r = (int64_t)src[e];
    c = (int64_t)dst[e];
    pr = e > 0 ? (int64_t)src[e - 1] : -1;
    if ((uint64_t)r >= (uint64_t)n || (uint64_t)c >= (uint64_t)n) return FLAG_RANGE;
    if (e > 0 && (pr > r || (pr == r && (int64_t)dst[e - 1] >= c))) return FLAG_ORDER;
    return r == c ? FLAG_SELF : 0;
}

}  // namespace graph
}  // namespace ldp
