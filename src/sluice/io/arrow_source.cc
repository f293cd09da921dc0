// Built only with Arrow (SLUICE_WITH_ARROW; arrow_source_stub.cc otherwise),
// as C++20: Arrow's headers require it.
#include "sluice/io/arrow_source.h"

#include <arrow/api.h>
#include <arrow/c/bridge.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/util/float16.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/file_reader.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/index_permutation.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/arrow_counted_files.h"
#include "sluice/io/arrow_digest.h"
#include "sluice/io/arrow_ipc_batch.h"
#include "sluice/io/arrow_ipc_rows.h"
#include "sluice/io/arrow_memory_pool.h"
#include "sluice/io/file_split.h"
#include "sluice/io/object_store.h"
#include "sluice/io/object_store_arrow.h"
#include "sluice/io/parquet_footers.h"

namespace sluice::io {
namespace {

const char* FormatName(ColumnarFormat f) {
  switch (f) {
    case ColumnarFormat::kParquet:
      return "Parquet file";
    case ColumnarFormat::kArrowIpc:
      return "Arrow IPC file";
    case ColumnarFormat::kMemory:
      break;
  }
  return "in-memory Arrow data";
}

// Batches imported from a C stream (HoldArrowStream), by name.
struct HeldArrow {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
};

class ArrowHolds {
 public:
  static ArrowHolds& Get() {
    static ArrowHolds* holds = new ArrowHolds();
    return *holds;
  }
  // Named by its content (ArrowDigest), not by a count: a state saved over
  // it resumes in another process, and over other data is refused (as a
  // count, the same table held again was refused and another accepted).
  // Data held twice shares the name until both holds are removed.
  std::string Add(std::shared_ptr<const HeldArrow> held) {
    std::string name = absl::StrCat("arrow-memory:", ArrowDigest(*held->schema, held->batches));
    absl::MutexLock lock(&mu_);
    Held& entry = held_[name];
    if (entry.data == nullptr) entry.data = std::move(held);
    ++entry.holds;
    return name;
  }
  std::shared_ptr<const HeldArrow> Find(const std::string& name) const {
    absl::MutexLock lock(&mu_);
    const auto it = held_.find(name);
    return it == held_.end() ? nullptr : it->second.data;
  }
  void Remove(const std::string& name) {
    absl::MutexLock lock(&mu_);
    const auto it = held_.find(name);
    if (it != held_.end() && --it->second.holds == 0) held_.erase(it);
  }

