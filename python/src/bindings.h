// Shared declarations of the _sluice extension: one init function per
// bind_*.cc, and the Status -> Python exception mapping.
#ifndef SLUICE_PYTHON_BINDINGS_H_
#define SLUICE_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "sluice/core/tensor.h"

namespace sluice::python {

namespace py = pybind11;

void InitErrors(py::module_& m);
void InitPipeline(py::module_& m);
void InitProfile(py::module_& m);
void InitService(py::module_& m);
void InitTensor(py::module_& m);

// Raises the Python exception for `status` (see bind_errors.cc). REQUIRES:
// the GIL is held.
void ThrowIfError(const absl::Status& status);
// `text` as a Python str, bytes that are not UTF-8 (a file's name in another
// encoding) escaped: taken as UTF-8 they raised UnicodeDecodeError.
py::str Escaped(absl::string_view text);

// A numpy array viewing `t`'s buffer; the array keeps the buffer alive, so
// it returns to the pool when Python drops the last view.
py::object ToNumpy(const Tensor& t);
// What torch.from_dlpack takes for `t`: a DLPack capsule ("dltensor")
// viewing a host tensor, or a DeviceArray (the DLPack protocol with stream
// semantics) for a device tensor.
py::object ToDlpack(const Tensor& t);

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_BINDINGS_H_
