// Python's round(), as torchvision rounds its sizes and places.
#ifndef SLUICE_OPS_PYTHON_ROUND_H_
#define SLUICE_OPS_PYTHON_ROUND_H_

#include <cmath>

namespace sluice::ops {

// A half goes to the even neighbour (22.5 to 22, 9.5 to 10), where
// std::round and lround took 22.5 to 23, a pixel off torchvision's crop.
// nearbyint rounds so in the default rounding mode, which nothing here changes.
inline double PythonRound(double x) { return std::nearbyint(x); }

}  // namespace sluice::ops

#endif  // SLUICE_OPS_PYTHON_ROUND_H_