 private:
  struct Held {
    std::shared_ptr<const HeldArrow> data;
    int holds = 0;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);
};

// The sluice dtype of an Arrow leaf type; none for types sluice has no column for.
std::optional<DType> DTypeOfArrow(arrow::Type::type t) {
  switch (t) {
    case arrow::Type::INT8:
    case arrow::Type::INT16:
    case arrow::Type::UINT16:
    case arrow::Type::INT32:
      return DType::kInt32;
    case arrow::Type::INT64:
    case arrow::Type::UINT32:
      return DType::kInt64;
    case arrow::Type::UINT8:
    case arrow::Type::BOOL:
      return DType::kUInt8;
    case arrow::Type::HALF_FLOAT:
    case arrow::Type::FLOAT:
    case arrow::Type::DOUBLE:
      return DType::kFloat32;
    default:
      return std::nullopt;
  }
}

// How one Arrow column becomes a sluice column.
struct ColumnPlan {
  enum class Kind { kBytes, kFixedBytes, kValues };
  Kind kind;
  ColumnSpec spec;
  int64_t per_row = 1;     // kValues: leaf values a row; kFixedBytes: bytes a row
  int bytes_child = -1;    // a struct column read as its "bytes" child's
  std::string arrow_type;  // the file's, for messages
};

bool IsBinary(arrow::Type::type t) {
  return t == arrow::Type::BINARY || t == arrow::Type::STRING || t == arrow::Type::LARGE_BINARY ||
         t == arrow::Type::LARGE_STRING;
}

// The index of the "bytes" binary child of a struct (how Hugging Face
// datasets stores an Image or Audio: {bytes, path}), or -1.
int BytesChild(const arrow::DataType& type) {
  if (type.id() != arrow::Type::STRUCT) return -1;
  const int child = static_cast<const arrow::StructType&>(type).GetFieldIndex("bytes");
  return child >= 0 && IsBinary(type.field(child)->type()->id()) ? child : -1;
}

// What to do with a column of a type sluice does not read.
std::string TypeHint(const arrow::DataType& type) {
  const arrow::Type::type t = type.id();
  if (t == arrow::Type::LIST || t == arrow::Type::LARGE_LIST) {
    return "; a list whose rows all hold n items reads once cast to fixed_size_list (pyarrow: "
           "table.cast(...) with pa.list_(type, n)); ragged lists go as bytes";
  }
  if (t == arrow::Type::DICTIONARY) return "; decode it first (pyarrow: column.dictionary_decode())";
  if (t == arrow::Type::UINT64) {
    return "; no sluice dtype holds every uint64: cast it to int64 first when its values fit (pyarrow: "
           "table.cast(...) with pa.int64())";
  }
  return "";
}

absl::StatusOr<ColumnPlan> PlanColumn(const arrow::Field& field, const std::string& file) {
  const std::shared_ptr<arrow::DataType>& type = field.type();
  if (IsBinary(type->id())) {
    return ColumnPlan{ColumnPlan::Kind::kBytes, ColumnSpec{field.name(), DType::kUInt8, Shape{}, /*ragged=*/true}};
  }
  if (const int child = BytesChild(*type); child >= 0) {
    return ColumnPlan{ColumnPlan::Kind::kBytes, ColumnSpec{field.name(), DType::kUInt8, Shape{}, /*ragged=*/true}, 1,
                      child};
  }
  switch (type->id()) {
    case arrow::Type::FIXED_SIZE_BINARY: {
      const int64_t width = static_cast<const arrow::FixedSizeBinaryType&>(*type).byte_width();
      return ColumnPlan{ColumnPlan::Kind::kFixedBytes, ColumnSpec{field.name(), DType::kUInt8, Shape{width}}, width};
    }
    default:
      break;
  }
  std::vector<int64_t> dims;
  std::shared_ptr<arrow::DataType> leaf = type;
  while (leaf->id() == arrow::Type::FIXED_SIZE_LIST) {
    const auto& list = static_cast<const arrow::FixedSizeListType&>(*leaf);
    dims.push_back(list.list_size());
    leaf = list.value_type();
  }
  const std::optional<DType> dtype = DTypeOfArrow(leaf->id());
  if (!dtype) {
    return absl::InvalidArgumentError(
        absl::StrCat("column '", field.name(), "' of ", file, " is ", type->ToString(),
                     ": sluice reads binary, string, fixed_size_binary, integers up to int64 and uint32, floats, bool, "
                     "fixed_size_list of those, "
                     "and a struct's binary 'bytes' (an image or audio column of Hugging Face datasets)",
                     TypeHint(leaf->id() == arrow::Type::UINT64 ? *leaf : *type)));
  }
  int64_t per_row = 1;
  for (int64_t d : dims) per_row *= d;
  return ColumnPlan{ColumnPlan::Kind::kValues, ColumnSpec{field.name(), *dtype, Shape(dims)}, per_row};
}

// The leaf values array under fixed-size lists, and where row `row` starts in it.
const arrow::Array* LeafOf(const arrow::Array& a, int64_t row, int64_t* leaf_index) {
  const arrow::Array* at = &a;
  int64_t index = row;
  while (at->type_id() == arrow::Type::FIXED_SIZE_LIST) {
    const auto& list = static_cast<const arrow::FixedSizeListArray&>(*at);
    index = list.value_offset(index);
    at = list.values().get();
  }
  *leaf_index = index;
  return at;
}

// n values of a leaf array from `from`, converted to the column's type.
template <typename Out>
void ConvertValues(const arrow::Array& leaf, int64_t from, int64_t n, Out* out) {
  auto copy = [&](auto* values) {
    using In = std::remove_const_t<std::remove_pointer_t<decltype(values)>>;
    if constexpr (std::is_same_v<In, Out>) {
      std::memcpy(out, values + from, n * sizeof(Out));
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(values[from + i]);
    }
  };
  const std::shared_ptr<arrow::ArrayData>& data = leaf.data();
  switch (leaf.type_id()) {
    case arrow::Type::INT8:
      return copy(data->GetValues<int8_t>(1));
    case arrow::Type::INT16:
      return copy(data->GetValues<int16_t>(1));
    case arrow::Type::UINT16:
      return copy(data->GetValues<uint16_t>(1));
    case arrow::Type::INT32:
      return copy(data->GetValues<int32_t>(1));
    case arrow::Type::INT64:
      return copy(data->GetValues<int64_t>(1));
    case arrow::Type::UINT32:
      return copy(data->GetValues<uint32_t>(1));
    case arrow::Type::UINT8:
      return copy(data->GetValues<uint8_t>(1));
    case arrow::Type::FLOAT:
      return copy(data->GetValues<float>(1));
    case arrow::Type::DOUBLE:
      return copy(data->GetValues<double>(1));
    case arrow::Type::BOOL: {
      const auto& bools = static_cast<const arrow::BooleanArray&>(leaf);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(bools.Value(from + i));
      return;
    }
    case arrow::Type::HALF_FLOAT: {
      const uint16_t* bits = data->GetValues<uint16_t>(1);
      for (int64_t i = 0; i < n; ++i)
        out[i] = static_cast<Out>(arrow::util::Float16::FromBits(bits[from + i]).ToFloat());
      return;
    }
    default:
      return;  // PlanColumn admits no other leaf
  }
}

// n values of a leaf array from `from` into `dst`, as `dtype`.
void ConvertInto(const arrow::Array& leaf, int64_t from, int64_t n, DType dtype, uint8_t* dst) {
  switch (dtype) {
    case DType::kInt32:
      return ConvertValues(leaf, from, n, reinterpret_cast<int32_t*>(dst));
    case DType::kInt64:
      return ConvertValues(leaf, from, n, reinterpret_cast<int64_t*>(dst));
    case DType::kUInt8:
      return ConvertValues(leaf, from, n, dst);
    default:
      return ConvertValues(leaf, from, n, reinterpret_cast<float*>(dst));
  }
}

// Copies rows [from, from + n) of column `array` into column `col` of `out`
// at row `row`.
void CopyRows(const ColumnPlan& plan, const arrow::Array& array, int col, int64_t from, int64_t n, int64_t row,
              BatchBuilder* out) {
  switch (plan.kind) {
    case ColumnPlan::Kind::kBytes:
      for (int64_t i = from; i < from + n; ++i) {
        const std::string_view v =
            array.type_id() == arrow::Type::LARGE_BINARY || array.type_id() == arrow::Type::LARGE_STRING
                ? static_cast<const arrow::LargeBinaryArray&>(array).GetView(i)
                : static_cast<const arrow::BinaryArray&>(array).GetView(i);
        out->AppendBytes(col, absl::string_view(v.data(), v.size()));
      }
      return;
    case ColumnPlan::Kind::kFixedBytes:
      std::memcpy(out->dense(col) + row * plan.per_row,
                  static_cast<const arrow::FixedSizeBinaryArray&>(array).GetValue(from), n * plan.per_row);
      return;
    case ColumnPlan::Kind::kValues: {
      int64_t leaf_from = 0;
      const arrow::Array* leaf = LeafOf(array, from, &leaf_from);
      ConvertInto(*leaf, leaf_from, n * plan.per_row, plan.spec.dtype,
                  out->dense(col) + row * plan.per_row * DTypeSize(plan.spec.dtype));
      return;
    }
  }
}

// Whether row `row` of `array` is null, or holds a null anywhere below.
bool HasNull(const arrow::Array& array, int64_t row, int64_t per_row) {
  if (array.IsNull(row)) return true;
  int64_t leaf_index = 0;
  const arrow::Array* leaf = LeafOf(array, row, &leaf_index);
  if (leaf == &array || leaf->null_count() == 0) return false;
  for (int64_t i = leaf_index; i < leaf_index + per_row; ++i) {
    if (leaf->IsNull(i)) return true;
  }
  return false;
}

// Whether `array` or the values under its fixed-size lists hold any null.
bool AnyNull(const arrow::Array& array) {
  for (const arrow::Array* at = &array;; at = static_cast<const arrow::FixedSizeListArray*>(at)->values().get()) {
    if (at->null_count() > 0) return true;
    if (at->type_id() != arrow::Type::FIXED_SIZE_LIST) return false;
  }
}

// Counted (ColumnarBytes); see arrow_memory_pool.h.
MappedArrowPool* DecodePool() {
  static auto* pool = new MappedArrowPool;
  return pool;
}

absl::Status FromArrow(const arrow::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(what, ": ", s.ToString()));
}

// The files' columns: what each file must hold, and how to read it.
struct SourceShape {
  ColumnarFormat format;
  std::vector<std::string> names;
  std::vector<ColumnPlan> plans;
  Schema schema;                                       // the plans' specs
  std::vector<std::shared_ptr<const HeldArrow>> held;  // kMemory: per "file"
};

// The top-level fields of an open file, its split boundaries (first row
// of each row group or record batch, and the total at the end).
struct FileLayout {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<int64_t> starts;
  ListedIpcFile ipc;  // an Arrow IPC file's
};

enum class Opening {
  kRead,     // a local file read, not mapped
  kMapped,   // a local file mapped
  kCounted,  // an Arrow IPC file's: its uncompressed columns are what its
             // reads return (a local file's mapping, an object's GETs), counted
};

// A local file, or an object in a store.
absl::StatusOr<ArrowObject> OpenColumnarFile(const std::string& path, Opening how) {
  if (IsObjectUrl(path)) {
    absl::StatusOr<ArrowObject> object = OpenObjectForArrow(path);
    if (object.ok() && how == Opening::kCounted) object->file = CountingReads(object->file);
    return object;
  }
  arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> file;
  if (how == Opening::kCounted) {
    file = OpenCountedMapping(path);
  } else if (how == Opening::kMapped) {
    file = arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ);
  } else {
    file = arrow::io::ReadableFile::Open(path);
  }
  if (!file.ok()) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", file.status().ToString()));
  return ArrowObject{*std::move(file), nullptr};
}

