#include "sluice/cli/run_resumable.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "sluice/core/status_macros.h"

namespace sluice::cli {
namespace {

absl::StatusOr<std::string> ReadState(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the state file ", path));
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Before the run: a state file that could not be written would be found
// only after it.
absl::Status CheckStateWritable(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat("--save-state ", path, " is a directory; give a file's path"));
  }
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder, error)) {
    return absl::NotFoundError(absl::StrCat("--save-state ", path, ": no folder ", folder.string()));
  }
  return absl::OkStatus();
}

absl::Status WriteState(const std::string& path, const std::string& state) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(state.data(), static_cast<std::streamsize>(state.size()));
    out.close();
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write the state file ", temporary));
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    const std::string why = error.message();
    std::filesystem::remove(temporary, error);
    return absl::PermissionDeniedError(absl::StrCat("cannot rename ", temporary, " to ", path, ": ", why));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunResumable(const exec::Pipeline& pipeline, const std::string& name, const ResumableRun& run) {
  if (!run.save_state.empty()) SLUICE_RETURN_IF_ERROR(CheckStateWritable(run.save_state));
  const absl::Time start = absl::Now();
  std::unique_ptr<exec::PipelineIterator> it;
  if (run.resume.empty()) {
    it = pipeline.Iterate(0);
  } else {
    SLUICE_ASSIGN_OR_RETURN(const std::string state, ReadState(run.resume));
    absl::StatusOr<std::unique_ptr<exec::PipelineIterator>> resumed = pipeline.Resume(state);
    if (!resumed.ok()) return WithContext(resumed.status(), run.resume);
    it = *std::move(resumed);
  }
  int64_t elements = 0, samples = 0;
  double first_ms = 0;
  bool end = false;
  while (run.stop_after <= 0 || elements < run.stop_after) {
    Batch b;
    SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
    if (end) break;
    if (elements == 0) first_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    ++elements;
    samples += b.rows;
  }
  double save_ms = 0;
  size_t state_bytes = 0;
  if (!run.save_state.empty()) {
    const absl::Time save_start = absl::Now();
    SLUICE_ASSIGN_OR_RETURN(const std::string state, it->SaveState());
    SLUICE_RETURN_IF_ERROR(WriteState(run.save_state, state));
    save_ms = absl::ToDoubleMilliseconds(absl::Now() - save_start);
    state_bytes = state.size();
  }
  if (!run.quiet) {
    std::printf("%s: %lld samples in %lld element%s%s; first element after %.1f ms\n", name.c_str(),
                static_cast<long long>(samples), static_cast<long long>(elements), elements == 1 ? "" : "s",
                end ? ", to the epoch's end" : ", stopped", first_ms);
    if (!run.save_state.empty()) {
      std::printf("state (%zu bytes) saved to %s in %.2f ms\n", state_bytes, run.save_state.c_str(), save_ms);
    }
  }
  if (run.json) {
    nlohmann::json j{{"pipeline", name},
                     {"elements", elements},
                     {"samples", samples},
                     {"epoch_ended", end},
                     {"first_element_ms", first_ms},
                     {"resumed_from", run.resume},
                     {"state_file", run.save_state},
                     {"state_bytes", state_bytes}};
    std::printf("%s\n", j.dump().c_str());
  }
  return absl::OkStatus();
}

}  // namespace sluice::cli
