// How far apart two names are, to suggest the one a user likely meant.
#ifndef SLUICE_CORE_EDIT_DISTANCE_H_
#define SLUICE_CORE_EDIT_DISTANCE_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace sluice {

// Levenshtein distance: the fewest one-character inserts, deletions and
// substitutions from a to b.
size_t EditDistance(absl::string_view a, absl::string_view b);

}  // namespace sluice

#endif  // SLUICE_CORE_EDIT_DISTANCE_H_
