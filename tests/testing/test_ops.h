// Ops that exist only for tests, registered into a test's own registry.
#ifndef SLUICE_TESTS_TESTING_TEST_OPS_H_
#define SLUICE_TESTS_TESTING_TEST_OPS_H_

#include "absl/status/status.h"
#include "sluice/ops/op_registry.h"

namespace sluice::testing {

// batch_sum: a batch-level op writing, to every row of column "sum", the
// sum of int64 column "label" over the whole batch, so a kernel that saw
// only part of a batch gives other values.
absl::Status RegisterTestOps(ops::OpRegistry* registry);

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_TESTING_TEST_OPS_H_
