// A TFRecord index (FILE.index) of arbitrary bytes beside a good file: read
// it, and where it is accepted, read the file by its offsets under "skip".
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_input.h"
#include "sluice/io/corruption_log.h"
#include "sluice/io/tfrecord_index.h"
#include "sluice/io/tfrecord_reader.h"
#include "sluice/io/tfrecord_writer.h"

namespace {

// A three-record file, written once per process.
const std::string& GoodFile() {
  static const sluice::fuzz::ScratchDir scratch("index");
  static const std::string path = [] {
    std::string p = scratch.path() + "/data.tfrecord";
    auto writer = sluice::io::TfRecordWriter::Create(p);
    if (!writer.ok()) std::abort();
    for (const char* record : {"first", "", "the third record"}) {
      if (!(*writer)->Write(record).ok()) std::abort();
    }
    if (!(*writer)->Close().ok()) std::abort();
    return p;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& file = GoodFile();
  {
    std::ofstream index(sluice::io::TfRecordIndexPath(file), std::ios::binary | std::ios::trunc);
    index.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto offsets = sluice::io::ReadTfRecordIndex(file);
  if (!offsets.ok() || !offsets->has_value()) return 0;
  sluice::io::CorruptionLog log;
  sluice::io::TfRecordReader::Options options;
  options.skip_log = &log;
  options.record_offsets = &**offsets;
  auto reader = sluice::io::TfRecordReader::Open(file, options);
  if (!reader.ok()) std::abort();
  for (size_t i = 0; i < (*offsets)->size(); ++i) {
    (*reader)->Seek((**offsets)[i], static_cast<int64_t>(i));
    if (i + 1 < (*offsets)->size()) (*reader)->SetEnd((**offsets)[i + 1]);
    if (!(*reader)->Next().ok()) std::abort();  // skipping never fails on damage
  }
  return 0;
}
