#include "buffers.h"
namespace ldp {
void register_features(py::module_& m) {}
}
