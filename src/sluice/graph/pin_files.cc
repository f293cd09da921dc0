#include "sluice/graph/pin_files.h"

#include <string>
#include <vector>

#include "sluice/core/status_macros.h"
#include "sluice/io/file_split.h"
#include "sluice/io/image_files.h"
#include "sluice/io/object_listing.h"
#include "sluice/io/object_store.h"

namespace sluice::graph {
namespace {

absl::Status PinPatterns(const google::protobuf::RepeatedPtrField<std::string>& patterns, PinnedFiles* out) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> files,
                          io::ExpandFilePatterns(std::vector<std::string>(patterns.begin(), patterns.end())));
  for (std::string& f : files) out->add_files(std::move(f));
  return absl::OkStatus();
}

absl::Status PinLabeled(absl::StatusOr<io::LabeledFiles> listed, PinnedFiles* out) {
  if (!listed.ok()) return listed.status();
  for (std::string& f : listed->paths) out->add_files(std::move(f));
  for (int64_t label : listed->labels) out->add_labels(label);
  return absl::OkStatus();
}

// The listing's versions of the objects among the files, for workers to
// check what they open against (io/object_listing.h).
void PinListedVersions(PinnedFiles* out) {
  bool any = false;
  for (const std::string& f : out->files()) any |= io::IsObjectUrl(f);
  if (!any) return;
  for (const std::string& f : out->files()) {
    const io::ObjectVersion v = io::ListedVersion(f).value_or(io::ObjectVersion{});
    out->add_listed_sizes(v.size);
    out->add_listed_modified_s(v.modified_s);
  }
}

}  // namespace

absl::Status PinFiles(PipelineDef* def) {
  if (def->nodes_size() == 0 || !def->nodes(0).has_source()) return absl::OkStatus();
  SourceDef* source = def->mutable_nodes(0)->mutable_source();
  if (source->has_pinned()) return absl::OkStatus();
  PinnedFiles pinned;
  switch (source->format_case()) {
    case SourceDef::kTfrecord:
      SLUICE_RETURN_IF_ERROR(PinPatterns(source->tfrecord().files(), &pinned));
      break;
    case SourceDef::kCifar10:
      SLUICE_RETURN_IF_ERROR(PinPatterns(source->cifar10().files(), &pinned));
      break;
    case SourceDef::kWebdataset:
      SLUICE_RETURN_IF_ERROR(PinPatterns(source->webdataset().files(), &pinned));
      break;
    case SourceDef::kParquet:
      SLUICE_RETURN_IF_ERROR(PinPatterns(source->parquet().files(), &pinned));
      break;
    case SourceDef::kArrowIpc:
      SLUICE_RETURN_IF_ERROR(PinPatterns(source->arrow_ipc().files(), &pinned));
      break;
    case SourceDef::kImageFolder:
      SLUICE_RETURN_IF_ERROR(PinLabeled(io::ListImageFolder(source->image_folder().root()), &pinned));
      break;
    case SourceDef::kFileList:
      SLUICE_RETURN_IF_ERROR(PinLabeled(io::ReadFileList(source->file_list().path()), &pinned));
      break;
    default:
      return absl::OkStatus();
  }
  PinListedVersions(&pinned);
  *source->mutable_pinned() = std::move(pinned);
  return absl::OkStatus();
}

void RecallPinnedVersions(const SourceDef& source) {
  const PinnedFiles& p = source.pinned();
  if (p.listed_sizes_size() != p.files_size() || p.listed_modified_s_size() != p.files_size()) return;
  for (int i = 0; i < p.files_size(); ++i) {
    if (!io::IsObjectUrl(p.files(i))) continue;
    io::RememberListed(p.files(i), io::ObjectVersion{p.listed_sizes(i), p.listed_modified_s(i)});
  }
}

}  // namespace sluice::graph
