#include "sluice/io/python_dataset_source.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/index_permutation.h"
#include "sluice/core/python_pool.h"
#include "sluice/io/fixed_record_reader.h"
#include "sluice/io/thread_cancel.h"

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
    absl::MutexLock lock(&mu_);
    // Started in the source's thread, whose cancellation (a Ctrl-C) stops
    // the start; a start so stopped is made again by the next pass.
    if (!tried_ || absl::IsCancelled(started_.status())) {
      started_ = PythonPool::Start(o_.interpreter, spec_, o_.processes, o_.processes, what_, ThreadCancellation());
      tried_ = true;
    }
    if (!started_.ok()) return started_.status();
    return started_->get();
  }

  // Whether the dataset loads, in one process of its own (the pool starts
  // on the first read).
  absl::Status Probe() const {
    absl::StatusOr<std::unique_ptr<PythonProcess>> probe = PythonProcess::Spawn(o_.interpreter, spec_);
    const absl::Status loaded = probe.ok() ? (*probe)->Ready(ThreadCancellation()) : probe.status();
    if (loaded.ok()) return loaded;
    return absl::Status(loaded.code(), absl::StrCat(what_, ": ", loaded.message()));
  }

 private:
  const PythonDatasetOptions& o_;
  const std::string spec_, what_;
  absl::Mutex mu_;
  bool tried_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<std::unique_ptr<PythonPool>> started_ ABSL_GUARDED_BY(mu_);
};

// Items by index, made by one of the pool's processes.
class ItemMaker {
 public:
  ItemMaker(const PythonDatasetOptions& o, LazyPool* pool) : o_(o), pool_(pool) {}

  // Items [first, first + n) into rows from `row` on: returns how many the
  // process made (fewer only when a generator ended). Dense columns are at
  // their offsets, ragged ones after them as offsets and bytes (the
  // process asks for more memory when they do not fit). With `kept`, only
  // the items it keeps are made, the others' rows left hollow (KeptRows);
  // kept->first is item `first`'s place. With `order`, record r is the
  // dataset's item order(r) (PermuteRecords).
  absl::StatusOr<int64_t> Make(int64_t first, int64_t n, int64_t row, BatchBuilder* out,
                               const std::atomic<bool>* cancelled, std::atomic<int64_t>* progress,
                               const KeptRows* kept = nullptr, const IndexPermutation* order = nullptr) const {
    std::vector<int64_t> items, indices;
    for (int64_t i = 0; i < n; ++i) {
      if (kept != nullptr && !kept->Keeps(kept->first + i)) continue;
      items.push_back(first + i);
      indices.push_back(order != nullptr ? (*order)(first + i) : first + i);
    }
    if (items.empty()) {
      FillHollow(n, row, out);
      return 0;
    }
    SLUICE_ASSIGN_OR_RETURN(PythonPool * pool, pool_->Get());
    std::vector<std::unique_ptr<PythonProcess>> held;
    SLUICE_RETURN_IF_ERROR(pool->Acquire(1, &held));
    absl::StatusOr<int64_t> made = Run(held[0].get(), items, indices, first, n, row, out, cancelled, progress);
    pool->Release(std::move(held));
    return made;
  }

