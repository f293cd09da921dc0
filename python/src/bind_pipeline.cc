// Pipelines and their iterators. The PipelineDef crosses the boundary as JSON
// (the Python builder writes it; protobuf's JSON mapping parses it), and
// every call that runs C++ work releases the GIL.
#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <string>

#include "bindings.h"
#include "fork_guard.h"
#include "gil.h"
#include "interrupt.h"
#include "sluice/exec/pipeline.h"
#include "sluice/exec/resume.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/io/arrow_source.h"
#include "sluice/io/object_cache.h"
#include "sluice/io/object_store.h"
#include "sluice/io/thread_cancel.h"
#include "sluice/ops/device_decode_stats.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/plugin.h"
#include "sluice/placement/pipeline_metrics.h"
#include "sluice/placement/placed_pipeline.h"
#include "sluice/service/distributed_pipeline.h"

namespace sluice::python {
namespace {

using Names = std::vector<std::string>;

class PyIterator {
 public:
  // Holds the pipeline: its iterators' threads use the compiled nodes, and
  // Python may drop the Pipeline object before the iterator.
  PyIterator(std::shared_ptr<placement::PlacedPipeline> pipeline, std::unique_ptr<placement::PlacedIterator> it,
             Names names)
      : pipeline_(std::move(pipeline)), it_(std::move(it)), names_(std::move(names)) {}
  ~PyIterator() {
    if (!made_.inherited()) return;
    Abandon(it_);
    Abandon(pipeline_);
  }
  PyIterator(const PyIterator&) = delete;
  PyIterator& operator=(const PyIterator&) = delete;

  // The next element as {column: array}, via `convert`; StopIteration at the end.
  py::dict Next(py::object (*convert)(const Tensor&)) {
    CheckMadeHere();
    Batch batch;
    bool end = false;
    if (held_) {  // a signal handler's exception kept it from the last call
      batch = *std::move(held_);
      held_.reset();
      before_.reset();
      return Converted(batch, convert);
    }
    absl::Status status;
    absl::StatusOr<std::string> before = absl::UnknownError("");
    {
      InterruptScope interrupt([it = it_.get()] { it->Cancel(); });
      // Python's signal handlers run outside the turn, as one may save the
      // iterator's state(). A Ctrl-C from just before the scope took over
      // SIGINT is pending in Python; without this check it would wait for
      // a next() that may never return.
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      {
        const std::unique_lock<std::mutex> turn = Turn();
        // A batch's state costs a few µs beside its rows; a sample's would
        // weigh on an unbatched pass.
        if (pipeline_->first().batched()) before = it_->SaveState();
        status = WithoutGil([&] { return it_->Next(&batch, &end); });
      }
      if (interrupt.interrupted() && (!status.ok() || end)) RaiseInterrupt();
    }
    ThrowIfError(status);
    if (end) throw py::stop_iteration();
    // The handlers of signals that came during the wait (Ctrl-C's, a
    // SIGTERM's on preemption) run now, before the batch is handed over:
    // a state() they save is the one before it, and an exception they
    // raise keeps it for the next call. Run after the return, they saved
    // a state past a batch the loop never had.
    if (before.ok()) before_ = *std::move(before);
    if (PyErr_CheckSignals() != 0) {
      if (before_) held_ = std::move(batch);
      throw py::error_already_set();
    }
    before_.reset();
    return Converted(batch, convert);
  }

  // `batch` as {column: array}, via `convert`.
  py::dict Converted(const Batch& batch, py::object (*convert)(const Tensor&)) {
    py::dict out;
    const bool batched = pipeline_->first().batched();
    for (size_t i = 0; i < names_.size(); ++i) {
      const Column& c = batch.columns[i];
      out[py::str(names_[i])] =
          c.ragged() ? RaggedRows(c, batch.rows, batched, convert) : convert(batched ? c.values : SampleOf(c.values));
    }
    samples_ += batch.rows;
    return out;
  }

  // An unbatched pipeline's element is one sample: its values without the
  // rows' dimension, the shape `schema` gives (a label an array of rank 0).
  static Tensor SampleOf(const Tensor& values) {
    const absl::Span<const int64_t> dims = values.shape().dims();
    return values.Reshaped(Shape(dims.subspan(1)));
  }

