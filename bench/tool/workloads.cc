#include "workloads.h"

#include "sluice/datagen/synthetic_data.h"
#include "sluice/pipeline_builder.h"

namespace sluice::bench {

PipelineDef W1Pipeline(const std::string& mnist_dir) {
  const datagen::MnistPaths paths = datagen::MnistLayout(mnist_dir);
  PipelineDef def = PipelineBuilder::Mnist(paths.train_images, paths.train_labels)
                        .Map({Op("normalize", {{"mean", 0.1307}, {"std", 0.3081}, {"scale", 1 / 255.0}}),
                              Op("gaussian_blur", {{"ksize", 11}, {"sigma", {0.1, 2.0}}}),
                              Op("reshape", {{"shape", {1, 28, 28}}})})  // NCHW, as torch models take it (a view)
                        .Batch(8192, /*drop_remainder=*/true)
                        .Prefetch()
                        .Build();
  def.set_name("w1_mnist");
  return def;
}

namespace {

// W2 up to its batch: parse, dilation, blur, batch 1024.
PipelineBuilder W2Front(const std::string& cifar_dir) {
  PipelineBuilder b =
      PipelineBuilder::TfRecord({cifar_dir + "/*.tfrecord"}, {BytesFeature("image", 3072), Int64Feature("label")});
  b.Map({Op("decode_raw", {{"dtype", "uint8"}}), Op("reshape", {{"shape", {32, 32, 3}}}),
         Op("grey_dilation", {{"size", 3}}), Op("gaussian_blur", {{"ksize", 11}, {"sigma", 0.8}})})
      .Batch(1024, /*drop_remainder=*/true);
  return b;
}

// Ends in NCHW, as torch models take it: folded into the fused warp, the
// layout change costs no pass.
std::vector<OpSpec> W2Augmentation() {
  return {Op("random_flip", {{"mode", "horizontal"}}),
          Op("random_rotation", {{"degrees", 36.0}, {"fill_mode", "reflect"}}),
          Op("random_zoom", {{"scale", {0.9, 1.1}}, {"fill_mode", "reflect"}}), Op("hwc_to_chw")};
}

OpSpec W2Rescale() { return Op("rescale", {{"scale", 1 / 255.0}}); }

}  // namespace

PipelineDef W2Pipeline(const std::string& cifar_dir) {
  std::vector<OpSpec> ops = W2Augmentation();
  ops.insert(ops.begin(), W2Rescale());
  PipelineDef def = W2Front(cifar_dir).Map(std::move(ops)).Prefetch().Build();
  def.set_name("w2_cifar10");
  return def;
}

PipelineDef W5aPipeline(const std::string& cifar_dir) {
  PipelineDef def =
      PipelineBuilder::TfRecord({cifar_dir + "/*.tfrecord"}, {BytesFeature("image", 3072), Int64Feature("label")})
          .Map({Op("decode_raw", {{"dtype", "uint8"}}), Op("reshape", {{"shape", {32, 32, 3}}}),
                Op("random_crop", {{"size", 32}, {"padding", 4}, {"padding_mode", "reflect"}})})
          .Batch(256, /*drop_remainder=*/true)
          .Map({Op("crop_mirror_normalize",
                   {{"mirror", 0.5}, {"mean", {0.4914, 0.4822, 0.4465}}, {"std", {0.2470, 0.2435, 0.2616}}})})
          .Prefetch()
          .Build();
  def.set_name("w5a_cifar10");
  return def;
}

PipelineDef W2Uint8OverTheWire(const std::string& cifar_dir, const DistributeOptions& distribute) {
  PipelineDef def =
      W2Front(cifar_dir).Map(W2Augmentation()).Distribute(distribute).Map({W2Rescale()}).Prefetch().Build();
  def.set_name("w2_uint8_over_the_wire");
  return def;
}

}  // namespace sluice::bench