 private:
  // `items`: the records made, `indices`: the dataset's items they are.
  absl::StatusOr<int64_t> Run(PythonProcess* process, const std::vector<int64_t>& items,
                              const std::vector<int64_t>& indices, int64_t first, int64_t n, int64_t row,
                              BatchBuilder* out, const std::atomic<bool>* cancelled,
                              std::atomic<int64_t>* progress) const {
    const int64_t m = static_cast<int64_t>(items.size());
    size_t at = PythonAligned(kPythonHeaderBytes + m * sizeof(int64_t));
    std::vector<size_t> dense_at;
    for (const ColumnSpec& c : o_.columns) {
      dense_at.push_back(at);
      if (!c.ragged) at = PythonAligned(at + m * c.row_bytes());
    }
    SLUICE_ASSIGN_OR_RETURN(uint8_t* memory, process->Memory(at + m * 64));
    reinterpret_cast<int64_t*>(memory)[0] = -1;
    std::memcpy(memory + kPythonHeaderBytes, indices.data(), m * sizeof(int64_t));
    PythonFailure failure;
    const absl::Status status = process->Call(m, &failure, cancelled, progress);
    if (!status.ok() || !failure.message.empty()) {
      return Failed(status, failure, failure.row >= 0 && failure.row < m ? indices[failure.row] : -1, indices);
    }
    SLUICE_ASSIGN_OR_RETURN(memory, process->Memory(0));
    const int64_t made = reinterpret_cast<int64_t*>(memory)[1];
    if (made < 0 || made > m || (!o_.generator && made != m)) {
      return Garbled(absl::StrCat("made ", made, " of ", m, " items"), indices);
    }
    // Items made, and the rows they fill: a generator's first `made`, or a
    // dataset's n rows with the items not kept hollow.
    const Placed placed{items, first, row, m == n ? made : n};
    const size_t mapped = process->mapped_bytes();
    // Ragged columns follow the dense ones, in column order; their offsets
    // come from the process, so they are checked before any byte is read.
    size_t ragged_at = at;
    for (size_t c = 0; c < o_.columns.size(); ++c) {
      const ColumnSpec& spec = o_.columns[c];
      if (!spec.ragged) {
        CopyDense(static_cast<int>(c), memory + dense_at[c], placed, out);
        continue;
      }
      const auto* offsets = reinterpret_cast<const int64_t*>(memory + ragged_at);
      const size_t bytes_at = ragged_at + (m + 1) * sizeof(int64_t);
      bool valid = bytes_at <= mapped && offsets[0] == 0;
      for (int64_t i = 0; valid && i < made; ++i) valid = offsets[i + 1] >= offsets[i];
      if (!valid || bytes_at + static_cast<size_t>(offsets[made]) > mapped) {
        return Garbled(absl::StrCat("column '", spec.name, "' has offsets out of bounds"), indices);
      }
      AppendRagged(static_cast<int>(c), memory + bytes_at, offsets, placed, out);
      ragged_at = PythonAligned(ragged_at + (m + 1) * sizeof(int64_t) + offsets[made]);
    }
    return made;
  }

  // The items a process made (in `items` order) and the rows they go to:
  // item items[j] to row `row + items[j] - first`, of `rows` rows.
  struct Placed {
    const std::vector<int64_t>& items;
    int64_t first, row, rows;
  };

  // One dense column's rows, the hollow ones zeroed.
  void CopyDense(int col, const uint8_t* made, const Placed& p, BatchBuilder* out) const {
    const size_t row_bytes = o_.columns[col].row_bytes();
    uint8_t* rows = out->dense(col) + p.row * row_bytes;
    if (static_cast<int64_t>(p.items.size()) >= p.rows) {  // all made, in order
      std::memcpy(rows, made, p.rows * row_bytes);
      return;
    }
    std::memset(rows, 0, p.rows * row_bytes);
    for (size_t j = 0; j < p.items.size(); ++j) {
      std::memcpy(rows + (p.items[j] - p.first) * row_bytes, made + j * row_bytes, row_bytes);
    }
  }

  // One ragged column's rows in order, the hollow ones empty.
  static void AppendRagged(int col, const uint8_t* bytes, const int64_t* offsets, const Placed& p, BatchBuilder* out) {
    size_t j = 0;
    for (int64_t i = 0; i < p.rows; ++i) {
      if (j == p.items.size() || p.items[j] != p.first + i) {
        out->AppendBytes(col, absl::string_view());
        continue;
      }
      out->AppendBytes(
          col, absl::string_view(reinterpret_cast<const char*>(bytes + offsets[j]), offsets[j + 1] - offsets[j]));
      ++j;
    }
  }

  // Rows [row, row + n), none of them made.
  void FillHollow(int64_t n, int64_t row, BatchBuilder* out) const {
    static const std::vector<int64_t> kNone;
    const Placed none{kNone, 0, row, n};
    for (size_t c = 0; c < o_.columns.size(); ++c) {
      if (o_.columns[c].ragged) {
        AppendRagged(static_cast<int>(c), nullptr, nullptr, none, out);
      } else {
        CopyDense(static_cast<int>(c), nullptr, none, out);
      }
    }
  }

  // `failed`: the item the process was making, or -1; `indices`: those it was given.
  absl::Status Failed(const absl::Status& status, const PythonFailure& failure, int64_t failed,
                      const std::vector<int64_t>& indices) const {
    if (absl::IsCancelled(status)) return status;  // torn down: no item to blame
    const std::string item = failed >= 0 ? Items({failed}) : Items(indices);
    if (!status.ok()) return absl::AbortedError(absl::StrCat(What(), ": ", status.message(), " making ", item));
    return absl::InvalidArgumentError(absl::StrCat(What(), " failed making ", item, ":\n", failure.message));
  }

