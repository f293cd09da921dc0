// parse_example: tf.train.Example records (the "record" column of a TFRecord
// source) to typed feature columns. Bound by the graph from the features a
// source declares rather than from user attrs.
#ifndef SLUICE_OPS_PARSE_EXAMPLE_H_
#define SLUICE_OPS_PARSE_EXAMPLE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/schema.h"
#include "sluice/io/example_parser.h"
#include "sluice/ops/op_schema.h"

namespace sluice::ops {

// The registered name of the op this makes.
inline constexpr char kParseExampleOp[] = "parse_example";

// Bytes features become uint8 [length], or a ragged column of views into
// the records when of any length; int64 and float32 features take their
// declared shape. Errors name the feature, the file and the record.
absl::StatusOr<InferredOp> InferParseExample(const std::vector<io::FeatureSpec>& features,
                                             const std::vector<Shape>& shapes, const Schema& input);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_PARSE_EXAMPLE_H_
