// IDX (MNIST) headers of arbitrary bytes, at each rank: an error or
// dimensions whose product is what the file holds, rows of bounded size.
#include <cstdlib>

#include "fuzz_input.h"
#include "sluice/io/idx_file.h"
#include "sluice/io/random_access_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const sluice::fuzz::MemoryFile memory(data, size);
  auto file = sluice::io::RandomAccessFile::Open(memory.path());
  if (!file.ok()) std::abort();
  for (int rank = 1; rank <= 4; ++rank) {
    auto header = sluice::io::ReadIdxHeader(**file, rank);
    if (!header.ok()) continue;
    uint64_t elements = 1, row = 1;
    for (size_t i = 0; i < header->dims.size(); ++i) {
      const int64_t d = header->dims[i];
      if (d < 0 || (i > 0 && d == 0)) std::abort();  // zero rows is an empty file; a zero-sized row is not
      elements *= static_cast<uint64_t>(d);
      if (i > 0) row *= static_cast<uint64_t>(d);
    }
    if (header->data_offset + elements != size) std::abort();
    if (row > sluice::io::kMaxIdxRowBytes) std::abort();
  }
  return 0;
}
