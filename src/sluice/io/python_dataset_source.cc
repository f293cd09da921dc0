#include "sluice/io/python_dataset_source.h"

#include <cstring>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/python_pool.h"
#include "sluice/io/fixed_record_reader.h"

namespace sluice::io {
namespace {

constexpr int64_t kDefaultSplitItems = 64;

// The pool, started on the first read: a dispatcher that only splits the
// dataset never runs Python.
class LazyPool {
 public:
  LazyPool(const PythonDatasetOptions& o, std::string spec) : o_(o), spec_(std::move(spec)) {}

  absl::StatusOr<PythonPool*> Get() {
    absl::call_once(once_, [this] {
      started_ = PythonPool::Start(o_.interpreter, spec_, o_.processes,
                                   absl::StrCat("python dataset '", o_.name, "'"));
    });
    if (!started_.ok()) return started_.status();
    return started_->get();
  }

 private:
  const PythonDatasetOptions& o_;
  const std::string spec_;
  absl::once_flag once_;
  absl::StatusOr<std::unique_ptr<PythonPool>> started_;
};

class PythonDatasetReader : public FixedRecordSplitReader {
 public:
  PythonDatasetReader(const PythonDatasetOptions& o, LazyPool* pool, Split split)
      : FixedRecordSplitReader(split), o_(o), pool_(pool) {}

 protected:
  // Items [first, first + n), made by one process: indices in, then each
  // column: dense ones at their offsets, ragged ones after them as offsets
  // and bytes (the process asks for more memory when they do not fit).
  absl::Status ReadRecords(int64_t first, int64_t n, int64_t row, BatchBuilder* out) override {
    SLUICE_ASSIGN_OR_RETURN(PythonPool* pool, pool_->Get());
    std::vector<std::unique_ptr<PythonProcess>> held;
    SLUICE_RETURN_IF_ERROR(pool->Acquire(1, &held));
    absl::Status status = Run(held[0].get(), first, n, row, out);
    pool->Release(std::move(held));
    return status;
  }

 private:
  absl::Status Run(PythonProcess* process, int64_t first, int64_t n, int64_t row, BatchBuilder* out) {
    size_t at = PythonAligned(kPythonHeaderBytes + n * sizeof(int64_t));
    std::vector<size_t> dense_at;
    for (const ColumnSpec& c : o_.columns) {
      dense_at.push_back(at);
      if (!c.ragged) at = PythonAligned(at + n * c.row_bytes());
    }
    SLUICE_ASSIGN_OR_RETURN(uint8_t* memory, process->Memory(at + n * 64));
    *reinterpret_cast<int64_t*>(memory) = -1;
    auto* indices = reinterpret_cast<int64_t*>(memory + kPythonHeaderBytes);
    for (int64_t i = 0; i < n; ++i) indices[i] = first + i;
    PythonFailure failure;
    const absl::Status status = process->Call(n, &failure);
    if (!status.ok() || !failure.message.empty()) {
      const std::string item = failure.row >= 0 ? absl::StrCat("dataset[", first + failure.row, "]")
                                                : absl::StrCat("dataset[", first, ":", first + n, "]");
      if (!status.ok()) {
        return absl::AbortedError(absl::StrCat("python dataset '", o_.name, "': ", status.message(), " making ",
                                               item));
      }
      return absl::InvalidArgumentError(absl::StrCat("python dataset '", o_.name, "' failed making ", item, ":\n",
                                                     failure.message));
    }
    SLUICE_ASSIGN_OR_RETURN(memory, process->Memory(0));
    const size_t mapped = process->mapped_bytes();
    // Ragged columns follow the dense ones, in column order; their offsets
    // come from the process, so they are checked before any byte is read.
    size_t ragged_at = at;
    for (size_t c = 0; c < o_.columns.size(); ++c) {
      const ColumnSpec& spec = o_.columns[c];
      if (!spec.ragged) {
        std::memcpy(out->dense(static_cast<int>(c)) + row * spec.row_bytes(), memory + dense_at[c],
                    n * spec.row_bytes());
        continue;
      }
      const auto* offsets = reinterpret_cast<const int64_t*>(memory + ragged_at);
      const size_t bytes_at = ragged_at + (n + 1) * sizeof(int64_t);
      bool valid = bytes_at <= mapped && offsets[0] == 0;
      for (int64_t i = 0; valid && i < n; ++i) valid = offsets[i + 1] >= offsets[i];
      if (!valid || bytes_at + static_cast<size_t>(offsets[n]) > mapped) {
        return absl::DataLossError(absl::StrCat("python dataset '", o_.name, "': column '", spec.name,
                                                "' of dataset[", first, ":", first + n,
                                                "] came back with offsets out of bounds: is its Python process "
                                                "running another version of sluice?"));
      }
      const uint8_t* bytes = memory + bytes_at;
      for (int64_t i = 0; i < n; ++i) {
        out->AppendBytes(static_cast<int>(c), absl::string_view(reinterpret_cast<const char*>(bytes + offsets[i]),
                                                                offsets[i + 1] - offsets[i]));
      }
      ragged_at = PythonAligned(ragged_at + (n + 1) * sizeof(int64_t) + offsets[n]);
    }
    return absl::OkStatus();
  }

  const PythonDatasetOptions& o_;
  LazyPool* pool_;
};

class PythonDatasetSource : public SourceFormat {
 public:
  explicit PythonDatasetSource(PythonDatasetOptions o)
      : o_(std::move(o)),
        schema_(o_.columns),
        files_(std::make_shared<const std::vector<std::string>>(std::vector<std::string>{o_.name})) {
    nlohmann::json spec = {{"kind", "dataset"}, {"dataset", o_.dataset}, {"main", o_.main_script},
                           {"outputs", nlohmann::json::array()}};
    for (const ColumnSpec& c : o_.columns) spec["outputs"].push_back(PythonColumnJson(c));
    pool_ = std::make_unique<LazyPool>(o_, spec.dump());
  }

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return files_; }
  std::vector<Split> MakeSplits() const override {
    return MakeRecordSplits({o_.length}, o_.split_records > 0 ? o_.split_records : kDefaultSplitItems);
  }
  bool SeeksRecords() const override { return true; }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog*) const override {
    Split bounded = split;
    if (bounded.end_record < 0) bounded.end_record = o_.length;
    return std::unique_ptr<SplitReader>(new PythonDatasetReader(o_, pool_.get(), bounded));
  }

 private:
  const PythonDatasetOptions o_;
  const Schema schema_;
  const std::shared_ptr<const std::vector<std::string>> files_;
  std::unique_ptr<LazyPool> pool_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SourceFormat>> MakePythonDatasetSource(PythonDatasetOptions options) {
  if (options.length < 0) return absl::InvalidArgumentError("python dataset: length must be >= 0");
  if (options.columns.empty()) return absl::InvalidArgumentError("python dataset: no columns");
  if (options.processes < 1) return absl::InvalidArgumentError("python dataset: processes must be >= 1");
  return std::unique_ptr<SourceFormat>(new PythonDatasetSource(std::move(options)));
}

}  // namespace sluice::io
