// Buffer helpers: inputs and outputs cross from Python as NumPy views of torch tensors
// (zero-copy); kernels never allocate their outputs, they fill them in place.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace ldp {

// A C-contiguous array of exactly type T, no conversion (a conversion would copy and
// break in-place outputs), checked at the boundary.
template <class T>
using carray = py::array_t<T, py::array::c_style>;

template <class T>
T* data_ptr(py::array& a, const char* name, bool writable = false) {
    if (!py::isinstance<carray<T>>(a) || !(a.flags() & py::array::c_style))
        throw std::invalid_argument(std::string(name) + ": wrong dtype or not C-contiguous");
    if (writable && !a.writeable()) throw std::invalid_argument(std::string(name) + ": not writable");
    return static_cast<T*>(a.mutable_data());
}

template <class T>
const T* cdata_ptr(const py::array& a, const char* name) {
    if (!py::isinstance<carray<T>>(a) || !(a.flags() & py::array::c_style))
        throw std::invalid_argument(std::string(name) + ": wrong dtype or not C-contiguous");
    return static_cast<const T*>(a.data());
}

inline void check_size(const py::array& a, int64_t n, const char* name) {
    if ((int64_t)a.size() != n)
        throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(n) +
                                    " elements, got " + std::to_string(a.size()));
}

}  // namespace ldp
