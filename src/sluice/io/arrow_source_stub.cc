// The columnar sources of a build without Arrow's libraries (pyarrow was
// not found when it was configured).
#include "sluice/io/arrow_source.h"

namespace sluice::io {

bool HaveArrow() { return false; }

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeColumnarSource(ColumnarFormat format,
                                                                 const std::vector<std::string>& patterns,
                                                                 const std::vector<std::string>& columns) {
  return absl::UnimplementedError(
      "this build of sluice reads no Parquet or Arrow IPC files: Apache Arrow's C++ libraries (pyarrow's wheel) "
      "were not found when it was configured; install pyarrow into .venv and build again (scripts/build.sh)");
}

absl::StatusOr<std::string> HoldArrowStream(void* arrow_array_stream) {
  return MakeColumnarSource(ColumnarFormat::kMemory, {}, {}).status();
}

void ReleaseArrowStream(const std::string& name) {}

int64_t ColumnarBytes() { return 0; }
int64_t ColumnarPeakBytes() { return 0; }
void TrimColumnar() {}

}  // namespace sluice::io
