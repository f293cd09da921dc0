#include "sluice/io/image_files.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/image_framing.h"
#include "sluice/io/object_store.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {
namespace {

namespace fs = std::filesystem;

bool IsImage(const fs::path& p) {
  const std::string ext = absl::AsciiStrToLower(p.extension().string());
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".webp";
}

// One image file's bytes and its label. A file a shard after the source
// will not keep is not read: its row is hollow (KeptRows), which spares the
// other ranks' reads (and GETs, on an object store).
class ImageFileReader : public SplitReader {
 public:
  ImageFileReader(const std::string& path, int64_t label, int32_t file, CorruptionLog* skip_log)
      : path_(path), label_(label), file_(file), skip_log_(skip_log) {}

  void KeepOnly(const KeptRows& kept) override { hollow_ = !kept.Keeps(kept.first); }

  absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) override {
    if (done_ || max_rows <= 0) return 0;
    done_ = true;
    const int64_t row = out->rows();
    if (hollow_) {
      out->AppendUninitialized(0, 0);
    } else {
      SLUICE_ASSIGN_OR_RETURN(const bool framed, ReadFile(out));
      if (!framed) return 0;
    }
    reinterpret_cast<int64_t*>(out->dense(1))[row] = label_;
    out->provenance().AddRun(row, file_, 0);
    out->AddRows(1);
    return 1;
  }

 private:
  // Appends the file's bytes; false when its framing is broken and the
  // skip log took it.
  absl::StatusOr<bool> ReadFile(BatchBuilder* out) const {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, RandomAccessFile::Open(path_));
    const int64_t size = static_cast<int64_t>(f->size());
    char head[kFramingHead], tail[kFramingTail];
    const size_t head_size = static_cast<size_t>(std::min<int64_t>(size, kFramingHead));
    const size_t tail_size = static_cast<size_t>(std::min<int64_t>(size, kFramingTail));
    SLUICE_RETURN_IF_ERROR(f->ReadExact(0, head_size, head));
    SLUICE_RETURN_IF_ERROR(f->ReadExact(static_cast<uint64_t>(size) - tail_size, tail_size, tail));
    std::string problem = ImageFramingProblem(absl::string_view(head, head_size), absl::string_view(tail, tail_size),
                                              static_cast<uint64_t>(size));
    if (!problem.empty()) return ReadWholeToCheck(*f, size, problem, out);
    SLUICE_RETURN_IF_ERROR(f->ReadExact(0, static_cast<size_t>(size), out->AppendUninitialized(0, size)));
    return true;
  }

  // An image the quick look at its ends refused: read whole, it may have
  // data after its end marker.
  absl::StatusOr<bool> ReadWholeToCheck(RandomAccessFile& f, int64_t size, std::string problem,
                                        BatchBuilder* out) const {
    std::string image(static_cast<size_t>(size), '\0');
    SLUICE_RETURN_IF_ERROR(f.ReadExact(0, image.size(), image.data()));
    problem = ImageFramingProblem(image);
    if (!problem.empty()) {
      const std::string message = absl::StrCat(problem, " in ", path_);
      if (skip_log_ == nullptr) return absl::DataLossError(message);
      skip_log_->Add(path_, 1, static_cast<uint64_t>(size), message);
      return false;
    }
    std::memcpy(out->AppendUninitialized(0, size), image.data(), image.size());
    return true;
  }

  const std::string& path_;
  const int64_t label_;
  const int32_t file_;
  CorruptionLog* skip_log_;
  bool done_ = false;
  bool hollow_ = false;
};

class ImageFilesSource : public SourceFormat {
 public:
  ImageFilesSource(std::vector<std::string> paths, std::vector<int64_t> labels)
      : paths_(std::make_shared<const std::vector<std::string>>(std::move(paths))),
        labels_(std::move(labels)),
        schema_({ColumnSpec{"image", DType::kUInt8, Shape{}, /*ragged=*/true},
                 ColumnSpec{"label", DType::kInt64, Shape{}}}) {}

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return paths_; }
  std::vector<Split> MakeSplits() const override {
    std::vector<Split> splits(paths_->size());
    for (size_t i = 0; i < splits.size(); ++i) splits[i] = Split{static_cast<int32_t>(i), 0, 1};
    return splits;
  }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog* skip_log) const override {
    return std::unique_ptr<SplitReader>(
        new ImageFileReader((*paths_)[split.file], labels_[split.file], split.file, skip_log));
  }
  // The labels: an empty class folder added shifts them with every name
  // kept, and a list's label edited keeps its names.
  std::string ListingExtra() const override {
    return std::string(reinterpret_cast<const char*>(labels_.data()), labels_.size() * sizeof(int64_t));
  }

 private:
  std::shared_ptr<const std::vector<std::string>> paths_;
  std::vector<int64_t> labels_;
  Schema schema_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeImageFilesSource(LabeledFiles files) {
  if (files.paths.size() != files.labels.size() || files.paths.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("image files: ", files.paths.size(), " paths and ",
                                                   files.labels.size(), " labels (need the same number, > 0)"));
  }
  return std::unique_ptr<SourceFormat>(new ImageFilesSource(std::move(files.paths), std::move(files.labels)));
}

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeImageFolderSource(const std::string& root) {
  SLUICE_ASSIGN_OR_RETURN(LabeledFiles files, ListImageFolder(root));
  return MakeImageFilesSource(std::move(files));
}

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeFileListSource(const std::string& list_path) {
  SLUICE_ASSIGN_OR_RETURN(LabeledFiles files, ReadFileList(list_path));
  return MakeImageFilesSource(std::move(files));
}

