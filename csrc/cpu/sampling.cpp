#include "buffers.h"
namespace ldp {
void register_sampling(py::module_& m) {}
}
