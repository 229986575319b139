#include "buffers.h"
namespace ldp {
void register_synthetic(py::module_& m) {}
}
