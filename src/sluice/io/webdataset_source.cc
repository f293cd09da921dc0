#include "sluice/io/webdataset_source.h"

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/archive_stream.h"
#include "sluice/io/file_split.h"

namespace sluice::io {
namespace {

// A member's path split at the first dot of its file name; both empty for a
// name with no dot or nothing before its first (README, .DS_Store), which
// belongs to no sample, as the webdataset library reads them.
struct KeyAndExtension {
  std::string key, extension;
};

KeyAndExtension SplitMemberPath(const std::string& path) {
  const size_t name = path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1;
  const size_t dot = path.find('.', name);
  if (dot == std::string::npos || dot == name) return {"", ""};
  return {path.substr(0, dot), absl::AsciiStrToLower(path.substr(dot + 1))};
}

// The webdataset library's names for the sample's key and its shard's path
// (or URL), given as a field's extension.
constexpr absl::string_view kKeyField = "__key__";
constexpr absl::string_view kUrlField = "__url__";

// What a reader collects of the sample being read.
struct PendingSample {
  std::string key;
  std::vector<std::optional<std::string>> values;  // per field
  std::vector<std::string> members;                // per field: the member read, for messages
  std::string first_member;                        // for messages
  std::vector<std::string> extensions;             // its members', for messages
  int64_t bytes = 0;
  bool skipped = false;  // found corrupt and counted already (on_corrupt "skip")
  // Begun, and holding a member for every field (kept when damage follows).
  bool Whole() const {
    return !key.empty() && std::all_of(values.begin(), values.end(), [](const auto& v) { return v.has_value(); });
  }
};

class WebDatasetReader : public SplitReader {
 public:
  WebDatasetReader(const std::string& path, int32_t file, const std::vector<WebDatasetField>& fields,
                   const std::map<std::string, int>& field_of, CorruptionLog* skip_log)
      : path_(path), file_(file), fields_(fields), field_of_(field_of), skip_log_(skip_log) {}

  ~WebDatasetReader() override {
    if (archive_ != nullptr) archive_read_free(archive_);
  }

  absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) override {
    if (archive_ == nullptr && !done_) SLUICE_RETURN_IF_ERROR(Open());
    int64_t rows = 0;
    while (rows < max_rows && !done_ && !out->RaggedFull()) {
      archive_entry* entry = nullptr;
      const int r = archive_read_next_header(archive_, &entry);
      if (r == ARCHIVE_EOF) {
        done_ = true;
        const absl::Status checked = stream_->Finish();
        if (!checked.ok() && !stream_->read_status().ok()) return checked;
        // The last sample waits for the last CRC; bytes after it spoil nothing.
        if (checked.ok() || stream_->gzip_damaged_after_its_data()) {
          if (!sample_.key.empty()) SLUICE_RETURN_IF_ERROR(Emit(out, &rows));
        }
        if (!checked.ok()) SLUICE_RETURN_IF_ERROR(DamagedAfterTheTar(checked.message()));
        break;
      }
      // ARCHIVE_RETRY is a damaged header (libarchive would scan past it
      // and lose the members it held); ARCHIVE_WARN a readable one.
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        if (sample_.Whole()) SLUICE_RETURN_IF_ERROR(Emit(out, &rows));
        SLUICE_RETURN_IF_ERROR(Damaged(absl::StrCat("after member ", last_member_)));
        break;
      }
      if (archive_entry_filetype(entry) != AE_IFREG) continue;
      const std::string member = archive_entry_pathname(entry);
      const KeyAndExtension ke = SplitMemberPath(member);
      if (ke.key.empty()) {
        archive_read_data_skip(archive_);  // no sample's member
        continue;
      }
      if (ke.key != sample_.key && !sample_.key.empty()) SLUICE_RETURN_IF_ERROR(Emit(out, &rows));
      if (sample_.key.empty()) Start(ke.key, member);
      last_member_ = member;
      last_member_at_ = archive_read_header_position(archive_);
      sample_.extensions.push_back(ke.extension);
      const auto field = field_of_.find(ke.extension);
      if (field == field_of_.end()) {
        archive_read_data_skip(archive_);  // a member no field asks for
        continue;
      }
      SLUICE_RETURN_IF_ERROR(ReadMember(entry, member, field->second));
    }
    return rows;
  }