  // A ragged column (bytes of any length): its values hold the whole
  // chunk, so each row is its own slice of them: a sample's array, or a
  // batch's list of them.
  static py::object RaggedRows(const Column& c, int64_t rows, bool batched, py::object (*convert)(const Tensor&)) {
    const int64_t* off = c.offsets.data<int64_t>();
    auto row = [&](int64_t r) { return convert(c.values.Slice(off[r], off[r + 1])); };
    if (!batched) return row(0);
    py::list out;
    for (int64_t r = 0; r < rows; ++r) out.append(row(r));
    return out;
  }

  // Where the epoch stands after the last element (PipelineIterator::SaveState)
  // handed over.
  py::bytes State() const {
    CheckMadeHere();
    if (before_) return py::bytes(*before_);
    const std::unique_lock<std::mutex> turn = Turn();
    absl::StatusOr<std::string> state = it_->SaveState();
    ThrowIfError(state.status());
    return py::bytes(*state);
  }

  int64_t samples() const { return samples_; }
  // In turn with next(), which may move the epoch to another placement
  // (destroying the iterator these read) under placement "auto".
  int64_t skipped() const {
    CheckMadeHere();  // a lock a parent's thread held as it forked stays held
    const std::unique_lock<std::mutex> turn = Turn();
    return it_->skipped();
  }
  py::str skip_summary() const {
    CheckMadeHere();
    const std::unique_lock<std::mutex> turn = Turn();
    return Escaped(it_->skip_summary());
  }
  // The placement the epoch runs in now (PlacedIterator::MoveTo's test seam).
  bool MoveTo(int threads, int local_workers, std::optional<bool> keep_prefix, bool service_workers) {
    CheckMadeHere();
    const std::unique_lock<std::mutex> turn = Turn();
    placement::Placement to = it_->placement();
    to.threads = threads;
    to.local_workers = local_workers;
    to.service_workers = service_workers;
    to.keep_prefix = keep_prefix.value_or(to.keep_prefix);
    return WithoutGil([&] { return it_->MoveTo(to); });
  }

 private:
  // Threads sharing one iterator take turns, each element going to one of
  // them (two at once in next() lost, repeated and crashed). The GIL is let
  // go while waiting: the thread whose turn it is needs it to finish.
  std::unique_lock<std::mutex> Turn() const {
    std::unique_lock<std::mutex> lock(turn_, std::try_to_lock);
    if (!lock.owns_lock()) WithoutGil([&] { lock.lock(); });
    return lock;
  }

  void CheckMadeHere() const {
    ThrowIfError(made_.Check("this iterator was started",
                             "Start a new pass over the pipeline in this process, or resume one from a state() "
                             "saved before the fork."));
  }

  const MadeInThisProcess made_;
  mutable std::mutex turn_;
  std::shared_ptr<placement::PlacedPipeline> pipeline_;
  std::unique_ptr<placement::PlacedIterator> it_;
  Names names_;
  int64_t samples_ = 0;
  // While a batch is being handed over (signal handlers run) or held (one
  // raised): the state before it, and the batch.
  std::optional<std::string> before_;
  std::optional<Batch> held_;
};

class PyPipeline {
 public:
  explicit PyPipeline(const std::string& json) {
    absl::StatusOr<std::shared_ptr<placement::PlacedPipeline>> pipeline;
    {
      // Making it may list a store's objects, whose retries Ctrl-C stops.
      std::atomic<bool> cancelled{false};
      InterruptScope interrupt([&cancelled] { cancelled.store(true, std::memory_order_release); });
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      pipeline = WithoutGil([&]() -> absl::StatusOr<std::shared_ptr<placement::PlacedPipeline>> {
        const io::ScopedThreadCancel cancel(&cancelled);
        absl::StatusOr<PipelineDef> def = graph::PipelineFromJson(json);
        if (!def.ok()) return def.status();
        return placement::PlacedPipeline::Create(*def);
      });
      if (interrupt.interrupted()) RaiseInterrupt();
    }
    ThrowIfError(pipeline.status());
    pipeline_ = *std::move(pipeline);
    for (const ColumnSpec& c : pipeline_->first().output_schema().columns()) names_.push_back(c.name);
  }

  ~PyPipeline() {
    if (made_.inherited()) Abandon(pipeline_);
  }
  PyPipeline(const PyPipeline&) = delete;
  PyPipeline& operator=(const PyPipeline&) = delete;

  std::unique_ptr<PyIterator> Iterate(uint64_t epoch) {
    CheckMadeHere();
    return WithoutGil([&] { return std::make_unique<PyIterator>(pipeline_, pipeline_->Iterate(epoch), names_); });
  }