// For a file the IPC file reader refuses: what to do when it is an IPC
// stream (its first message's continuation marker, where a file starts
// "ARROW1"; before Arrow 0.15 a stream began with the message's length,
// which with its own 4 bytes made a multiple of 8, and no marker).
std::string StreamHint(arrow::io::RandomAccessFile& file) {
  uint32_t head = 0;
  const arrow::Result<int64_t> got = file.ReadAt(0, sizeof(head), &head);
  if (!got.ok() || *got != sizeof(head)) return "";
  constexpr absl::string_view kRemedy =
      ", not the file format this source reads: read it with sluice.from_arrow(pyarrow.ipc.open_stream(path)), or "
      "write it with pyarrow.ipc.new_file)";
  if (head == 0xFFFFFFFFu) {
    return absl::StrCat(" (it is an Arrow IPC stream, as Hugging Face datasets' save_to_disk and cache files are",
                        kRemedy);
  }
  const int64_t size = file.GetSize().ValueOr(0);
  if (head > 0 && (head + sizeof(head)) % 8 == 0 && head + sizeof(head) <= static_cast<uint64_t>(size)) {
    return absl::StrCat(" (it looks like an Arrow IPC stream in the format before Arrow 0.15", kRemedy);
  }
  return "";
}

// A file's size and, on disk, modification time: a footer parsed for one
// version is not taken for another. (An object rewritten since its listing
// fails its ETag's check instead.)
std::string VersionOf(const std::string& path, arrow::io::RandomAccessFile& file) {
  std::string version = absl::StrCat(file.GetSize().ValueOr(-1));
  std::error_code error;
  if (!IsObjectUrl(path)) {
    version += absl::StrCat("@", std::filesystem::last_write_time(path, error).time_since_epoch().count());
  }
  return version;
}