 private:
  absl::Status Open() {
    done_ = true;  // until opened
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> file = RandomAccessFile::Open(path_);
    if (!file.ok()) return WithContext(file.status(), "cannot open WebDataset shard");
    const uint64_t size = (*file)->size();
    stream_ = std::make_unique<ArchiveStream>(*std::move(file));
    archive_ = archive_read_new();
    archive_read_support_format_tar(archive_);
    archive_read_support_format_gnutar(archive_);
    // Compressed shards (.tar.gz, .tgz, .tar.xz, .tar.zst), as webdataset reads them.
    archive_read_support_filter_all(archive_);
    const absl::Status opened = stream_->OpenArchive(archive_);
    if (!opened.ok()) {
      // No tar at all (an empty file, another format): under on_corrupt
      // "skip" the whole file is skipped and counted. A store's error
      // reading it is no damage.
      if (skip_log_ == nullptr || !stream_->read_status().ok()) return opened;
      skip_log_->Add(path_, 1, size, std::string(opened.message()));
      return absl::OkStatus();
    }
    done_ = false;
    return absl::OkStatus();
  }

  void Start(const std::string& key, const std::string& member) {
    sample_.key = key;
    sample_.values.assign(fields_.size(), std::nullopt);
    sample_.members.assign(fields_.size(), "");
    for (size_t f = 0; f < fields_.size(); ++f) {
      if (fields_[f].extensions[0] == kKeyField) sample_.values[f] = key;
      if (fields_[f].extensions[0] == kUrlField) sample_.values[f] = path_;
    }
    sample_.first_member = member;
    sample_.bytes = 0;
  }

  absl::Status ReadMember(archive_entry* entry, const std::string& member, int field) {
    std::optional<std::string>& value = sample_.values[field];
    if (value.has_value()) {
      sample_.skipped = true;
      return Corrupt(absl::StrCat("sample '", sample_.key, "' has a second member for field '", fields_[field].name,
                                  "': ", member));
    }
    const la_int64_t size = std::max<la_int64_t>(archive_entry_size(entry), 0);
    value.emplace();
    sample_.members[field] = member;
    const absl::Status read = ReadData(static_cast<uint64_t>(size), &*value);
    if (!read.ok()) {
      value.reset();
      return Damaged(absl::StrCat("in member ", member, " (its header, at byte ", last_member_at_, " of the tar, ",
                                  read.message(), ")"));
    }
    sample_.bytes += size;
    return absl::OkStatus();
  }

  // The current member's `size` bytes, read in pieces: a damaged header may
  // declare any size (2^62 bytes), and only bytes that came are held.
  absl::Status ReadData(uint64_t size, std::string* out) {
    constexpr uint64_t kPiece = uint64_t{16} << 20;
    while (out->size() < size) {
      const size_t at = out->size();
      out->resize(at + std::min(size - at, std::max<uint64_t>(at, kPiece)));
      const la_ssize_t got = archive_read_data(archive_, out->data() + at, out->size() - at);
      if (got <= 0) {  // what the failing call copied is not counted: `at` came at least
        return absl::DataLossError(
            absl::StrCat("declares ", size, " bytes, and the shard ends or is damaged ",
                         at == 0 ? "within them" : absl::StrCat("after at least ", at, " of them")));
      }
      out->resize(at + static_cast<size_t>(got));
    }
    return absl::OkStatus();
  }

