// WebDataset tar shards as a source: a sample is the run of consecutive
// members that share a key (a member's path up to the first dot of its
// file name; what follows is its extension), and each declared field takes
// the member with one of its extensions. Each shard is one split, so
// shuffling splits shuffles shards and the service hands out shards. The
// tar framing is read and checked by libarchive.
#ifndef SLUICE_IO_WEBDATASET_SOURCE_H_
#define SLUICE_IO_WEBDATASET_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

// One column of the samples: the member with one of `extensions` (lower
// case, no dot, e.g. "jpg"). Bytes as they are (a ragged uint8 column, or
// with `length` > 0 a dense uint8 [length] one, every member that long),
// or, with `integer`, the member's text as one int64 (WebDataset's .cls).
struct WebDatasetField {
  std::string name;
  std::vector<std::string> extensions;
  bool integer = false;
  int64_t length = 0;
};

// The fields when none are declared: "image" (jpg, jpeg, png, webp) and
// "label" (cls, as an integer).
std::vector<WebDatasetField> DefaultWebDatasetFields();

// `patterns`: shard paths or glob patterns. InvalidArgument for a field
// without a name or extension, or an extension claimed twice; NotFound for
// a pattern matching nothing. A sample that lacks a field, a member that
// is no integer where one is declared, the same field twice in a sample
// and a truncated or damaged shard are read errors naming the shard and
// the member or key (or, under on_corrupt "skip", counted skips).
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeWebDatasetSource(const std::vector<std::string>& patterns,
                                                                   std::vector<WebDatasetField> fields);

}  // namespace sluice::io

#endif  // SLUICE_IO_WEBDATASET_SOURCE_H_