  // The rest of the epoch a PyIterator::State() was saved in.
  std::unique_ptr<PyIterator> Resume(const py::bytes& state) {
    CheckMadeHere();
    const std::string bytes = state;
    absl::StatusOr<std::unique_ptr<placement::PlacedIterator>> it;
    it = WithoutGil([&] { return pipeline_->Resume(bytes); });
    ThrowIfError(it.status());
    return std::make_unique<PyIterator>(pipeline_, *std::move(it), names_);
  }

  // graph::OutputFingerprint of the definition: equal on every rank of a
  // job running the same pipeline, whatever its shard.
  std::string fingerprint() const { return pipeline_->first().compiled().output_fingerprint; }
  // What the source listed (exec::ListingOf): equal on every rank whose
  // files are the same.
  std::string listing() const { return pipeline_->first().Listing(); }

  // [(name, dtype, per-sample shape)]
  py::list Schema() const {
    py::list out;
    for (const ColumnSpec& c : pipeline_->first().output_schema().columns()) {
      py::list shape;
      for (int64_t d : c.shape.dims()) shape.append(d);
      if (c.ragged) shape.append(py::none());  // a sample's bytes: any length
      out.append(py::make_tuple(c.name, std::string(DTypeName(c.dtype)), shape));
    }
    return out;
  }

  // The engine's bytes by kind (see Pipeline.memory in pipeline.py).
  py::dict Memory() const {
    const placement::PlacedPipeline::Memory m = pipeline_->memory();
    py::dict out;
    out["budget"] = m.budget;
    out["budget_default"] = m.budget_default;
    out["in_use"] = m.in_use;
    out["cached"] = m.cached;
    out["rings"] = m.rings;
    out["object_blocks"] = m.object_blocks;
    out["python_shared"] = m.python_shared;
    out["mapped_files"] = m.mapped_files;
    out["columnar"] = m.columnar;
    out["arrays"] = m.arrays;
    out["staging"] = m.staging;
    out["held"] = m.held;
    out["peak_in_use"] = m.peak_in_use;
    out["peak_held"] = m.peak_held;
    return out;
  }

  // Where it runs and what placement "auto" decided (JSON).
  std::string Placement() const { return pipeline_->report().ToJson(); }
  // Writes the deterministic prefix to keep now (PlacedPipeline's test seam).
  void KeepPrefix() {
    CheckMadeHere();
    absl::Status status;
    status = WithoutGil([&] { return pipeline_->KeepPrefixNow(); });
    ThrowIfError(status);
  }

  bool batched() const { return pipeline_->first().batched(); }
  // Elements per epoch; -1 unknown, -2 endless; raises the error an epoch
  // would end in where that is known (a shard with no rows). Without the
  // GIL: it may read index files or ask an object store, and the process's
  // other threads (a notebook's, a proxy's) run meanwhile.
  int64_t cardinality() const {
    absl::StatusOr<int64_t> n;
    n = WithoutGil([&] { return pipeline_->first().Length(); });
    ThrowIfError(n.status());
    return *n;
  }

 private:
  // The Python front makes a new engine in a forked child (Pipeline.engine).
  void CheckMadeHere() const {
    ThrowIfError(made_.Check("this engine was made", "Make the pipeline's engine anew in this process."));
  }