  // Appends the finished sample, or reports what it lacks.
  absl::Status Emit(BatchBuilder* out, int64_t* rows) {
    PendingSample s = std::move(sample_);
    sample_ = PendingSample();
    const int64_t index = index_++;
    if (s.skipped) return absl::OkStatus();
    std::vector<int64_t> integers(fields_.size(), 0);
    for (size_t f = 0; f < fields_.size(); ++f) {
      const WebDatasetField& field = fields_[f];
      if (!s.values[f].has_value()) {
        return Corrupt(absl::StrCat("sample '", s.key, "' (member ", s.first_member, ") has no member for field '",
                                    field.name, "' (extensions ", absl::StrJoin(field.extensions, ", "),
                                    "); its members' extensions: ", absl::StrJoin(s.extensions, ", ")),
                       s.bytes);
      }
      if (field.length > 0 && static_cast<int64_t>(s.values[f]->size()) != field.length) {
        return Corrupt(absl::StrCat("member ", s.members[f], " of field '", field.name, "' has ", s.values[f]->size(),
                                    " bytes, not the declared ", field.length),
                       s.bytes);
      }
      if (field.integer && !absl::SimpleAtoi(absl::StripAsciiWhitespace(*s.values[f]), &integers[f])) {
        return Corrupt(absl::StrCat("member ", s.members[f], " of field '", field.name, "' is not an integer: \"",
                                    absl::CHexEscape(s.values[f]->substr(0, 32)), "\""),
                       s.bytes);
      }
    }
    const int64_t row = out->rows();
    for (size_t f = 0; f < fields_.size(); ++f) {
      if (fields_[f].integer) {
        reinterpret_cast<int64_t*>(out->dense(static_cast<int>(f)))[row] = integers[f];
      } else if (fields_[f].length > 0) {
        std::memcpy(out->dense(static_cast<int>(f)) + row * fields_[f].length, s.values[f]->data(), fields_[f].length);
      } else {
        out->AppendBytes(static_cast<int>(f), *s.values[f]);
      }
    }
    out->provenance().AddRun(row, file_, index);
    out->AddRows(1);
    ++*rows;
    return absl::OkStatus();
  }

  // A sample that cannot be used: an error, or a counted skip.
  absl::Status Corrupt(const std::string& problem, int64_t bytes = 0) {
    const std::string message = absl::StrCat(problem, " in WebDataset shard ", path_);
    if (skip_log_ == nullptr) return absl::DataLossError(message);
    skip_log_->Add(path_, 1, static_cast<uint64_t>(bytes), message);
    return absl::OkStatus();
  }

  // The shard cannot be read on (truncated or damaged): the rest is lost.
  absl::Status Damaged(const std::string& where) {
    done_ = true;
    if (!stream_->read_status().ok()) return stream_->read_status();  // the store's error, not damage
    if (stream_->gzip_damaged()) return GzipDamaged(stream_->gzip_damage());
    const char* why = archive_error_string(archive_);
    return Corrupt(absl::StrCat("the tar is truncated or damaged ", where, " (", why ? why : "unknown",
                                "); the rest of the shard is lost, its samples not counted"));
  }

  // Damage past the tar's end marker: bytes after the last gzip member
  // (every sample was handed on, counted as one record all the same, so
  // that a count shows it), or the last member's CRC (the last sample is
  // lost, those before were handed on unchecked).
  absl::Status DamagedAfterTheTar(absl::string_view why) {
    if (!stream_->gzip_damaged_after_its_data()) return GzipDamaged(why);
    return Corrupt(absl::StrCat("the shard's ", why, ", after its tar's end: its samples were all handed on"));
  }

  // Where the damage lies is unknown: gzip checks a member's bytes at its end.
  absl::Status GzipDamaged(absl::string_view why) {
    done_ = true;
    return Corrupt(absl::StrCat("the shard's ", why, "; the samples before were handed on unchecked (gzip checks a ",
                                "member's data at its end) and the rest is lost (read after member ", last_member_,
                                ")"));
  }

