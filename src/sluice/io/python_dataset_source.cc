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
  LazyPool(const PythonDatasetOptions& o, std::string spec)
      : o_(o),
        spec_(std::move(spec)),
        what_(absl::StrCat(o.generator ? "python generator '" : "python dataset '", o.name, "'")) {}

  absl::StatusOr<PythonPool*> Get() {
    absl::call_once(once_,
                    [this] { started_ = PythonPool::Start(o_.interpreter, spec_, o_.processes, o_.processes, what_); });
    if (!started_.ok()) return started_.status();
    return started_->get();
  }

  // Whether the dataset loads, in one process of its own (the pool starts
  // on the first read).
  absl::Status Probe() const {
    absl::StatusOr<std::unique_ptr<PythonProcess>> probe = PythonProcess::Spawn(o_.interpreter, spec_);
    const absl::Status loaded = probe.ok() ? (*probe)->Ready() : probe.status();
    if (loaded.ok()) return loaded;
    return absl::Status(loaded.code(), absl::StrCat(what_, ": ", loaded.message()));
  }

 private:
  const PythonDatasetOptions& o_;
  const std::string spec_, what_;
  absl::once_flag once_;
  absl::StatusOr<std::unique_ptr<PythonPool>> started_;
};

// Items by index, made by one of the pool's processes.
class ItemMaker {
 public:
  ItemMaker(const PythonDatasetOptions& o, LazyPool* pool) : o_(o), pool_(pool) {}

  // Items [first, first + n) into rows from `row` on: returns how many the
  // process made (fewer only when a generator ended). Dense columns are at
  // their offsets, ragged ones after them as offsets and bytes (the
  // process asks for more memory when they do not fit).
  absl::StatusOr<int64_t> Make(int64_t first, int64_t n, int64_t row, BatchBuilder* out,
                               const std::atomic<bool>* cancelled) const {
    SLUICE_ASSIGN_OR_RETURN(PythonPool * pool, pool_->Get());
    std::vector<std::unique_ptr<PythonProcess>> held;
    SLUICE_RETURN_IF_ERROR(pool->Acquire(1, &held));
    absl::StatusOr<int64_t> made = Run(held[0].get(), first, n, row, out, cancelled);
    pool->Release(std::move(held));
    return made;
  }

 private:
  absl::StatusOr<int64_t> Run(PythonProcess* process, int64_t first, int64_t n, int64_t row, BatchBuilder* out,
                              const std::atomic<bool>* cancelled) const {
    size_t at = PythonAligned(kPythonHeaderBytes + n * sizeof(int64_t));
    std::vector<size_t> dense_at;
    for (const ColumnSpec& c : o_.columns) {
      dense_at.push_back(at);
      if (!c.ragged) at = PythonAligned(at + n * c.row_bytes());
    }
    SLUICE_ASSIGN_OR_RETURN(uint8_t* memory, process->Memory(at + n * 64));
    auto* header = reinterpret_cast<int64_t*>(memory);
    header[0] = -1;
    auto* indices = reinterpret_cast<int64_t*>(memory + kPythonHeaderBytes);
    for (int64_t i = 0; i < n; ++i) indices[i] = first + i;
    PythonFailure failure;
    const absl::Status status = process->Call(n, &failure, cancelled);
    if (!status.ok() || !failure.message.empty()) return Failed(status, failure, first, n);
    SLUICE_ASSIGN_OR_RETURN(memory, process->Memory(0));
    header = reinterpret_cast<int64_t*>(memory);
    const int64_t made = header[1];
    if (made < 0 || made > n || (!o_.generator && made != n)) {
      return Garbled(absl::StrCat("made ", made, " of ", n, " items"), first, n);
    }
    const size_t mapped = process->mapped_bytes();
    // Ragged columns follow the dense ones, in column order; their offsets
    // come from the process, so they are checked before any byte is read.
    size_t ragged_at = at;
    for (size_t c = 0; c < o_.columns.size(); ++c) {
      const ColumnSpec& spec = o_.columns[c];
      if (!spec.ragged) {
        std::memcpy(out->dense(static_cast<int>(c)) + row * spec.row_bytes(), memory + dense_at[c],
                    made * spec.row_bytes());
        continue;
      }
      const auto* offsets = reinterpret_cast<const int64_t*>(memory + ragged_at);
      const size_t bytes_at = ragged_at + (n + 1) * sizeof(int64_t);
      bool valid = bytes_at <= mapped && offsets[0] == 0;
      for (int64_t i = 0; valid && i < made; ++i) valid = offsets[i + 1] >= offsets[i];
      if (!valid || bytes_at + static_cast<size_t>(offsets[made]) > mapped) {
        return Garbled(absl::StrCat("column '", spec.name, "' has offsets out of bounds"), first, n);
      }
      const uint8_t* bytes = memory + bytes_at;
      for (int64_t i = 0; i < made; ++i) {
        out->AppendBytes(static_cast<int>(c), absl::string_view(reinterpret_cast<const char*>(bytes + offsets[i]),
                                                                offsets[i + 1] - offsets[i]));
      }
      ragged_at = PythonAligned(ragged_at + (n + 1) * sizeof(int64_t) + offsets[made]);
    }
    return made;
  }