absl::StatusOr<FileLayout> ReadLayout(ColumnarFormat format, const std::string& path,
                                      std::shared_ptr<const HeldArrow>* held) {
  FileLayout layout;
  if (format == ColumnarFormat::kMemory) {
    *held = ArrowHolds::Get().Find(path);
    if (*held == nullptr) {
      return absl::NotFoundError(absl::StrCat("no Arrow data is held under '", path,
                                              "' in this process: from_arrow data is read by the process it was "
                                              "given to (remote workers cannot read it)"));
    }
    layout.schema = (*held)->schema;
    layout.starts.push_back(0);
    for (const auto& b : (*held)->batches) layout.starts.push_back(layout.starts.back() + b->num_rows());
    return layout;
  }
  SLUICE_ASSIGN_OR_RETURN(const ArrowObject object, OpenColumnarFile(path, Opening::kRead));
  const std::shared_ptr<arrow::io::RandomAccessFile>& opened = object.file;
  int64_t rows = 0;
  layout.starts.push_back(0);
  if (format == ColumnarFormat::kParquet) {
    auto reader = parquet::arrow::OpenFile(opened, arrow::default_memory_pool());
    if (!reader.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " is not a readable Parquet file: ", reader.status().ToString()));
    }
    SLUICE_RETURN_IF_ERROR(FromArrow((*reader)->GetSchema(&layout.schema), absl::StrCat("the schema of ", path)));
    const std::shared_ptr<parquet::FileMetaData> meta = (*reader)->parquet_reader()->metadata();
    for (int g = 0; g < meta->num_row_groups(); ++g) layout.starts.push_back(rows += meta->RowGroup(g)->num_rows());
    layout.ipc.version = VersionOf(path, *opened);  // what a row group's read checks (no blocks: not IPC)
    return layout;
  }
  auto reader = arrow::ipc::RecordBatchFileReader::Open(opened);
  if (!reader.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a readable Arrow IPC file: ", reader.status().ToString(), StreamHint(*opened)));
  }
  layout.schema = (*reader)->schema();
  SLUICE_ASSIGN_OR_RETURN(std::vector<IpcRecordBatch> batches, IpcRecordBatches(*opened, path));
  if (static_cast<int>(batches.size()) != (*reader)->num_record_batches()) {
    return absl::DataLossError(absl::StrCat(path, ": its footer lists ", (*reader)->num_record_batches(),
                                            " record batches to Arrow's reader and ", batches.size(), " to sluice's"));
  }
  for (const IpcRecordBatch& b : batches) layout.starts.push_back(rows += b.rows);
  layout.ipc = ListedIpcFile{layout.schema, std::move(batches), VersionOf(path, *opened)};
  return layout;
}

