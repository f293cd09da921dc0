// tf.train.Example parsing of arbitrary bytes against features of each
// kind: an error or values written within their outputs, never beyond.
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz_input.h"
#include "sluice/io/example_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using sluice::io::FeatureKind;
  static const sluice::io::ExampleParser parser({{"image", FeatureKind::kBytes, sluice::io::kAnyLength},
                                                 {"fixed", FeatureKind::kBytes, 4},
                                                 {"label", FeatureKind::kInt64, 1},
                                                 {"box", FeatureKind::kFloat, 4}});
  absl::string_view image;
  uint8_t fixed[4];
  int64_t label;
  float box[4];
  uint8_t* const out[] = {reinterpret_cast<uint8_t*>(&image), fixed, reinterpret_cast<uint8_t*>(&label),
                          reinterpret_cast<uint8_t*>(box)};
  const absl::string_view record(reinterpret_cast<const char*>(data), size);
  if (parser.Parse(record, out).ok()) {
    // A bytes value is a view into the record.
    if (image.data() < record.data() || image.data() + image.size() > record.data() + record.size()) {
      __builtin_trap();
    }
  }
  return 0;
}
