// Numbers a user sets in the environment (SLUICE_OBJECT_READ_AHEAD=16).
#ifndef SLUICE_CORE_ENVIRONMENT_NUMBER_H_
#define SLUICE_CORE_ENVIRONMENT_NUMBER_H_

#include <cstdint>

namespace sluice {

// The value of the environment variable `name`: `fallback` when it is
// unset, and also when it is not a number of at least `least`, which a
// line on stderr then says (once per name), so that a typo in a job's
// environment does not pass unseen.
int64_t IntFromEnvironment(const char* name, int64_t fallback, int64_t least);
double DoubleFromEnvironment(const char* name, double fallback, double least);

}  // namespace sluice

#endif  // SLUICE_CORE_ENVIRONMENT_NUMBER_H_