// Pages decoded in the counted pool; a page's CRC checked where its writer
// wrote one (pyarrow's write_page_checksum): a damaged page is then an
// error, or a counted skip, never wrong values.
parquet::ReaderProperties PageReading() {
  parquet::ReaderProperties properties(DecodePool());
  properties.set_page_checksum_verification(true);
  return properties;
}

// Reads one row group (record batch) whole, then copies its rows out, in
// chunks the source fills across groups. Views of the group's memory (as
// before) ended at its end, so the chunks after a group of another size
// than the batch's left every batch to be copied row by row again: W2
// from Parquet ran at 175k samples/s on views, 260k on copies.
class ColumnarReader : public SplitReader {
 public:
  ColumnarReader(const SourceShape& shape, const std::string& path, const ListedIpcFile& ipc, int32_t file, int group,
                 const Split& split, ParquetFooters* footers, CorruptionLog* skip_log)
      : shape_(shape),
        path_(path),
        ipc_(ipc),
        file_(file),
        group_(group),
        first_row_(split.begin_record),
        group_rows_(split.end_record - split.begin_record),
        footers_(footers),
        skip_log_(skip_log) {}

  // Record p of the split is row order(p) of the group: its rows shuffled,
  // each group and epoch anew (a sorted file's row groups mix within).
  void PermuteRecords(uint64_t key) override {
    const uint64_t place = (static_cast<uint64_t>(file_) << 32) + static_cast<uint64_t>(group_) + 1;
    order_key_ = key ^ (place * 0x9E3779B97F4A7C15);
  }

  absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) override {
    SLUICE_ASSIGN_OR_RETURN(const bool loaded, EnsureLoaded());
    if (!loaded) return 0;
    if (order_key_) return ReadShuffled(max_rows, out);
    int64_t rows = 0;
    while (rows < max_rows && next_ < num_rows_) {
      // The run of rows up to the next null (a corrupt record).
      int64_t end = std::min(num_rows_, next_ + (max_rows - rows));
      std::optional<int64_t> bad;
      for (int64_t r = next_; r < end && !bad && has_nulls_; ++r) {
        for (size_t c = 0; c < columns_.size() && !bad; ++c) {
          if (HasNull(*columns_[c], r, shape_.plans[c].per_row)) bad = r;
        }
      }
      if (bad) end = *bad;
      const int64_t n = end - next_;
      const int64_t row = out->rows();
      for (size_t c = 0; c < columns_.size(); ++c) {
        CopyRows(shape_.plans[c], *columns_[c], static_cast<int>(c), next_, n, row, out);
      }
      if (n > 0) out->provenance().AddRun(row, file_, first_row_ + next_);
      out->AddRows(n);
      rows += n;
      next_ = end;
      if (bad) SLUICE_RETURN_IF_ERROR(NullRecord(*bad));
    }
    return rows;
  }

 private:
  // Read's rows in the order's, one at a time: their record is their place
  // in the order (what a resume counts), their item their row in the file
  // (what messages name).
  absl::StatusOr<int64_t> ReadShuffled(int64_t max_rows, BatchBuilder* out) {
    if (!order_ && num_rows_ > 0) order_.emplace(num_rows_, *order_key_);
    int64_t rows = 0;
    for (; rows < max_rows && next_ < num_rows_; ++next_) {
      const int64_t r = (*order_)(next_);
      if (has_nulls_ && RowHasNull(r)) {
        SLUICE_RETURN_IF_ERROR(NullRecord(r));
        --next_;  // NullRecord moved past it
        continue;
      }
      const int64_t row = out->rows();
      for (size_t c = 0; c < columns_.size(); ++c) {
        CopyRows(shape_.plans[c], *columns_[c], static_cast<int>(c), r, 1, row, out);
      }
      out->provenance().AddItem(row, file_, first_row_ + next_, first_row_ + r, ItemKind::kFileRow);
      out->AddRows(1);
      ++rows;
    }
    return rows;
  }

  bool RowHasNull(int64_t r) const {
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (HasNull(*columns_[c], r, shape_.plans[c].per_row)) return true;
    }
    return false;
  }

  // False when the row group could not be read and was skipped (counted).
  absl::StatusOr<bool> EnsureLoaded() {
    if (loaded_) return !skipped_;
    loaded_ = true;
    absl::Status s = Load();
    if (s.ok()) return true;
    if (skip_log_ == nullptr) return s;
    skip_log_->Add(path_, group_rows_, 0, std::string(s.message()));  // the group's rows are lost
    skipped_ = true;
    return false;
  }

  absl::Status Load() {
    const std::string where =
        absl::StrCat(shape_.format == ColumnarFormat::kParquet ? "row group " : "record batch ", group_, " of ", path_);
    if (shape_.format == ColumnarFormat::kMemory) return TakeColumns(shape_.held[file_]->batches[group_], where);
    std::shared_ptr<arrow::RecordBatch> batch;
    absl::StatusOr<ArrowObject> object =
        OpenColumnarFile(path_, shape_.format == ColumnarFormat::kArrowIpc ? Opening::kCounted : Opening::kMapped);
    if (!object.ok()) return object.status();
    const std::shared_ptr<arrow::io::RandomAccessFile>& file = object->file;
    // A file replaced since its listing would mix two versions' rows, or
    // read one's columns by the other's layout.
    if (VersionOf(path_, *file) != ipc_.version) {
      return absl::DataLossError(absl::StrCat(path_, " changed after it was listed (size or modification time)"));
    }
    if (shape_.format == ColumnarFormat::kParquet) {
      // Its pages read and decompressed in the counted pool too, not Arrow's default.
      const std::shared_ptr<parquet::FileMetaData> footer = footers_->Find(path_, ipc_.version);
      parquet::arrow::FileReaderBuilder builder;
      SLUICE_RETURN_IF_ERROR(FromArrow(builder.Open(file, PageReading(), footer), absl::StrCat("cannot read ", path_)));
      auto reader = builder.memory_pool(DecodePool())->Build();
      SLUICE_RETURN_IF_ERROR(FromArrow(reader.status(), absl::StrCat("cannot read ", path_)));
      if (footer == nullptr) footers_->Keep(path_, ipc_.version, (*reader)->parquet_reader()->metadata());
      // The leaf columns of the fields read.
      std::vector<int> leaves;
      const parquet::arrow::SchemaManifest& manifest = (*reader)->manifest();
      for (const parquet::arrow::SchemaField& field : manifest.schema_fields) {
        if (std::find(shape_.names.begin(), shape_.names.end(), field.field->name()) == shape_.names.end()) continue;
        AddLeaves(field, &leaves);
      }
      auto table = (*reader)->ReadRowGroup(group_, leaves);
      SLUICE_RETURN_IF_ERROR(FromArrow(table.status(), absl::StrCat("cannot read ", where)));
      auto combined = (*table)->CombineChunksToBatch();
      SLUICE_RETURN_IF_ERROR(FromArrow(combined.status(), absl::StrCat("cannot read ", where)));
      batch = *combined;
    } else {
      // Compressed batches are decoded in the counted pool. Every column is
      // read: Arrow reads a subset into a buffer of the whole body from its
      // default pool, which is neither the mapping nor counted.
      arrow::ipc::IpcReadOptions options;
      options.memory_pool = DecodePool();
      SLUICE_ASSIGN_OR_RETURN(batch, ReadIpcRecordBatch(file, ipc_, group_, options, where));
    }
    // An object's footer and columns came in several GETs: none of its rows
    // go on unless it is still the version opened.
    if (object->unchanged) SLUICE_RETURN_IF_ERROR(object->unchanged());
    return TakeColumns(batch, where);
  }

  // The row group's columns that the source reads, in its order.
  absl::Status TakeColumns(const std::shared_ptr<arrow::RecordBatch>& batch, const std::string& where) {
    for (size_t c = 0; c < shape_.names.size(); ++c) {
      const std::string& name = shape_.names[c];
      std::shared_ptr<arrow::Array> column = batch->GetColumnByName(name);
      if (column == nullptr) return absl::DataLossError(absl::StrCat(where, " has no column '", name, "'"));
      // Its own file's layout: the children's order may differ between files.
      const int child = BytesChild(*column->type());
      if ((child >= 0) != (shape_.plans[c].bytes_child >= 0)) {
        return absl::DataLossError(absl::StrCat(where, "'s column '", name, "' is ", column->type()->ToString(),
                                                ", not of the layout it had when the files were listed"));
      }
      if (child >= 0) {
        // The child's values, null where the struct is (an image stored by
        // path only has null bytes: a corrupt record).
        auto bytes = static_cast<const arrow::StructArray&>(*column).GetFlattenedField(child, DecodePool());
        SLUICE_RETURN_IF_ERROR(FromArrow(bytes.status(), absl::StrCat("cannot read column '", name, "' of ", where)));
        column = *std::move(bytes);
      }
      has_nulls_ |= AnyNull(*column);
      columns_.push_back(std::move(column));
    }
    num_rows_ = batch->num_rows();
    return absl::OkStatus();
  }

  static void AddLeaves(const parquet::arrow::SchemaField& field, std::vector<int>* leaves) {
    if (field.is_leaf()) leaves->push_back(field.column_index);
    for (const parquet::arrow::SchemaField& child : field.children) AddLeaves(child, leaves);
  }

  // Row `row` holds a null: an error, or a counted skip.
  absl::Status NullRecord(int64_t row) {
    std::string column;
    bool by_path = false;  // a struct's bytes: an image or audio stored by its path only
    for (size_t c = 0; c < columns_.size() && column.empty(); ++c) {
      if (!HasNull(*columns_[c], row, shape_.plans[c].per_row)) continue;
      column = shape_.names[c];
      by_path = shape_.plans[c].bytes_child >= 0;
    }
    const std::string message =
        by_path ? absl::StrCat("column '", column, "' has no bytes in row ", first_row_ + row, " of ",
                               FormatName(shape_.format), " ", path_,
                               " (stored by its path only, or null): sluice reads the bytes a file holds; store "
                               "them in it (with Hugging Face datasets, embed the image files when saving), or "
                               "read the images by their paths with sluice.file_list")
                : absl::StrCat("column '", column, "' is null in row ", first_row_ + row, " of ",
                               FormatName(shape_.format), " ", path_);
    ++next_;
    if (skip_log_ == nullptr) return absl::DataLossError(message);
    skip_log_->Add(path_, 1, 0, message);
    return absl::OkStatus();
  }

  const SourceShape& shape_;
  const std::string& path_;
  const ListedIpcFile& ipc_;
  const int32_t file_;
  const int group_;
  const int64_t first_row_, group_rows_;
  ParquetFooters* const footers_;
  CorruptionLog* skip_log_;
  bool loaded_ = false, skipped_ = false;
  bool has_nulls_ = false;
  std::vector<std::shared_ptr<arrow::Array>> columns_;
  int64_t num_rows_ = 0, next_ = 0;
  std::optional<uint64_t> order_key_;      // set when the rows are shuffled
  std::optional<IndexPermutation> order_;  // made once the group is loaded
};

