// A cheap check of an encoded image's framing: the signature at its head
// and the end marker near its tail (or, for a whole image, within it; for
// WebP, the size its header declares). It
// catches truncated and foreign images before any decoding (decoders fill a truncated JPEG's missing rows
// with grey and carry on, silently). Netpbm images pass: their header's
// size is checked against the whole image when it is read.
#ifndef SLUICE_IO_IMAGE_FRAMING_H_
#define SLUICE_IO_IMAGE_FRAMING_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice::io {

// How many bytes of the head and of the tail the check reads.
inline constexpr size_t kFramingHead = 12;
inline constexpr size_t kFramingTail = 64;

// What is wrong, or "" if nothing is: `head` is the first kFramingHead
// bytes (fewer for a shorter image), `tail` the last kFramingTail (or
// all), `size` the image's (a WebP header declares its own).
std::string ImageFramingProblem(absl::string_view head, absl::string_view tail, uint64_t size);
// The same for a whole image in memory, which may also hold data after
// its end marker (found by walking its segments when the tail lacks it).
std::string ImageFramingProblem(absl::string_view image);

}  // namespace sluice::io

#endif  // SLUICE_IO_IMAGE_FRAMING_H_
