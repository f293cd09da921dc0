// When a map's runner should pull the next input chunk before running rows
// it could claim. Pulls are serial (one runner at a time keeps the input
// order): a pull made while the other runners still have rows to run costs
// them no wait, a later one leaves them idle through it (W5a's reading is a
// third of its work), and an earlier one only holds more chunks. Learned
// from the node's own timings, so it never changes what the node outputs.
#ifndef SLUICE_EXEC_READ_PACING_H_
#define SLUICE_EXEC_READ_PACING_H_

#include <cstdint>

namespace sluice::exec {

class ReadPacing {
 public:
  // A pull of `rows` took `ns`.
  void Pulled(int64_t rows, int64_t ns) { Average(&pull_ns_per_row_, rows, ns); }
  // A runner ran `rows` in `ns`.
  void Ran(int64_t rows, int64_t ns) { Average(&run_ns_per_row_, rows, ns); }

  // Whether `others` runners would run out of the `unclaimed` rows before
  // a pull of `chunk_rows` that took twice the usual ends (a pull waits on
  // its source, and its runner may be preempted). False until both pulls
  // and runs have been timed.
  bool PullNow(int64_t unclaimed, int others, int64_t chunk_rows) const {
    if (pull_ns_per_row_ <= 0 || run_ns_per_row_ <= 0) return false;
    return static_cast<double>(unclaimed) * run_ns_per_row_ <=
           kMargin * static_cast<double>(others) * static_cast<double>(chunk_rows) * pull_ns_per_row_;
  }

 private:
  static void Average(double* per_row, int64_t rows, int64_t ns) {
    if (rows <= 0) return;
    const double sample = static_cast<double>(ns) / static_cast<double>(rows);
    *per_row = *per_row <= 0 ? sample : *per_row + (sample - *per_row) / 8;
  }

  // W5a on two cores kept 184% of them busy with a margin of 1, 189% with 2.
  static constexpr double kMargin = 2;

  double pull_ns_per_row_ = 0;
  double run_ns_per_row_ = 0;
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_READ_PACING_H_
