// absl::Status codes become Python exceptions. Every one is a SluiceError
// (itself a RuntimeError), and each also subclasses the built-in a Python
// user would catch (as pyarrow's do): bad pipelines and attrs are
// ValueError, missing files and features FileNotFoundError, a store's 403
// PermissionError, a server gone ConnectionError, a wait past its limit
// TimeoutError. The C++ message is kept whole.
#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/string_view.h"
#include "bindings.h"

namespace sluice::python {
namespace {

PyObject* g_invalid_argument = nullptr;
PyObject* g_not_found = nullptr;
PyObject* g_data_loss = nullptr;
PyObject* g_cancelled = nullptr;
PyObject* g_permission_denied = nullptr;
PyObject* g_unavailable = nullptr;
PyObject* g_deadline_exceeded = nullptr;
PyObject* g_unimplemented = nullptr;
PyObject* g_error = nullptr;

// A new exception class sluice.<name> with `bases`, added to `m`.
PyObject* NewError(py::module_& m, const char* name, py::tuple bases) {
  const std::string qualified = std::string("sluice.") + name;
  PyObject* type = PyErr_NewException(qualified.c_str(), bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(type);  // the module holds the reference
  return type;
}

// Raises `type` with `message`, whose bytes that are not UTF-8 (a file's
// name in another encoding) are shown escaped: taken as UTF-8, they raised
// a UnicodeDecodeError in place of the error.
void SetError(PyObject* type, absl::string_view message) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace");
  if (text == nullptr) return;  // the decode's own error is set
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}

}  // namespace

py::str Escaped(absl::string_view text) {
  PyObject* decoded = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "backslashreplace");
  if (decoded == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(decoded);
}

void InitErrors(py::module_& m) {
  g_error = NewError(m, "SluiceError", py::make_tuple(py::handle(PyExc_RuntimeError)));
  const py::handle error(g_error);
  g_invalid_argument = NewError(m, "InvalidArgumentError", py::make_tuple(error, py::handle(PyExc_ValueError)));
  g_not_found = NewError(m, "NotFoundError", py::make_tuple(error, py::handle(PyExc_FileNotFoundError)));
  g_data_loss = NewError(m, "DataLossError", py::make_tuple(error));
  g_cancelled = NewError(m, "CancelledError", py::make_tuple(error));
  g_permission_denied = NewError(m, "PermissionDeniedError", py::make_tuple(error, py::handle(PyExc_PermissionError)));
  g_unavailable = NewError(m, "UnavailableError", py::make_tuple(error, py::handle(PyExc_ConnectionError)));
  g_deadline_exceeded = NewError(m, "DeadlineExceededError", py::make_tuple(error, py::handle(PyExc_TimeoutError)));
  g_unimplemented = NewError(m, "UnimplementedError", py::make_tuple(error, py::handle(PyExc_NotImplementedError)));
  // A thread the engine could not start (std::thread throws EAGAIN): the
  // process is out of threads or memory, which its limits decide. Other
  // system errors (a filesystem's) say what they are.
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const std::filesystem::filesystem_error& e) {
      SetError(g_error, std::string("sluice: ") + e.what());
    } catch (const std::system_error& e) {
      const bool thread = e.code().value() == EAGAIN || e.code().value() == ENOMEM;
      const std::string message = thread ? std::string("sluice could not start a thread: ") + e.what() +
                                               " (the process is out of threads or memory: see its limits, ulimit "
                                               "-u and ulimit -v, or a container's pids limit)"
                                         : std::string("sluice: ") + e.what();
      SetError(g_error, message);
    }
  });
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
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      type = g_permission_denied;
      break;
    case absl::StatusCode::kUnavailable:
      type = g_unavailable;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      type = g_deadline_exceeded;
      break;
    case absl::StatusCode::kUnimplemented:
      type = g_unimplemented;
      break;
    default:
      break;
  }
  SetError(type, status.message());
  throw py::error_already_set();
}

}  // namespace sluice::python
