// Deterministic logarithms: only frexp, +, -, *, / (each correctly rounded by IEEE 754),
// evaluated in a fixed order.  libm / CUDA / NumPy-SIMD logs may differ in the last bit,
// which would make geometric gaps differ between backends; these do not, provided the
// compiler does not contract a*b+c into an FMA (-ffp-contract=off, NVRTC --fmad=false).
// Accuracy: a few ulp (series truncated at s^25, |s| <= 0.1716).  Twins:
// ldpfast/_numba/rng.py (det_log, det_log1p) and ldpfast/rng.py (vectorised).
#pragma once
#include "philox.h"
#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

namespace ldp {

// 2*atanh(s) - 2*s, i.e. the series tail 2*(s^3/3 + s^5/5 + ... + s^25/25), Horner in z=s*s.
LDP_HD double atanh_tail(double s) {
    double z = s * s;
    double p = 1.0 / 25.0;
    p = p * z + 1.0 / 23.0;
    p = p * z + 1.0 / 21.0;
    p = p * z + 1.0 / 19.0;
    p = p * z + 1.0 / 17.0;
    p = p * z + 1.0 / 15.0;
    p = p * z + 1.0 / 13.0;
    p = p * z + 1.0 / 11.0;
    p = p * z + 1.0 / 9.0;
    p = p * z + 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;
    p = p * z + 1.0 / 3.0;
    return 2.0 * s * (z * p);
}

// log(1+f) for |f| small enough that s = f/(2+f) is in [-0.1716, 0.1716].
LDP_HD double det_log1p_small(double f) {
    double s = f / (2.0 + f);
    return 2.0 * s + atanh_tail(s);
}

// Natural log of a positive, finite, normal double.
LDP_HD double det_log(double x) {
    const double SQRT_HALF = 0.70710678118654752440;
    const double LN2_HI = 6.93147180369123816490e-01;  // ln2 with low bits zero
    const double LN2_LO = 1.90821492927058770002e-10;
    int e;
    double m = frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
    if (m < SQRT_HALF) {
        m = m * 2.0;
        e = e - 1;
    }
    double f = m - 1.0;  // exact (Sterbenz)
    double de = (double)e;
    return de * LN2_HI + (det_log1p_small(f) + de * LN2_LO);
}

// log(1 + x) for x in (-1, +inf); accurate for tiny |x| (needed for log(1-p), small p).
LDP_HD double det_log1p(double x) {
    if (x > -0.29 && x < 0.41) return det_log1p_small(x);
    return det_log(1.0 + x);
}

// exp(-y) for 0 <= y <= ln 2 (the geometric sampler's acceptance probabilities, rng.h):
// y = k ln2 - z with k in {0, 1}, |z| <= ln2 / 2, exp(z) by its Taylor polynomial of degree 13
// (truncation < 2^-57), times 2^-k.  Accuracy: a few ulp.  Twins: _numba/rng.py, rng.py.
LDP_HD double det_exp_neg(double y) {
    double z = -y, scale = 1.0;
    if (y > 0.34657359027997264) {  // ln2 / 2
        z = (6.93147180369123816490e-01 - y) + 1.90821492927058770002e-10;  // ln2 - y (Sterbenz)
        scale = 0.5;
    }
    double p = 1.0 / 6227020800.0;
    p = p * z + 1.0 / 479001600.0;
    p = p * z + 1.0 / 39916800.0;
    p = p * z + 1.0 / 3628800.0;
    p = p * z + 1.0 / 362880.0;
    p = p * z + 1.0 / 40320.0;
    p = p * z + 1.0 / 5040.0;
    p = p * z + 1.0 / 720.0;
    p = p * z + 1.0 / 120.0;
    p = p * z + 1.0 / 24.0;
    p = p * z + 1.0 / 6.0;
    p = p * z + 0.5;
    p = p * z + 1.0;
    p = p * z + 1.0;
    return p * scale;
}

// 1 - exp(-t) for 0 <= t <= ln 2, accurate relative to the result even for tiny t.
LDP_HD double det_neg_expm1(double t) {
    if (t > 0.34657359027997264) return 1.0 - det_exp_neg(t);  // exact subtraction, result > 0.29
    // t * sum_{n=1..14} (-t)^(n-1) / n!  (truncation < 2^-61 relative for t <= ln2 / 2)
    double p = -1.0 / 87178291200.0;
    p = p * t + 1.0 / 6227020800.0;
    p = p * t - 1.0 / 479001600.0;
    p = p * t + 1.0 / 39916800.0;
    p = p * t - 1.0 / 3628800.0;
    p = p * t + 1.0 / 362880.0;
    p = p * t - 1.0 / 40320.0;
    p = p * t + 1.0 / 5040.0;
    p = p * t - 1.0 / 720.0;
    p = p * t + 1.0 / 120.0;
    p = p * t - 1.0 / 24.0;
    p = p * t + 1.0 / 6.0;
    p = p * t - 0.5;
    p = p * t + 1.0;
    return t * p;
}

}  // namespace ldp