  const std::string& path_;
  const int32_t file_;
  const std::vector<WebDatasetField>& fields_;
  const std::map<std::string, int>& field_of_;
  CorruptionLog* skip_log_;
  std::unique_ptr<ArchiveStream> stream_;  // outlives archive_: declared first
  archive* archive_ = nullptr;
  bool done_ = false;
  PendingSample sample_;
  std::string last_member_ = "(none: the first header)";
  int64_t last_member_at_ = 0;  // its header's byte in the tar
  int64_t index_ = 0;
};

class WebDatasetSource : public SourceFormat {
 public:
  WebDatasetSource(std::vector<std::string> paths, std::vector<WebDatasetField> fields,
                   std::map<std::string, int> field_of, Schema schema)
      : paths_(std::make_shared<const std::vector<std::string>>(std::move(paths))),
        fields_(std::move(fields)),
        field_of_(std::move(field_of)),
        schema_(std::move(schema)) {}

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return paths_; }
  std::vector<Split> MakeSplits() const override {
    std::vector<Split> splits(paths_->size());
    for (size_t i = 0; i < splits.size(); ++i) splits[i] = Split{static_cast<int32_t>(i), 0, -1};
    return splits;
  }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog* skip_log) const override {
    return std::unique_ptr<SplitReader>(
        new WebDatasetReader((*paths_)[split.file], split.file, fields_, field_of_, skip_log));
  }
  std::string FileReadFromStart(const Split& split) const override { return (*paths_)[split.file]; }

 private:
  std::shared_ptr<const std::vector<std::string>> paths_;
  std::vector<WebDatasetField> fields_;
  std::map<std::string, int> field_of_;  // extension -> field
  Schema schema_;
};

}  // namespace

std::vector<WebDatasetField> DefaultWebDatasetFields() {
  return {WebDatasetField{"image", {"jpg", "jpeg", "png", "webp"}, false}, WebDatasetField{"label", {"cls"}, true}};
}

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeWebDatasetSource(const std::vector<std::string>& patterns,
                                                                   std::vector<WebDatasetField> fields) {
  if (fields.empty()) fields = DefaultWebDatasetFields();
  std::map<std::string, int> field_of;
  std::vector<ColumnSpec> columns;
  for (size_t f = 0; f < fields.size(); ++f) {
    WebDatasetField& field = fields[f];
    if (field.name.empty() || field.extensions.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("WebDataset field ", f, " needs a name and extensions"));
    }
    for (std::string& ext : field.extensions) {
      ext = absl::AsciiStrToLower(absl::StripPrefix(ext, "."));
      if (!field_of.emplace(ext, static_cast<int>(f)).second) {
        return absl::InvalidArgumentError(absl::StrCat("WebDataset extension '", ext, "' is claimed by field '",
                                                       fields[field_of[ext]].name, "' and field '", field.name, "'"));
      }
    }
    const bool named = std::any_of(field.extensions.begin(), field.extensions.end(),
                                   [](const std::string& e) { return e == kKeyField || e == kUrlField; });
    if (named && (field.extensions.size() > 1 || field.integer || field.length > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("WebDataset field '", field.name, "': ", kKeyField, " and ",
                                                     kUrlField, " are a field's only extension, as bytes"));
    }
    if (field.integer && field.length > 0) {
      return absl::InvalidArgumentError(absl::StrCat("WebDataset field '", field.name, "': an int64 has no length"));
    }
    columns.push_back(field.integer      ? ColumnSpec{field.name, DType::kInt64, Shape{}}
                      : field.length > 0 ? ColumnSpec{field.name, DType::kUInt8, Shape{field.length}}
                                         : ColumnSpec{field.name, DType::kUInt8, Shape{}, /*ragged=*/true});
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandFilePatterns(patterns));
  return std::unique_ptr<SourceFormat>(
      new WebDatasetSource(std::move(paths), std::move(fields), std::move(field_of), Schema(std::move(columns))));
}

}  // namespace sluice::io
