// fltlab._C: the library for Python. Errors the library raises (c10::Error from TORCH_CHECK) reach
// Python as RuntimeError with the library's message, without the C++ backtrace.
#include <torch/csrc/utils/pybind.h>

#include "bindings.h"
#include "flt/core.h"
#include "flt/metatrain/datasets.h"

namespace flt::python {
namespace {

py::dict split(const flt::metatrain::data::Split& data) {
  // Clones: the library's cache is shared and read-only.
  py::dict out;
  out["name"] = data.name;
  out["train_x"] = data.train_x.clone();
  out["train_y"] = data.train_y.clone();
  out["test_x"] = data.test_x.clone();
  out["test_y"] = data.test_y.clone();
  out["classes"] = data.classes;
  return out;
}

}  // namespace
}  // namespace flt::python

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  m.doc() = "FLT Lab's C++ library (libflt) for fltlab";
  py::register_local_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
  m.def("version", [] { return std::string(flt::version()); });
  flt::python::bind_optim(m);
  flt::python::bind_nn(m);
  auto data = m.def_submodule("data");
  data.def(
      "fashion_mnist",
      [](int64_t train_limit, int64_t test_limit) {
        return flt::python::split(flt::metatrain::data::fashion_mnist(train_limit, test_limit));
      },
      py::arg("train_limit") = 0, py::arg("test_limit") = 0);
}