namespace {

// torchvision's ImageFolder order: a class's folders by their paths, each
// one's files by name (a folder's own files before its subfolders'), not
// the whole paths ("cls/sub-2/y" sorted before "cls/sub/x", "cls/a/1"
// before "cls/b"). Paths and URLs alike.
void SortAsImageFolder(std::vector<std::string>* paths) {
  auto split = [](const std::string& p) {
    const size_t slash = p.rfind('/');
    return std::pair<absl::string_view, absl::string_view>(
        absl::string_view(p).substr(0, slash == std::string::npos ? 0 : slash),
        absl::string_view(p).substr(slash == std::string::npos ? 0 : slash + 1));
  };
  std::sort(paths->begin(), paths->end(),
            [&](const std::string& a, const std::string& b) { return split(a) < split(b); });
}

// An image folder in an object store: the images under `root`, the first
// part of each one's key below it naming its class. A class folder without
// images still takes its label, as on disk, when an object is in it (a
// folder marker "class/" or another file): a store has no empty folders.
absl::StatusOr<LabeledFiles> ListObjectImageFolder(const std::string& root) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> objects, ListObjectsUnder(root));
  auto without_query = [](const std::string& url) { return url.substr(0, url.find('?')); };
  const std::string base = absl::StrCat(absl::StripSuffix(without_query(root), "/"), "/");
  std::map<std::string, std::vector<std::string>> by_class;
  for (std::string& url : objects) {
    const std::string key = without_query(url);
    const size_t slash = key.find('/', base.size());
    if (slash == std::string::npos) continue;
    std::vector<std::string>& in_class = by_class[key.substr(base.size(), slash - base.size())];
    if (IsImage(fs::path(key))) in_class.push_back(std::move(url));
  }
  LabeledFiles files;
  int64_t label = 0;
  for (auto& [name, urls] : by_class) {
    SortAsImageFolder(&urls);
    for (std::string& url : urls) {
      files.paths.push_back(std::move(url));
      files.labels.push_back(label);
    }
    ++label;
  }
  if (files.paths.empty()) {
    return absl::NotFoundError(
        absl::StrCat("image folder ", root, " holds no .jpg, .jpeg, .png or .webp objects in class folders"));
  }
  return files;
}

// Whether folder `a` is `b` or a folder above it.
bool Contains(const fs::path& a, const fs::path& b) {
  auto ends = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return ends.first == a.end();
}

// Whether `target` (a link's, canonical) is a folder `link` is listed
// under, or one above it: the walk would come back to it without end. The
// folders `link` lies in by its path, not by its parent's canonical form:
// two links each to the other's folder (a/lb -> b, b/la -> a) listed every
// image 40 times, to the kernel's depth of links.
bool LoopsBack(const fs::path& dir, const fs::path& link, const fs::path& target) {
  std::error_code ec;
  for (fs::path p = link.parent_path(); !p.empty(); p = p.parent_path()) {
    const fs::path c = fs::canonical(p, ec);
    if (!ec && Contains(target, c)) return true;
    if (p == dir || p == p.parent_path()) break;
  }
  return false;
}

// The image files under a class's folder `dir`, through links to folders.
// Nothing is passed over in silence: a link to an image that cannot be
// followed, and a link to a folder it lies in or above (a loop), are errors.
absl::Status ListClassFolder(const fs::path& dir, std::vector<std::string>* files) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    std::error_code type;
    if (it->is_symlink(type) && it->is_directory(type)) {
      const fs::path target = fs::canonical(path, type);
      if (!type && LoopsBack(dir, path, target)) {
        return absl::InvalidArgumentError(absl::StrCat("image folder: ", path.string(), " links to ", target.string(),
                                                       ", a folder above it: a loop"));
      }
    } else if (IsImage(path)) {
      const bool regular = it->is_regular_file(type);
      if (type) return absl::NotFoundError(absl::StrCat("cannot read image ", path.string(), ": ", type.message()));
      if (regular) files->push_back(path.string());
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", dir.string(), ": ", ec.message()));
  return absl::OkStatus();
}

