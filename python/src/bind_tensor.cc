// Tensors leave C++ without a copy: numpy arrays through the array interface
// with a capsule that owns the buffer, torch tensors through DLPack.
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>

#include <memory>

#include "bindings.h"

namespace sluice::python {
namespace {

py::dtype NumpyType(DType d) {
  switch (d) {
    case DType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kInt64:
      return py::dtype::of<int64_t>();
    case DType::kFloat16:
      return py::dtype("float16");
    case DType::kFloat32:
      break;
  }
  return py::dtype::of<float>();
}

DLDataType DlpackType(DType d) {
  switch (d) {
    case DType::kUInt8:
      return {kDLUInt, 8, 1};
    case DType::kInt32:
      return {kDLInt, 32, 1};
    case DType::kInt64:
      return {kDLInt, 64, 1};
    case DType::kFloat16:
      return {kDLFloat, 16, 1};
    case DType::kFloat32:
      break;
  }
  return {kDLFloat, 32, 1};
}

// Owns what a DLManagedTensor points to.
struct DlpackHolder {
  Tensor tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed;
};

void DeleteHolder(DLManagedTensor* m) { delete static_cast<DlpackHolder*>(m->manager_ctx); }

}  // namespace

py::object ToNumpy(const Tensor& t) {
  if (t.memory_kind() == MemoryKind::kDevice) {
    ThrowIfError(absl::InvalidArgumentError(
        "this column is in GPU memory (a map with device \"cuda\"): take it as a torch tensor (sluice.torch) "
        "or through DLPack, not as numpy"));
  }
  // The capsule holds a reference to the buffer for as long as numpy needs it.
  auto* keep = new std::shared_ptr<Buffer>(t.buffer());
  py::capsule owner(keep, [](void* p) { delete static_cast<std::shared_ptr<Buffer>*>(p); });
  std::vector<py::ssize_t> shape(t.shape().dims().begin(), t.shape().dims().end());
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = static_cast<py::ssize_t>(DTypeSize(t.dtype()));
  for (size_t i = shape.size(); i-- > 0;) {  // row-major
    strides[i] = stride;
    stride *= shape[i];
  }
  return py::array(NumpyType(t.dtype()), shape, strides, t.raw_data(), owner);
}

py::object ToDlpack(const Tensor& t) {
  auto* holder = new DlpackHolder{t, std::vector<int64_t>(t.shape().dims().begin(), t.shape().dims().end()), {}};
  DLTensor& dl = holder->managed.dl_tensor;
  dl.data = t.raw_data();
  switch (t.memory_kind()) {
    case MemoryKind::kDevice:
      dl.device = {kDLCUDA, t.buffer()->device()};
      break;
    case MemoryKind::kPinnedHost:
      dl.device = {kDLCUDAHost, 0};
      break;
    case MemoryKind::kHost:
      dl.device = {kDLCPU, 0};
      break;
  }
  dl.ndim = static_cast<int32_t>(holder->shape.size());
  dl.dtype = DlpackType(t.dtype());
  dl.shape = holder->shape.data();
  dl.strides = nullptr;  // compact, row-major
  dl.byte_offset = 0;
  holder->managed.manager_ctx = holder;
  holder->managed.deleter = DeleteHolder;
  // A consumer renames the capsule "used_dltensor" and takes over the
  // deleter; an unconsumed capsule frees the tensor itself.
  return py::capsule(&holder->managed, "dltensor", +[](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      m->deleter(m);
    }
  });
}

}  // namespace sluice::python
