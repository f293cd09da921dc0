// The verdict of a profile: from the measured figures, what bounds the
// job (reading, an op's compute, or the trainer), by how much, and which
// levers would move it, each with its predicted effect. A pure function of
// the figures, so its rules are tested on figures made up for the purpose.
#ifndef SLUICE_PROFILE_ANALYZER_H_
#define SLUICE_PROFILE_ANALYZER_H_

#include <string>
#include <vector>

namespace sluice::profile {

struct OpCost {
  int node = 0;  // index in the pipeline
  int op = 0;    // index in the node's chain; -1: the node's own work (node 0: the source's reading)
  std::string node_name, op_name;
  bool view = false;                 // reinterprets bytes: costs nothing
  bool random = false;               // draws random numbers (cannot be materialized)
  double core_s_per_1k = 0;          // core-seconds per 1,000 samples delivered
  double cpu_share = 0;              // of the pipeline's measured compute
  double ablated_samples_per_s = 0;  // with this op stood in for; 0: not measured
};

struct Findings {
  std::string pipeline;
  int threads = 1;
  double samples_per_s = 0;             // the whole pipeline, consumed as fast as it comes
  double cpu_s_per_sample = 0;          // this process's CPU per sample delivered
  double input_only_samples_per_s = 0;  // the source alone (reading and parsing)
  std::vector<OpCost> ops;
  double consumer_samples_per_s = 0;  // the trainer's rate; 0: unknown
  double paced_wait_share = 0;        // of the trainer's time spent waiting, paced at that rate
  double target_samples_per_s = 0;    // wanted; 0: the trainer's rate
  // Deterministic ops up to the first random one (what materialize removes).
  double materializable_share = 0;
  std::string materializable;  // their names
  // The per-sample part before the batch node (what the service offloads),
  // and the bytes per sample where it ends.
  double front_share = 0;
  double front_bytes_per_sample = 0;
  // The ops at the end of the pipeline that have cuda kernels (what a map
  // with device "cuda" after the batch takes over), and whether this
  // process can run them (a CUDA build and a GPU).
  double gpu_tail_share = 0;
  std::string gpu_tail;  // their names
  bool gpu_available = false;
  double gpu_tail_samples_per_s = 0;  // measured with them on the GPU; 0: not measured
  // The source reads objects from a store (s3://, gs://) every epoch: it
  // has no object_cache.
  bool uncached_objects = false;
};

struct Lever {
  std::string action;  // "materialize ...", "offload ...", "run on N cores"
  double predicted_samples_per_s = 0;
  std::string why;
};

struct Verdict {
  enum class Bound { kReading, kCompute, kTrainer };
  Bound bound = Bound::kCompute;
  std::string bottleneck;  // "reading", an op's name, or "the trainer"
  std::string summary;     // plain words, with numbers
  std::vector<Lever> levers;
};

// Client CPU per byte received from the service (kernel copy, our copy
// with the CRC, gRPC), measured on the service bench: bench/RESULTS.md.
inline constexpr double kClientCpuSecondsPerByte = 0.7e-9;

Verdict Analyze(const Findings& findings);

// "41k", "1.2M", "850".
std::string ShortRate(double samples_per_s);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_ANALYZER_H_