  absl::Status Garbled(absl::string_view what, const std::vector<int64_t>& indices) const {
    return absl::DataLossError(absl::StrCat(What(), ": ", Items(indices), " came back garbled (", what,
                                            "): is its Python process running another version of sluice?"));
  }

  // "python dataset 'Photos'", or "python generator 'stream'".
  std::string What() const {
    return absl::StrCat(o_.generator ? "python generator '" : "python dataset '", o_.name, "'");
  }

  // "dataset[37]", "dataset[0:64]" (a run), "dataset[812, 5, 77, ...] (64
  // items)" (a shuffled epoch's), or a generator's "item 37", "items 0 to 63".
  std::string Items(const std::vector<int64_t>& indices) const {
    const int64_t first = indices.front(), n = static_cast<int64_t>(indices.size());
    if (o_.generator) {
      return n == 1 ? absl::StrCat("item ", first) : absl::StrCat("items ", first, " to ", indices.back());
    }
    if (n == 1) return absl::StrCat("dataset[", first, "]");
    const bool run = std::adjacent_find(indices.begin(), indices.end(),
                                        [](int64_t a, int64_t b) { return b != a + 1; }) == indices.end();
    if (run) return absl::StrCat("dataset[", first, ":", first + n, "]");
    const std::vector<int64_t> some(indices.begin(), indices.begin() + std::min<int64_t>(n, 4));
    return absl::StrCat("dataset[", absl::StrJoin(some, ", "), n > 4 ? ", ...] (" : "] (", n, " items)");
  }

  const PythonDatasetOptions& o_;
  LazyPool* pool_;
};

// A dataset's items of one split of `length` in all, in order or, shuffled,
// in the epoch's order of all of them; those a shard after the source will
// not keep are not made (KeepOnly).
class PythonDatasetReader : public FixedRecordSplitReader {
 public:
  PythonDatasetReader(const ItemMaker* maker, Split split, int64_t length)
      : FixedRecordSplitReader(split), maker_(maker), begin_(split.begin_record), length_(length) {}

  void KeepOnly(const KeptRows& kept) override { kept_ = kept; }
  void PermuteRecords(uint64_t key) override {
    if (length_ > 0) order_.emplace(length_, key);
  }

 protected:
  absl::Status ReadRecords(int64_t first, int64_t n, int64_t row, BatchBuilder* out) override {
    const IndexPermutation* order = order_ ? &*order_ : nullptr;
    if (!kept_) return maker_->Make(first, n, row, out, cancelled_, progress_, nullptr, order).status();
    KeptRows here = *kept_;
    here.first += first - begin_;
    return maker_->Make(first, n, row, out, cancelled_, progress_, &here, order).status();
  }

  // Shuffled, record r is dataset[order(r)]: messages name that item.
  void AddProvenance(int64_t row, int64_t first, int64_t n, int32_t file, Provenance* provenance) override {
    if (!order_) return FixedRecordSplitReader::AddProvenance(row, first, n, file, provenance);
    for (int64_t i = 0; i < n; ++i) provenance->AddItem(row + i, file, first + i, (*order_)(first + i));
  }

 private:
  const ItemMaker* maker_;
  const int64_t begin_, length_;
  std::optional<KeptRows> kept_;
  std::optional<IndexPermutation> order_;
};

// A generator's items in order, until it ends. A split resumed at
// begin_record has its process iterate up to there.
class PythonGeneratorReader : public SplitReader {
 public:
  PythonGeneratorReader(const ItemMaker* maker, Split split) : maker_(maker), next_(split.begin_record) {}

  absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) override {
    if (ended_ || max_rows <= 0) return 0;
    SLUICE_ASSIGN_OR_RETURN(const int64_t made, maker_->Make(next_, max_rows, out->rows(), out, cancelled_, progress_));
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
  int64_t SplitPoolBytes(const Split& split) const override { return split.records() * schema_.RowBytes(); }
  absl::Status Load() const override { return pool_->Probe(); }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog*) const override {
    if (o_.generator) return std::unique_ptr<SplitReader>(new PythonGeneratorReader(maker_.get(), split));
    Split bounded = split;
    if (bounded.end_record < 0) bounded.end_record = o_.length;
    return std::unique_ptr<SplitReader>(new PythonDatasetReader(maker_.get(), bounded, o_.length));
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
