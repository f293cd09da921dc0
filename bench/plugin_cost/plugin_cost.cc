// Runs a pipeline whose work is one op, examples/plugin_op's random_cutout,
// and prints its samples/s as JSON. The op comes either from its plugin
// (--plugin PATH: dlopen, as users load it) or from the same source
// compiled into this program (--builtin: registered with a direct call), so
// the two differ only in how the op got into the process.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sluice/sluice.h"

// cutout.cc's entry point, compiled into this program.
extern "C" void sluice_plugin_register(sluice::ops::PluginRegistrar* registrar);

namespace {

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "plugin_cost: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string plugin;
  bool builtin = false;
  double seconds = 3;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--builtin") == 0) builtin = true;
    if (std::strcmp(argv[i], "--plugin") == 0 && i + 1 < argc) plugin = argv[++i];
    if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = std::atof(argv[++i]);
  }
  if (builtin == !plugin.empty()) {
    std::fprintf(stderr, "usage: plugin_cost --builtin | --plugin PATH.so [--seconds S]\n");
    return 2;
  }
  if (builtin) {
    sluice::ops::PluginRegistrar registrar(&sluice::ops::OpRegistry::Global(), "plugin_cost (built in)");
    sluice_plugin_register(&registrar);
    if (!registrar.status().ok()) return Fail(registrar.status());
  } else if (absl::Status s = sluice::ops::LoadPlugin(plugin); !s.ok()) {
    return Fail(s);
  }
  // 512 photo-sized samples in memory, cut out over and over: the op is the
  // work (a 224x224x3 copy and a 64x64 patch per sample).
  const int kImages = 512;
  std::vector<uint8_t> pixels(static_cast<size_t>(kImages) * 224 * 224 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 31);
  absl::StatusOr<sluice::Pipeline> pipeline = sluice::Pipeline::FromBuilder(
      sluice::PipelineBuilder::Arrays({sluice::MakeArrayColumn("image", {224, 224, 3}, pixels)})
          .Repeat()
          .Map({sluice::Op("random_cutout", {{"size", 64}})})
          .Batch(64)
          .Seed(1));
  if (!pipeline.ok()) return Fail(pipeline.status());
  sluice::Iterator it = pipeline->Iterate();
  sluice::Batch batch;
  bool end = false;
  if (absl::Status s = it.Next(&batch, &end); !s.ok()) return Fail(s);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  int64_t samples = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    if (absl::Status s = it.Next(&batch, &end); !s.ok()) return Fail(s);
    samples += batch.rows;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::printf("{\"mode\": \"%s\", \"samples\": %lld, \"seconds\": %.3f, \"samples_per_s\": %.1f}\n",
              builtin ? "builtin" : "plugin", static_cast<long long>(samples), elapsed, samples / elapsed);
  return 0;
}
