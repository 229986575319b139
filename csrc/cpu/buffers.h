// Buffer helpers: inputs and outputs cross from Python as NumPy views of torch tensors
// (zero-copy); kernels never allocate their outputs, they fill them in place.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

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

// Index arrays (CSR col) are int32 or int64.  with_index / with_index_mut call f with the
// typed data pointer (const int32_t* / const int64_t*, or writable) after the dtype check,
// so each entry point is written once for both; index_t<P> recovers the index type and
// like_index gives an output array of the same type (nullptr when !enabled).
template <class F>
decltype(auto) with_index(const py::array& a, const char* name, F&& f) {
    if (py::isinstance<carray<int32_t>>(a)) return f(cdata_ptr<int32_t>(a, name));
    return f(cdata_ptr<int64_t>(a, name));
}

template <class F>
decltype(auto) with_index_mut(py::array& a, const char* name, F&& f) {
    if (py::isinstance<carray<int32_t>>(a)) return f(data_ptr<int32_t>(a, name, true));
    return f(data_ptr<int64_t>(a, name, true));
}

template <class P>
using index_t = std::remove_const_t<std::remove_pointer_t<P>>;

template <class C>
C* like_index(py::array& a, const char* name, bool enabled = true) {
    return enabled ? data_ptr<C>(a, name, true) : nullptr;
}

inline void check_size(const py::array& a, int64_t n, const char* name) {
    if ((int64_t)a.size() != n)
        throw std::invalid_argument(std::string(name) + ": expected " + std::to_string(n) +
                                    " elements, got " + std::to_string(a.size()));
}

}  // namespace ldp
