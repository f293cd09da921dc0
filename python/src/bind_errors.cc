// absl::Status codes become Python exceptions. Every one is a SluiceError
// (itself a RuntimeError), and each also subclasses the built-in a Python
// user would catch (as pyarrow's do): bad pipelines and attrs are
// ValueError, missing files and features FileNotFoundError. The C++ message
// is kept whole.
#include "bindings.h"

namespace sluice::python {
namespace {

PyObject* g_invalid_argument = nullptr;
PyObject* g_not_found = nullptr;
PyObject* g_data_loss = nullptr;
PyObject* g_cancelled = nullptr;
PyObject* g_error = nullptr;

// A new exception class sluice.<name> with `bases`, added to `m`.
PyObject* NewError(py::module_& m, const char* name, py::tuple bases) {
  const std::string qualified = std::string("sluice.") + name;
  PyObject* type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(type);  // the module holds the reference
  return type;
}

}  // namespace

void InitErrors(py::module_& m) {
  g_error = NewError(m, "SluiceError", py::make_tuple(py::handle(PyExc_RuntimeError)));
  const py::handle error(g_error);
  g_invalid_argument = NewError(m, "InvalidArgumentError", py::make_tuple(error, py::handle(PyExc_ValueError)));
  g_not_found = NewError(m, "NotFoundError", py::make_tuple(error, py::handle(PyExc_FileNotFoundError)));
  g_data_loss = NewError(m, "DataLossError", py::make_tuple(error));
  g_cancelled = NewError(m, "CancelledError", py::make_tuple(error));
}

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  PyObject* type = g_error;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      type = g_invalid_argument;
      break;
    case absl::StatusCode::kNotFound:
      type = g_not_found;
      break;
    case absl::StatusCode::kDataLoss:
      type = g_data_loss;
      break;
    case absl::StatusCode::kCancelled:
      type = g_cancelled;
      break;
    default:
      break;
  }
  PyErr_SetString(type, std::string(status.message()).c_str());
  throw py::error_already_set();
}

}  // namespace sluice::python
