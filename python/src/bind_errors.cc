// absl::Status codes become Python exceptions that subclass the built-ins a
// Python user would catch (as pyarrow's do): bad pipelines and attrs are
// ValueError, missing files and features FileNotFoundError, corrupt data and
// everything else RuntimeError. The C++ message is kept whole.
#include "bindings.h"

namespace sluice::python {
namespace {

PyObject* g_invalid_argument = nullptr;
PyObject* g_not_found = nullptr;
PyObject* g_data_loss = nullptr;
PyObject* g_cancelled = nullptr;
PyObject* g_error = nullptr;

}  // namespace

void InitErrors(py::module_& m) {
  static py::exception<std::runtime_error> error(m, "SluiceError", PyExc_RuntimeError);
  static py::exception<std::runtime_error> invalid(m, "InvalidArgumentError", PyExc_ValueError);
  static py::exception<std::runtime_error> not_found(m, "NotFoundError", PyExc_FileNotFoundError);
  static py::exception<std::runtime_error> data_loss(m, "DataLossError", error.ptr());
  static py::exception<std::runtime_error> cancelled(m, "CancelledError", error.ptr());
  g_error = error.ptr();
  g_invalid_argument = invalid.ptr();
  g_not_found = not_found.ptr();
  g_data_loss = data_loss.ptr();
  g_cancelled = cancelled.ptr();
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