  absl::Status Failed(const absl::Status& status, const PythonFailure& failure, int64_t first, int64_t n) const {
    if (absl::IsCancelled(status)) return status;  // torn down: no item to blame
    const std::string item = failure.row >= 0 ? Items(first + failure.row, 1) : Items(first, n);
    if (!status.ok()) return absl::AbortedError(absl::StrCat(What(), ": ", status.message(), " making ", item));
    return absl::InvalidArgumentError(absl::StrCat(What(), " failed making ", item, ":\n", failure.message));
  }

  absl::Status Garbled(absl::string_view what, int64_t first, int64_t n) const {
    return absl::DataLossError(absl::StrCat(What(), ": ", Items(first, n), " came back garbled (", what,
                                            "): is its Python process running another version of sluice?"));
  }

  // "python dataset 'Photos'", or "python generator 'stream'".
  std::string What() const {
    return absl::StrCat(o_.generator ? "python generator '" : "python dataset '", o_.name, "'");
  }

  // Items [first, first + n): "dataset[37]", "dataset[0:64]", or a
  // generator's "item 37", "items 0 to 63".
  std::string Items(int64_t first, int64_t n) const {
    if (o_.generator) {
      return n == 1 ? absl::StrCat("item ", first) : absl::StrCat("items ", first, " to ", first + n - 1);
    }
    return n == 1 ? absl::StrCat("dataset[", first, "]") : absl::StrCat("dataset[", first, ":", first + n, "]");
  }

  const PythonDatasetOptions& o_;
  LazyPool* pool_;
};

class PythonDatasetReader : public FixedRecordSplitReader {
 public:
  PythonDatasetReader(const ItemMaker* maker, Split split) : FixedRecordSplitReader(split), maker_(maker) {}

 protected:
  absl::Status ReadRecords(int64_t first, int64_t n, int64_t row, BatchBuilder* out) override {
    return maker_->Make(first, n, row, out, cancelled_).status();
  }

 private:
  const ItemMaker* maker_;
};

// A generator's items in order, until it ends. A split resumed at
// begin_record has its process iterate up to there.
class PythonGeneratorReader : public SplitReader {
 public:
  PythonGeneratorReader(const ItemMaker* maker, Split split) : maker_(maker), next_(split.begin_record) {}

  absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) override {
    if (ended_ || max_rows <= 0) return 0;
    SLUICE_ASSIGN_OR_RETURN(const int64_t made, maker_->Make(next_, max_rows, out->rows(), out, cancelled_));
    out->provenance().AddRun(out->rows(), 0, next_);
    out->AddRows(made);
    next_ += made;
    ended_ = made < max_rows;
    return made;
  }

 private:
  const ItemMaker* maker_;
  int64_t next_;
  bool ended_ = false;
};

class PythonDatasetSource : public SourceFormat {
 public:
  explicit PythonDatasetSource(PythonDatasetOptions o)
      : o_(std::move(o)),
        schema_(o_.columns),
        files_(std::make_shared<const std::vector<std::string>>(std::vector<std::string>{o_.name})) {
    nlohmann::json spec = {{"kind", "dataset"},
                           {"dataset", o_.dataset},
                           {"generator", o_.generator},
                           {"outputs", nlohmann::json::array()}};
    for (const ColumnSpec& c : o_.columns) {
      nlohmann::json column = PythonColumnJson(c);
      column["image"] = o_.images.count(c.name) > 0;  // sent as raw netpbm pixels
      spec["outputs"].push_back(std::move(column));
    }
    pool_ = std::make_unique<LazyPool>(o_, spec.dump());
    maker_ = std::make_unique<ItemMaker>(o_, pool_.get());
  }

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return files_; }
  std::vector<Split> MakeSplits() const override {
    if (o_.generator) return {Split{0, 0, -1}};
    return MakeRecordSplits({o_.length}, o_.split_records > 0 ? o_.split_records : kDefaultSplitItems);
  }
  bool SeeksRecords() const override { return true; }
  absl::Status Load() const override { return pool_->Probe(); }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog*) const override {
    if (o_.generator) return std::unique_ptr<SplitReader>(new PythonGeneratorReader(maker_.get(), split));
    Split bounded = split;
    if (bounded.end_record < 0) bounded.end_record = o_.length;
    return std::unique_ptr<SplitReader>(new PythonDatasetReader(maker_.get(), bounded));
  }

 private:
  const PythonDatasetOptions o_;
  const Schema schema_;
  const std::shared_ptr<const std::vector<std::string>> files_;
  std::unique_ptr<LazyPool> pool_;
  std::unique_ptr<ItemMaker> maker_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SourceFormat>> MakePythonDatasetSource(PythonDatasetOptions options) {
  if (options.length < 0) return absl::InvalidArgumentError("python dataset: length must be >= 0");
  if (options.columns.empty()) return absl::InvalidArgumentError("python dataset: no columns");
  if (options.processes < 1) return absl::InvalidArgumentError("python dataset: processes must be >= 1");
  return std::unique_ptr<SourceFormat>(new PythonDatasetSource(std::move(options)));
}

}  // namespace sluice::io