// Where a file list line's comment starts: a '#' that begins the line or
// follows a space (one inside a name, "a#1.jpg", is the name's).
size_t CommentStart(const std::string& line) {
  for (size_t i = line.find('#'); i != std::string::npos; i = line.find('#', i + 1)) {
    if (i == 0 || absl::ascii_isspace(static_cast<unsigned char>(line[i - 1]))) return i;
  }
  return std::string::npos;
}

// An object URL with its "." and ".." segments resolved, as a relative
// path in a list is on disk: a store takes them for letters of the key.
std::string WithoutDotSegments(const std::string& url) {
  const size_t key = url.find('/', url.find("://") + 3);
  if (key == std::string::npos) return url;
  std::vector<std::string> kept;
  for (absl::string_view part : absl::StrSplit(url.substr(key + 1), '/')) {
    if (part == ".") continue;
    if (part == "..") {
      if (!kept.empty()) kept.pop_back();
      continue;
    }
    kept.emplace_back(part);
  }
  return absl::StrCat(url.substr(0, key + 1), absl::StrJoin(kept, "/"));
}

}  // namespace

absl::StatusOr<LabeledFiles> ListImageFolder(const std::string& root) {
  if (IsObjectUrl(root)) return ListObjectImageFolder(root);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return absl::NotFoundError(absl::StrCat("image folder ", root, " is not a directory", RelativePathHint(root)));
  std::vector<std::string> classes;
  fs::directory_iterator it(root, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type;  // a broken link or a loop here is no class
    if (it->is_directory(type)) classes.push_back(it->path().filename().string());
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", root, ": ", ec.message()));
  std::sort(classes.begin(), classes.end());
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
  for (size_t label = 0; label < classes.size(); ++label) {
    std::vector<std::string> files;
    SLUICE_RETURN_IF_ERROR(ListClassFolder(fs::path(root) / classes[label], &files));
    SortAsImageFolder(&files);
    for (std::string& f : files) {
      paths.push_back(std::move(f));
      labels.push_back(static_cast<int64_t>(label));
    }
  }
  if (paths.empty()) {
    return absl::NotFoundError(
        absl::StrCat("image folder ", root, " holds no .jpg, .jpeg, .png or .webp files in class folders"));
  }
  return LabeledFiles{std::move(paths), std::move(labels)};
}

absl::StatusOr<std::vector<std::string>> ReadImageFolder(const std::string& root) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<SourceFormat> source, MakeImageFolderSource(root));
  std::vector<std::string> images;
  images.reserve(source->files()->size());
  for (const std::string& path : *source->files()) {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> f, RandomAccessFile::Open(path));
    std::string& bytes = images.emplace_back(f->size(), '\0');
    SLUICE_RETURN_IF_ERROR(f->ReadExact(0, bytes.size(), bytes.data()));
  }
  return images;
}

absl::StatusOr<LabeledFiles> ReadFileList(const std::string& list_path) {
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> list = RandomAccessFile::Open(list_path);
  if (!list.ok()) return WithContext(list.status(), "cannot open file list");
  std::string text_of_list((*list)->size(), '\0');
  SLUICE_RETURN_IF_ERROR((*list)->ReadExact(0, text_of_list.size(), text_of_list.data()));
  std::istringstream in(std::string(absl::StripPrefix(text_of_list, "\xEF\xBB\xBF")));  // a BOM is no path's
  // Relative paths are relative to the list's folder (or prefix).
  const size_t query = std::min(list_path.find('?'), list_path.size());
  const std::string list_url = list_path.substr(0, query);
  const std::string base =
      IsObjectUrl(list_path) ? list_url.substr(0, list_url.rfind('/')) : fs::path(list_path).parent_path().string();
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text(absl::StripAsciiWhitespace(line.substr(0, CommentStart(line))));
    if (text.empty()) continue;
    const size_t space = text.find_last_of(" \t");
    int64_t label = 0;
    if (space == std::string::npos || !absl::SimpleAtoi(text.substr(space + 1), &label) || label < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          list_path, " line ", number, ": expected \"<path> <label>\" with a label >= 0, got \"", text, "\""));
    }
    const std::string p(absl::StripAsciiWhitespace(text.substr(0, space)));
    if (IsObjectUrl(p) || fs::path(p).is_absolute()) {
      paths.push_back(p);
    } else {
      paths.push_back(IsObjectUrl(list_path)
                          ? absl::StrCat(WithoutDotSegments(absl::StrCat(base, "/", p)), list_path.substr(query))
                          : (fs::path(base) / p).string());
    }
    labels.push_back(label);
  }
  if (paths.empty()) return absl::NotFoundError(absl::StrCat("file list ", list_path, " names no files"));
  return LabeledFiles{std::move(paths), std::move(labels)};
}

}  // namespace sluice::io
