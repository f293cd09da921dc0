// The deterministic prefix kept for later epochs (placement "auto"): the
// output of the source and the maps after it that draw no random numbers,
// written once in the background beside the running epoch by
// `sluice materialize`'s writer, into a directory of its own under the
// temporary directory (TMPDIR), locked while it lives and removed with
// this (or, when its process was killed, by the next process that keeps a
// prefix there). The pipeline that reads
// it gives the same output under the same output fingerprint, so an epoch
// moves to it and back through its state.
#ifndef SLUICE_PLACEMENT_KEPT_PREFIX_H_
#define SLUICE_PLACEMENT_KEPT_PREFIX_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "pipeline.pb.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/profile/materialize.h"

namespace sluice::placement {

class KeptPrefix {
 public:
  // The map nodes of `def` (`compiled`) that make its prefix to keep:
  // maps on the CPU after a source that reads files, drawing no random
  // numbers and no Python ops among them, whose output is read back in the
  // same order; no service's workers. 0: none.
  static int Maps(const PipelineDef& def, const graph::CompiledPipeline& compiled);
  // The bytes free on the disk it is written to.
  static int64_t Room();

  // `maps`: Maps(def, ...) > 0.
  KeptPrefix(PipelineDef def, int maps);
  // Stops writing and removes what was written.
  ~KeptPrefix();
  KeptPrefix(const KeptPrefix&) = delete;
  KeptPrefix& operator=(const KeptPrefix&) = delete;

  enum class State { kIdle, kWriting, kReady, kFailed };
  // Starts writing on a thread of its own, once.
  void Start();
  State state() const;
  int maps() const { return maps_; }
  // The bytes a sample of the prefix's output takes written; 0 where its
  // columns vary in size (then measured as it runs).
  int64_t row_bytes() const { return row_bytes_; }
  // Until Start's writing is over.
  void Wait() const;
  // REQUIRES: kReady. The pipeline that reads what was written.
  const PipelineDef& rewritten() const { return rewritten_; }
  // kReady: what was written, where and in how long; kFailed: why.
  std::string summary() const;

 private:
  void Write();
  // Into a new directory, on one thread.
  absl::StatusOr<profile::MaterializeResult> Materialize();
  // Deletes the directory and lets go of its lock.
  void Remove() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PipelineDef def_;
  const int maps_;
  int64_t row_bytes_ = 0;
  std::atomic<bool> stop_{false};
  std::thread writer_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  std::string summary_ ABSL_GUARDED_BY(mu_);
  std::string dir_ ABSL_GUARDED_BY(mu_);
  int lock_fd_ ABSL_GUARDED_BY(mu_) = -1;  // held on dir_ while it lives
  PipelineDef rewritten_;                  // set before state_ becomes kReady, then constant
};

}  // namespace sluice::placement

#endif  // SLUICE_PLACEMENT_KEPT_PREFIX_H_
