// The TFRecord reader on arbitrary bytes: under "error" it reads whole
// frames until an error or the end; under "skip" it must reach the end,
// resynchronizing past damage, and every record it yields has checked CRCs.
#include <cstdlib>

#include "fuzz_input.h"
#include "sluice/io/corruption_log.h"
#include "sluice/io/tfrecord_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const sluice::fuzz::MemoryFile file(data, size);
  for (const bool skip : {false, true}) {
    sluice::io::CorruptionLog log;
    sluice::io::TfRecordReader::Options options;
    options.skip_log = skip ? &log : nullptr;
    options.buffer_bytes = 64;  // small, so frames straddle refills
    auto reader = sluice::io::TfRecordReader::Open(file.path(), options);
    if (!reader.ok()) std::abort();  // the file exists: opening cannot fail
    uint64_t bytes = 0;
    while (true) {
      auto record = (*reader)->Next();
      if (!record.ok()) {
        if (skip) std::abort();  // skipping never fails on damage
        break;
      }
      if (!record->has_value()) break;
      bytes += (*record)->size() + 16;
    }
    // What was read and what was skipped never exceed the file.
    if (bytes + log.skipped_bytes() > size) std::abort();
  }
  return 0;
}
