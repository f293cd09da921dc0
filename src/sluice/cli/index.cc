// sluice index FILE...: write FILE.index beside each TFRecord file so that
// sources can split it into record ranges.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "sluice/cli/command.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/file_split.h"
#include "sluice/io/object_store.h"
#include "sluice/io/tfrecord_index.h"

namespace sluice::cli {
namespace {

absl::Status Index(const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    if (io::IsObjectUrl(pattern)) {
      return absl::InvalidArgumentError(
          absl::StrCat(pattern,
                       ": an index is written beside a local file; index a local copy and upload its .index beside "
                       "the object (docs/formats.md, TFRecord indexes)"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> files, io::ExpandFilePatterns(patterns));
  for (const std::string& file : files) {
    SLUICE_ASSIGN_OR_RETURN(int64_t records, io::WriteTfRecordIndex(file));
    std::printf("%s: %lld records -> %s\n", file.c_str(), static_cast<long long>(records),
                io::TfRecordIndexPath(file).c_str());
  }
  return absl::OkStatus();
}

}  // namespace

void AddIndexCommand(CLI::App& app, absl::Status* result) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd =
      app.add_subcommand("index", "Index TFRecord files (FILE.index) so sources can split them into record ranges");
  cmd->add_option("files", *files, "TFRecord files or glob patterns")->required();
  cmd->callback([files, result] { *result = Index(*files); });
}

}  // namespace sluice::cli