  const MadeInThisProcess made_;
  std::shared_ptr<placement::PlacedPipeline> pipeline_;
  Names names_;
};

py::list ListOps() {
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  py::list out;
  for (const ops::OpSchema* op : registry.List()) {
    py::list attrs;
    for (const ops::AttrSchema& a : op->attrs()) {
      attrs.append(py::dict(py::arg("name") = a.name, py::arg("type") = std::string(ops::AttrTypeName(a.type)),
                            py::arg("default") = a.default_json, py::arg("doc") = a.doc,
                            py::arg("allowed") = a.Constraint()));
    }
    py::list backends;
    for (ops::Backend b : registry.Backends(op->name())) backends.append(std::string(ops::BackendName(b)));
    out.append(py::dict(py::arg("name") = op->name(), py::arg("doc") = op->doc(), py::arg("attrs") = attrs,
                        py::arg("random") = op->random(), py::arg("predicate") = op->predicate(),
                        py::arg("batch_level") = op->level() == ops::OpLevel::kBatch, py::arg("backends") = backends,
                        py::arg("registrant") = registry.Registrant(op->name())));
  }
  return out;
}

void LoadPlugin(const std::string& path) {
  absl::Status status;
  status = WithoutGil([&] { return ops::LoadPlugin(path); });
  ThrowIfError(status);
}

py::dict DeviceDecodeStats() {
  const ops::DeviceDecodeStats s = ops::GetDeviceDecodeStats();
  py::dict d;
  d["hardware"] = s.hardware;
  d["cuda"] = s.cuda;
  d["cpu"] = s.cpu;
  d["decoder"] = s.decoder;
  return d;
}

py::dict ObjectStoreStats() {
  py::dict d;
  d["retries"] = io::ObjectStoreRetries();
  d["opened_ahead"] = io::ObjectsOpenedAhead();
  if (const std::shared_ptr<io::ObjectCache> cache = io::ObjectCache::Get()) {
    const io::ObjectCache::Stats s = cache->stats();
    py::dict c;
    c["dir"] = cache->dir();
    c["hits"] = s.hits;
    c["misses"] = s.misses;
    c["corrupt"] = s.corrupt;
    c["evicted"] = s.evicted;
    c["uncacheable"] = s.uncacheable;
    c["bytes"] = s.bytes;
    d["cache"] = c;
  }
  return d;
}

}  // namespace

void InitPipeline(py::module_& m) {
  py::class_<PyIterator>(m, "Iterator")
      .def("next_numpy", [](PyIterator& it) { return it.Next(&ToNumpy); })
      .def("next_dlpack", [](PyIterator& it) { return it.Next(&ToDlpack); })
      .def("state", &PyIterator::State)
      .def("_move_to", &PyIterator::MoveTo, py::arg("threads"), py::arg("local_workers"),
           py::arg("keep_prefix") = py::none(), py::arg("service_workers") = false)
      .def_property_readonly("samples", &PyIterator::samples)
      .def_property_readonly("skipped", &PyIterator::skipped)
      .def_property_readonly("skip_summary", &PyIterator::skip_summary);
  py::class_<PyPipeline>(m, "Pipeline")
      .def(py::init<const std::string&>(), py::arg("json"))
      .def("iterate", &PyPipeline::Iterate, py::arg("epoch") = 0)
      .def("resume", &PyPipeline::Resume, py::arg("state"))
      .def("schema", &PyPipeline::Schema)
      .def_property_readonly("batched", &PyPipeline::batched)
      .def_property_readonly("cardinality", &PyPipeline::cardinality)
      .def_property_readonly("fingerprint", &PyPipeline::fingerprint)
      .def_property_readonly("listing", &PyPipeline::listing)
      .def("memory", &PyPipeline::Memory)
      .def("placement", &PyPipeline::Placement)
      .def("_keep_prefix", &PyPipeline::KeepPrefix);
  m.def("ops", &ListOps, "The registered ops with their docs and attrs.");
  m.def(
      "state_epoch", [](const py::bytes& state) { return exec::StateEpoch(std::string(state)); }, py::arg("state"),
      "The epoch an iterator's state was saved in; None for bytes that are no state.");
  m.def(
      "serve_metrics",
      [](const std::string& host, int port) {
        absl::StatusOr<int> served;
        served = WithoutGil([&] { return placement::ServePipelineMetrics(host, port); });
        ThrowIfError(served.status());
        return *served;
      },
      py::arg("host"), py::arg("port"), "Serves the process's pipelines' Prometheus metrics; returns the port.");
  m.def("load_plugin", &LoadPlugin, py::arg("path"), "Loads an op plugin (.so) into the process's registry.");
  m.def(
      "hold_arrow_stream",
      [](py::capsule stream) {
        void* c_stream = PyCapsule_GetPointer(stream.ptr(), "arrow_array_stream");
        if (c_stream == nullptr) throw py::error_already_set();
        absl::StatusOr<std::string> name = io::HoldArrowStream(c_stream);
        ThrowIfError(name.status());
        return *name;
      },
      py::arg("stream"), "Imports an Arrow C stream's batches (zero-copy) and holds them; returns their name.");
  m.def("release_arrow_stream", &io::ReleaseArrowStream, py::arg("name"), "Drops a hold of hold_arrow_stream.");
  m.def("device_decode_stats", &DeviceDecodeStats,
        "Where the images of decode ops on a GPU were decoded so far in this process.");
  m.def("object_store_stats", &ObjectStoreStats,
        "Object stores' transient failures retried so far in this process, and the object cache's counts.");
}

}  // namespace sluice::python
