// Tensors leave C++ without a copy: numpy arrays through the array interface
// with a capsule that owns the buffer, torch tensors through DLPack. Device
// tensors go out as objects of the DLPack protocol (__dlpack__ with a
// stream), so the consumer's stream waits for the work that wrote them.
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>

#include <cstdint>
#include <memory>

#include "bindings.h"
#include "sluice/ops/device_runtime.h"
#include "sluice/ops/op_registry.h"

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

py::object DlpackCapsule(const Tensor& t);

// A device tensor for DLPack consumers (torch.from_dlpack): __dlpack__
// makes the consumer's stream wait on the event recorded after the tensor
// was written, with no host wait, and the memory goes back to sluice's pool
// on that stream once the consumer drops it.
class DeviceArray {
 public:
  explicit DeviceArray(Tensor t) : tensor_(std::move(t)) {}

  // The array API's stream values: None or 1 the legacy default stream, 2
  // the per-thread default stream, -1 "do not synchronize", else a
  // cudaStream_t.
  py::object Dlpack(py::object stream) {
    const int64_t s = stream.is_none() ? 1 : stream.cast<int64_t>();
    if (s != -1) {
      ops::DeviceRuntime* runtime = ops::OpRegistry::Global().runtime(ops::Backend::kCuda);
      if (runtime == nullptr) {
        ThrowIfError(absl::FailedPreconditionError("a device tensor, but this build has no cuda runtime"));
      }
      ThrowIfError(runtime->WaitReady(*tensor_.buffer(), reinterpret_cast<void*>(static_cast<intptr_t>(s))));
    }
    return DlpackCapsule(tensor_);
  }

  py::tuple Device() const { return py::make_tuple(static_cast<int>(kDLCUDA), tensor_.buffer()->device()); }

 private:
  Tensor tensor_;
};

}  // namespace

void InitTensor(py::module_& m) {
  // pybind11 before 2.12 looks numpy's API up in function-local statics
  // whose imports let go of the GIL: two threads converting their first
  // batches at once deadlocked (one held the GIL, waiting for the static
  // the other was importing for). Looked up here, at import, on one thread.
  for (DType d : {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat16, DType::kFloat32}) NumpyType(d);
  py::class_<DeviceArray>(m, "DeviceArray")
      .def(
          "__dlpack__", [](DeviceArray& a, py::object stream, py::kwargs) { return a.Dlpack(stream); },
          py::arg("stream") = py::none())
      .def("__dlpack_device__", &DeviceArray::Device);
}

py::object ToDlpack(const Tensor& t) {
  if (t.memory_kind() == MemoryKind::kDevice) return py::cast(DeviceArray(t));
  return DlpackCapsule(t);
}

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

namespace {

py::object DlpackCapsule(const Tensor& t) {
  auto* holder = new DlpackHolder{t, std::vector<int64_t>(t.shape().dims().begin(), t.shape().dims().end()), {}};
  DLTensor& dl = holder->managed.dl_tensor;
  dl.data = t.raw_data();
  switch (t.memory_kind()) {
    case MemoryKind::kDevice:
      dl.device = {kDLCUDA, t.buffer()->device()};
      break;
    case MemoryKind::kPinnedHost:  // host memory to every consumer; torch sees it is pinned
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
  return py::capsule(
      &holder->managed, "dltensor", +[](PyObject* capsule) {
        if (PyCapsule_IsValid(capsule, "dltensor")) {
          auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
          m->deleter(m);
        }
      });
}

}  // namespace

}  // namespace sluice::python
