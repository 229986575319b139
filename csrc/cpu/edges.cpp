#include "buffers.h"
namespace ldp {
void register_edges(py::module_& m) {}
}