class ColumnarSource : public SourceFormat {
 public:
  ColumnarSource(SourceShape shape, std::vector<std::string> paths, std::vector<std::vector<int64_t>> starts,
                 std::vector<ListedIpcFile> ipc)
      : shape_(std::move(shape)),
        paths_(std::make_shared<const std::vector<std::string>>(std::move(paths))),
        starts_(std::move(starts)),
        ipc_(std::move(ipc)) {
    std::vector<ColumnSpec> columns;
    for (const ColumnPlan& p : shape_.plans) columns.push_back(p.spec);
    shape_.schema = Schema(std::move(columns));
  }

  const Schema& schema() const override { return shape_.schema; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return paths_; }
  std::vector<Split> MakeSplits() const override {
    std::vector<Split> splits;
    for (size_t f = 0; f < starts_.size(); ++f) {
      for (size_t g = 0; g + 1 < starts_[f].size(); ++g) {
        if (starts_[f][g + 1] > starts_[f][g])
          splits.push_back(Split{static_cast<int32_t>(f), starts_[f][g], starts_[f][g + 1]});
      }
    }
    return splits;
  }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog* skip_log) const override {
    const std::vector<int64_t>& starts = starts_[split.file];
    // The last group starting there: empty groups before it start there too.
    auto it = std::upper_bound(starts.begin(), starts.end(), split.begin_record);
    if (it != starts.begin()) --it;
    if (*it != split.begin_record || it + 1 == starts.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no row group of ", (*paths_)[split.file], " starts at row ", split.begin_record));
    }
    const int group = static_cast<int>(it - starts.begin());
    return std::unique_ptr<SplitReader>(new ColumnarReader(shape_, (*paths_)[split.file], ipc_[split.file], split.file,
                                                           group, split, footers_.get(), skip_log));
  }

 private:
  SourceShape shape_;
  std::shared_ptr<const std::vector<std::string>> paths_;
  std::vector<std::vector<int64_t>> starts_;  // per file: the groups' first rows, then the total
  std::vector<ListedIpcFile> ipc_;            // per file: an Arrow IPC file's batches, empty otherwise
  // Parquet's: 8 MiB of footers as stored (several times that parsed) list
  // about 65,000 row groups of a column.
  const std::unique_ptr<ParquetFooters> footers_ = std::make_unique<ParquetFooters>(int64_t{8} << 20);
};

}  // namespace

bool HaveArrow() { return true; }

int64_t ColumnarBytes() {
  return DecodePool()->bytes_allocated() + DecodePool()->cached_bytes() + HeldObjectReadBytes();
}
int64_t ColumnarPeakBytes() { return DecodePool()->max_memory(); }
void TrimColumnar() { DecodePool()->Trim(); }

