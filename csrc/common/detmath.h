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

}  // namespace ldp
