// Encoded image files as a source: a class-folder tree (the ImageFolder
// convention) or a list of files with labels. Each file is one record and
// one split, so shuffling splits shuffles the samples. Yields "image", the
// file's bytes (ragged uint8, decoded by the image ops), and "label".
#ifndef SLUICE_IO_IMAGE_FILES_H_
#define SLUICE_IO_IMAGE_FILES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

// Image files and their labels, in reading order.
struct LabeledFiles {
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
};

// `root`/<class>/.../<file>: the class folders, sorted by name, are labels
// 0..N-1; files with the extensions jpg, jpeg or png (any case), anywhere
// below a class folder, in sorted order. NotFound when `root` is not a
// directory or holds no image; the message names it.
absl::StatusOr<LabeledFiles> ListImageFolder(const std::string& root);
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeImageFolderSource(const std::string& root);

// The bytes of every image MakeImageFolderSource(root) would yield, in its
// order: for measuring decoding apart from reading. Its errors, or the read
// error naming the file.
absl::StatusOr<std::vector<std::string>> ReadImageFolder(const std::string& root);

// A text file of "<path> <label>" lines (paths relative to the list's
// folder unless absolute; '#' starts a comment). InvalidArgument naming the
// line when one is malformed; NotFound for a missing list.
absl::StatusOr<LabeledFiles> ReadFileList(const std::string& list_path);
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeFileListSource(const std::string& list_path);

// Reads exactly `files` (a listing made earlier: a job's pinned files).
// InvalidArgument when paths and labels differ in number or none is given.
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeImageFilesSource(LabeledFiles files);

}  // namespace sluice::io

#endif  // SLUICE_IO_IMAGE_FILES_H_