absl::StatusOr<std::string> HoldArrowStream(void* arrow_array_stream) {
  auto reader = arrow::ImportRecordBatchReader(static_cast<ArrowArrayStream*>(arrow_array_stream));
  if (!reader.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot import the Arrow stream: ", reader.status().ToString()));
  }
  auto held = std::make_shared<HeldArrow>();
  held->schema = (*reader)->schema();
  while (true) {
    std::shared_ptr<arrow::RecordBatch> batch;
    const arrow::Status s = (*reader)->ReadNext(&batch);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reading the Arrow stream failed after ", held->batches.size(), " batches: ", s.ToString()));
    }
    if (batch == nullptr) break;
    held->batches.push_back(std::move(batch));
  }
  return ArrowHolds::Get().Add(std::move(held));
}

void ReleaseArrowStream(const std::string& name) { ArrowHolds::Get().Remove(name); }

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeColumnarSource(ColumnarFormat format,
                                                                 const std::vector<std::string>& patterns,
                                                                 const std::vector<std::string>& columns) {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (std::find(columns.begin(), columns.begin() + i, columns[i]) != columns.begin() + i) {
      return absl::InvalidArgumentError(absl::StrCat("column '", columns[i], "' is asked for twice"));
    }
  }
  std::vector<std::string> paths = patterns;  // kMemory: the holds' names
  if (format != ColumnarFormat::kMemory) {
    SLUICE_ASSIGN_OR_RETURN(paths, ExpandFilePatterns(patterns));
  }
  SourceShape shape{format, columns, {}, Schema(), {}};
  std::vector<std::vector<int64_t>> starts;
  std::vector<ListedIpcFile> ipc;
  for (size_t f = 0; f < paths.size(); ++f) {
    std::shared_ptr<const HeldArrow> held;
    SLUICE_ASSIGN_OR_RETURN(FileLayout layout, ReadLayout(format, paths[f], &held));
    shape.held.push_back(std::move(held));
    if (f == 0 && shape.names.empty()) {
      for (const std::shared_ptr<arrow::Field>& field : layout.schema->fields()) shape.names.push_back(field->name());
    }
    std::vector<ColumnPlan> plans;
    for (const std::string& name : shape.names) {
      const std::shared_ptr<arrow::Field> field = layout.schema->GetFieldByName(name);
      if (layout.schema->GetAllFieldIndices(name).size() > 1) {  // GetFieldByName finds none then
        return absl::InvalidArgumentError(absl::StrCat(FormatName(format), " ", paths[f], " has two columns named '",
                                                       name, "': sluice reads columns by name; rename one"));
      }
      if (field == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(FormatName(format), " ", paths[f], " has no column '", name,
                         "' (columns: ", absl::StrJoin(layout.schema->field_names(), ", "), ")"));
      }
      SLUICE_ASSIGN_OR_RETURN(ColumnPlan plan, PlanColumn(*field, paths[f]));
      plan.arrow_type = field->type()->ToString();
      plans.push_back(std::move(plan));
    }
    if (f == 0) {
      shape.plans = std::move(plans);
    } else {
      for (size_t c = 0; c < plans.size(); ++c) {
        const ColumnSpec &a = shape.plans[c].spec, &b = plans[c].spec;
        if ((shape.plans[c].bytes_child >= 0) != (plans[c].bytes_child >= 0)) {
          return absl::InvalidArgumentError(
              absl::StrCat("column '", a.name, "' is ", shape.plans[c].bytes_child >= 0 ? "a struct" : "no struct",
                           " in ", paths[0], " but ", plans[c].bytes_child >= 0 ? "a struct" : "no struct", " in ",
                           paths[f], ": every file must hold it with one layout"));
        }
        if (a.dtype != b.dtype || a.shape != b.shape || a.ragged != b.ragged) {
          return absl::InvalidArgumentError(absl::StrCat("column '", a.name, "' is ", DTypeName(a.dtype),
                                                         a.shape.ToString(), " in ", paths[0], " but ",
                                                         DTypeName(b.dtype), b.shape.ToString(), " in ", paths[f]));
        }
        // Rows are copied by the first file's layout: another one's bytes
        // would be read as if laid out so.
        if (shape.plans[c].kind != plans[c].kind) {
          return absl::InvalidArgumentError(absl::StrCat("column '", a.name, "' is ", shape.plans[c].arrow_type, " in ",
                                                         paths[0], " but ", plans[c].arrow_type, " in ", paths[f],
                                                         ": both read as ", DTypeName(a.dtype), a.shape.ToString(),
                                                         ", but every file must hold it with one Arrow layout; cast "
                                                         "one (pyarrow's Table.cast) and write it again"));
        }
      }
    }
    starts.push_back(std::move(layout.starts));
    ipc.push_back(std::move(layout.ipc));
  }
  return std::unique_ptr<SourceFormat>(
      new ColumnarSource(std::move(shape), std::move(paths), std::move(starts), std::move(ipc)));
}

}  // namespace sluice::io
