// Binary searches over sorted index arrays, usable on the host and the device (std::
// lower_bound / upper_bound are host-only), shared by the edge (edges.h) and HeterPoisson
// (sampling.h) per-row bodies.  T is any integer index type; x is compared as int64_t.
#pragma once
#include "philox.h"

namespace ldp {

// First index of sorted a[0..n) with a[i] > x (std::upper_bound).
template <class T>
LDP_HD int64_t upper_index(const T* a, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)a[mid] <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// First index of sorted a[0..n) with a[i] >= x (std::lower_bound).
template <class T>
LDP_HD int64_t lower_index(const T* a, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)a[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Whether sorted a[0..n) holds x.
template <class T>
LDP_HD bool sorted_has(const T* a, int64_t n, int64_t x) {
    const int64_t i = lower_index(a, n, x);
    return i != n && (int64_t)a[i] == x;
}

}  // namespace ldp
