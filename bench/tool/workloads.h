// The reference workloads of the benchmarks (W1, W2, W5a), built with the C++
// builder; pipelines/*.json hold the same definitions for `sluice run`.
#ifndef SLUICE_BENCH_TOOL_WORKLOADS_H_
#define SLUICE_BENCH_TOOL_WORKLOADS_H_

#include <string>

#include "pipeline.pb.h"
#include "sluice/pipeline_builder.h"

namespace sluice::bench {

// W1: MNIST, normalize, gaussian blur 11x11 with sigma in [0.1, 2], batch 8192.
// `mnist_dir` is the make-data output (holding MNIST/raw/).
PipelineDef W1Pipeline(const std::string& mnist_dir);

// W2: CIFAR-10 TFRecords, parse, dilation 3x3, blur 11x11 sigma 0.8, batch
// 1024, rescale, random flip, rotation (+-36 degrees), zoom (+-10%).
PipelineDef W2Pipeline(const std::string& cifar_dir);

// W5a: CIFAR-10's standard training augmentation on W2's TFRecords: pad 4
// (reflect) + random crop 32, batch 256, then flip, normalize with
// CIFAR-10's channel means and deviations and NCHW float32, fused.
PipelineDef W5aPipeline(const std::string& cifar_dir);

// W2 arranged for the service: everything but the rescale on the workers,
// the augmentation warps on uint8, and the rescale to float32 after the
// distribute node, so a quarter of W2's bytes cross the wire. It differs
// from W2 by the rounding of the warped pixels to uint8 (at most 0.5/255).
PipelineDef W2Uint8OverTheWire(const std::string& cifar_dir, const DistributeOptions& distribute);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_TOOL_WORKLOADS_H_
