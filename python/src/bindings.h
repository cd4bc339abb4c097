#pragma once
// fltlab._C, the extension module behind the Python package python/fltlab: one binding function per
// area (module.cpp calls them).
#include <pybind11/pybind11.h>

namespace flt::python {
namespace py = pybind11;

/// fltlab._C.CoordinateMnemosyne, ScheduleMnemosyne, Swarm (optim.cpp).
void bind_optim(py::module_& m);
/// fltlab._C.Module, the module factories and fltlab._C.functional (nn.cpp).
void bind_nn(py::module_& m);

}  // namespace flt::python
