// A C++ training loop fed by sluice: softmax regression on MNIST-format
// data, trained with plain SGD. It shows the public C++ API at work:
//   - a pipeline built in C++ (sluice::PipelineBuilder) and run in-process,
//     or with its costly front (the blur) on local service workers
//     (--workers N: a distribute node, worker processes on 127.0.0.1);
//   - an op of the trainer's own registered in-process (`trainer_clip`),
//     used in the part of the pipeline that runs in this process;
//   - batches as named tensors, read without a copy;
//   - Prometheus metrics of the pipeline, its rate, wait, memory and
//     placement (--metrics-port P: http://127.0.0.1:P/metrics, 0: any).
// It prints the loss, accuracy and samples/s per epoch, and fails (exit 1)
// on any error or on a batch of the wrong shape or size.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/sluice.h"

namespace {

// trainer_clip: clamps float32 values to [lo, hi], per sample. Declared
// once (schema, attrs with their allowed values, inference) and given a
// cpu kernel; the registry checks and documents it like a built-in.
struct ClipParams {
  int64_t elems;
  float lo, hi;
};

class ClipKernel : public sluice::ops::Kernel {
 public:
  using Params = ClipParams;
  explicit ClipKernel(const Params& p) : p_(p) {}
  absl::Status Run(const sluice::ops::KernelContext& ctx, absl::Span<const sluice::ops::ColumnRef> in,
                   absl::Span<const sluice::ops::ColumnRef> out) const override {
    const float* src = reinterpret_cast<const float*>(in[0].data);
    float* dst = reinterpret_cast<float*>(out[0].data);
    for (int64_t i = 0; i < ctx.rows * p_.elems; ++i) dst[i] = std::min(std::max(src[i], p_.lo), p_.hi);
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<sluice::ops::InferredOp> InferClip(const sluice::ops::Attrs& attrs, const sluice::Schema& input) {
  SLUICE_ASSIGN_OR_RETURN(sluice::ops::BoundField f, sluice::ops::BindField(attrs, input, {sluice::DType::kFloat32}));
  const float lo = static_cast<float>(attrs.GetFloat("lo")), hi = static_cast<float>(attrs.GetFloat("hi"));
  if (hi < lo) return sluice::ops::AttrError("hi", "must be >= lo");
  return sluice::ops::UnaryOp(f.column, f.spec, ClipParams{f.spec.shape.num_elements(), lo, hi});
}

absl::Status RegisterClip() {
  using sluice::ops::AttrSchema;
  using sluice::ops::AttrType;
  SLUICE_RETURN_IF_ERROR(sluice::ops::OpRegistry::Global().AddOp(
      sluice::ops::OpSchema("trainer_clip")
          .Doc("Clamps float32 values to [lo, hi] (the C++ trainer example's own op).")
          .Attr(sluice::ops::FieldAttr())
          .Attr(AttrSchema{"lo", AttrType::kFloat, "-3", "lower bound"})
          .Attr(AttrSchema{"hi", AttrType::kFloat, "3", "upper bound"})
          .Input("field", "float32")
          .Output("field", "float32, same shape")
          .Infer(InferClip),
      "the C++ trainer example"));
  return sluice::ops::OpRegistry::Global().AddKernel<ClipKernel>("trainer_clip", sluice::ops::Backend::kCpu,
                                                                 "the C++ trainer example");
}

// 784 inputs, 10 classes: logits = W x + b.
struct SoftmaxRegression {
  std::vector<float> w = std::vector<float>(10 * 784, 0.f), b = std::vector<float>(10, 0.f);

  // One SGD step on a batch; returns (summed loss, correct predictions).
  std::pair<double, int64_t> Step(const float* x, const int64_t* y, int64_t rows, float lr) {
    std::vector<float> gw(w.size(), 0.f), gb(b.size(), 0.f);
    double loss = 0;
    int64_t correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xi = x + r * 784;
      float logits[10], mx = -1e30f;
      for (int k = 0; k < 10; ++k) {
        float s = b[k];
        for (int j = 0; j < 784; ++j) s += w[k * 784 + j] * xi[j];
        logits[k] = s;
        mx = std::max(mx, s);
      }
      float sum = 0;
      for (float& l : logits) sum += (l = std::exp(l - mx));
      const int64_t label = y[r];
      loss -= std::log(logits[label] / sum + 1e-12);
      correct += std::max_element(logits, logits + 10) - logits == label;
      for (int k = 0; k < 10; ++k) {
        const float g = logits[k] / sum - (k == label ? 1.f : 0.f);
        gb[k] += g;
        for (int j = 0; j < 784; ++j) gw[k * 784 + j] += g * xi[j];
      }
    }
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * gw[i] / rows;
    for (size_t k = 0; k < b.size(); ++k) b[k] -= lr * gb[k] / rows;
    return {loss, correct};
  }
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "cpp_trainer: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mnist;
  int epochs = 2, workers = 0, metrics_port = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mnist") == 0) mnist = argv[i + 1];
    if (std::strcmp(argv[i], "--epochs") == 0) epochs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--workers") == 0) workers = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--metrics-port") == 0) metrics_port = std::atoi(argv[i + 1]);
  }
  if (mnist.empty() || epochs <= 0 || workers < 0) {
    std::fprintf(stderr,
                 "usage: cpp_trainer --mnist DIR [--epochs N] [--workers N] [--metrics-port P]\n"
                 "  DIR: `sluice make-data mnist --out DIR`'s output; --workers N: the blur on N local workers\n"
                 "  --metrics-port P: serve the pipeline's Prometheus metrics on 127.0.0.1:P (0: any free port)\n");
    return 2;
  }
  if (absl::Status s = RegisterClip(); !s.ok()) return Fail(s);
  if (metrics_port >= 0) {
    absl::StatusOr<int> port = sluice::ServeMetrics("127.0.0.1", metrics_port);
    if (!port.ok()) return Fail(port.status());
    std::printf("metrics on http://127.0.0.1:%d/metrics\n", *port);
  }

  const std::string raw = mnist + "/MNIST/raw/";
  sluice::PipelineBuilder builder =
      sluice::PipelineBuilder::Mnist(raw + "train-images-idx3-ubyte", raw + "train-labels-idx1-ubyte")
          .Shuffle(4096)
          .Map({sluice::Op("normalize", {{"mean", 0.1307}, {"std", 0.3081}, {"scale", 1 / 255.0}}),
                sluice::Op("gaussian_blur", {{"ksize", 5}, {"sigma", {0.1, 1.0}}})})
          .Seed(2026);
  if (workers > 0) {
    sluice::DistributeOptions remote;
    remote.local_workers = workers;
    builder.Distribute(remote);  // the nodes above run on the workers
  }
  builder.Map({sluice::Op("trainer_clip", {{"lo", -1.0}, {"hi", 4.0}})}).Batch(256).Prefetch();
  absl::StatusOr<sluice::Pipeline> pipeline = sluice::Pipeline::FromBuilder(builder);
  if (!pipeline.ok()) return Fail(pipeline.status());
  std::printf("pipeline yields %s in %lld batches per epoch%s\n", pipeline->output_schema().ToString().c_str(),
              static_cast<long long>(pipeline->Cardinality()),
              workers > 0 ? " (normalize and blur on local workers)" : "");

  SoftmaxRegression model;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    sluice::Iterator it = pipeline->Iterate(epoch);
    const auto start = std::chrono::steady_clock::now();
    double loss = 0, waited_s = 0;
    int64_t seen = 0, correct = 0, batches = 0;
    while (true) {
      sluice::Batch batch;
      bool end = false;
      const auto ask = std::chrono::steady_clock::now();
      if (absl::Status s = it.Next(&batch, &end); !s.ok()) return Fail(s);
      waited_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - ask).count();
      if (end) break;
      const sluice::Tensor& image = batch.columns[0].values;
      const sluice::Tensor& label = batch.columns[1].values;
      if (image.dtype() != sluice::DType::kFloat32 || image.num_elements() != batch.rows * 784 ||
          label.num_elements() != batch.rows) {
        return Fail(absl::InternalError("unexpected batch: " + image.DebugString() + ", " + label.DebugString()));
      }
      const auto [l, c] = model.Step(image.data<float>(), label.data<int64_t>(), batch.rows, 0.05f);
      loss += l;
      correct += c;
      seen += batch.rows;
      ++batches;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pipeline->Cardinality() >= 0 && batches != pipeline->Cardinality()) {
      return Fail(absl::InternalError("epoch " + std::to_string(epoch) + " had " + std::to_string(batches) +
                                      " batches, not " + std::to_string(pipeline->Cardinality())));
    }
    std::printf("epoch %d: %lld samples, loss %.4f, accuracy %.3f, %.0f samples/s, waited for data %.1f%%\n", epoch,
                static_cast<long long>(seen), loss / seen, static_cast<double>(correct) / seen, seen / seconds,
                100 * waited_s / seconds);
  }
  return 0;
}
