// The placement policy of `placement: "auto"`: from what a running job
// measures (the trainer's rate and wait, the CPU of the trainer and of the
// engine, the pipeline's costs), where the pipeline runs next: how many
// threads in the trainer's process, local worker processes instead, the
// tail on the GPU, the deterministic prefix kept for later epochs.
//
// Each lever has a model that predicts the job's rate under it from the
// measurements, and a rule saying when its measurements call for it. A
// lever the model cannot rate from here (a worker process's interference
// with the trainer, the GPU's speed) is tried, and every move is judged by
// the job's measured rate afterwards: one that did not pay is undone and
// not tried again until the measurements change. A pure state machine fed
// one measurement window at a time, so its rules are tested on windows
// made up for the purpose.
#ifndef SLUICE_PLACEMENT_POLICY_H_
#define SLUICE_PLACEMENT_POLICY_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sluice::placement {

// Where the pipeline runs.
struct Placement {
  int threads = 1;        // compute threads in the trainer's process
  int local_workers = 0;  // > 0: the per-sample part runs in that many worker processes
  // The per-sample part on the workers of the dispatcher the options name
  // (options.placement_service); never with local workers.
  bool service_workers = false;
  bool gpu_tail = false;     // the ops after the batch on the GPU
  bool keep_prefix = false;  // the deterministic prefix kept after its first epoch
  bool operator==(const Placement& o) const {
    return threads == o.threads && local_workers == o.local_workers && service_workers == o.service_workers &&
           gpu_tail == o.gpu_tail && keep_prefix == o.keep_prefix;
  }
  bool operator!=(const Placement& o) const { return !(*this == o); }
  // The per-sample part runs in this process.
  bool in_process() const { return local_workers == 0 && !service_workers; }
  // "in the trainer's process on 2 threads", "1 local worker process, ...".
  std::string Describe() const;
};

// What may move: a user's explicit choice is never overridden, and a lever
// the pipeline or the machine cannot take is off.
struct Levers {
  bool threads = true;        // the user gave no thread count
  bool local_workers = true;  // no distribute node, and the front can run in a worker process
  // The same, and the options name a dispatcher (options.placement_service).
  bool service_workers = false;
  bool gpu_tail = false;     // a CUDA build, a GPU, a tail with cuda kernels, no device set by the user
  bool keep_prefix = false;  // a deterministic prefix worth keeping, and a way to keep it
};

// One window of a running job under `placement`.
struct Measurements {
  Placement placement;
  double seconds = 0;
  int cores = 1;             // this process may run on
  double rate = 0;           // samples/s the trainer took: the job's rate
  double wait_share = 0;     // of the window the trainer waited for data
  double process_cores = 0;  // this process's CPU per second: trainer and engine
  double engine_cores = 0;   // of it, the engine's threads computing
  // The engine's compute per sample, wherever it ran, and the part before
  // the batch (what worker processes take over), with its bytes per sample.
  double cpu_s_per_sample = 0;
  double front_share = 1;
  double front_bytes_per_sample = 0;
  double gpu_tail_share = 0;      // of the compute, the ops a GPU tail takes over
  double prefix_share = 0;        // of the compute, the deterministic prefix
  int64_t prefix_bytes = 0;       // what keeping the prefix writes (an epoch of its output)
  int64_t prefix_room_bytes = 0;  // free on the disk it would be written to
  int64_t memory_free_bytes = 0;  // the memory budget less what the pipeline holds at its peak
  int64_t worker_ring_bytes = 0;  // what one local worker's ring holds
  bool epochs_repeat = false;     // a later epoch is running: a kept prefix would be read again
};

struct Candidate {
  Placement placement;
  double predicted_rate = 0;  // samples/s; 0: cannot be predicted, only tried
  std::string why;
};

struct Decision {
  Placement next;      // == the current placement: stay
  std::string reason;  // what was decided and why, with the numbers
  std::vector<Candidate> alternatives;
  bool undo = false;  // a move undone: its measured rate was lower
};

class Policy {
 public:
  struct Options {
    double min_gain = 0.03;           // a move must beat the placement it left by this
    double loader_bound_wait = 0.10;  // the trainer waits this share or more: the loader bounds the job
    double fed_wait = 0.03;           // under this share the trainer is fed
    double change = 0.25;             // the trainer's rate moving by this much makes tried moves worth trying again
    int settle_windows = 1;           // ignored after each move (start-up)
    int measure_windows = 2;          // averaged to rate a placement: one window's rate is noisy
  };

  Policy(Placement start, Levers levers, Options options);
  Policy(Placement start, Levers levers) : Policy(start, levers, Options()) {}

  // Feeds one window measured under current(); returns what to run next.
  Decision Observe(const Measurements& m);

  // The placement a move went to could not start: back to where it was,
  // never tried again.
  void Refuse(const std::string& why);
  // The kept prefix could not be written: the lever is off for good, and
  // a move to it goes back (as Refuse).
  void Withdraw(const std::string& why);
  // The dispatcher's workers could not go on (the dispatcher unreachable
  // past its timeout): back in the trainer's process, and not tried again
  // until the measurements change.
  void LoseService(const std::string& why);
  // Something done for a move (the prefix written), for the log.
  void Note(std::string what) { log_.push_back(std::move(what)); }

  const Placement& current() const { return current_; }
  const Levers& levers() const { return levers_; }
  // A move is being tried: its rate is not yet known.
  bool judging() const { return trial_; }
  const std::vector<std::string>& log() const { return log_; }

 private:
  // The alternatives to the current placement that its measurements call
  // for, most promising first, each with its predicted rate.
  std::vector<Candidate> Candidates(const Measurements& m) const;
  // Keeping the deterministic prefix, when its measurements call for it:
  // the loader bounds the job (faster), or a fed trainer computes beside
  // the pipeline (the same rate for less CPU).
  void AddKeepPrefix(const Measurements& m, std::vector<Candidate>* out) const;
  bool Tried(const Placement& p) const;
  // `c` out of `alternatives` (the current placement's candidates).
  Decision Move(Candidate c, const Measurements& m, std::vector<Candidate> alternatives);
  // The trial's window is in: keep the move or undo it.
  Decision Judge(const Measurements& m);
  void Forget();
  // Off `lever` in the current placement: back to the placement a trial
  // left, or the same without it.
  void Leave(bool Placement::* lever);
  // After a move: the windows that follow are start-up, then a new rating.
  void Settle();  // the measurements changed: every move may be tried again

  Levers levers_;
  Options options_;
  Placement current_;
  int settling_ = 0;
  std::vector<Measurements> windows_;  // of the placement being rated
  bool trial_ = false;                 // current_ is a move being judged
  Placement before_;                   // what the trial left
  double before_rate_ = 0;
  double trainer_rate_ = 0;              // Demand at the last rating, to notice a change
  std::map<std::string, double> tried_;  // a placement's key -> its measured rate
  std::vector<std::string> log_;
};

// Whether `to` spends less CPU in this process than `from` (fewer threads,
// the prefix kept) with the per-sample part where it was.
bool Frees(const Placement& to, const Placement& from);
// The mean of `windows` (their rates, waits, cores and costs; the rest
// from the last).
Measurements Average(const std::vector<Measurements>& windows);
// The rate the trainer would take with data always ready.
double TrainerRate(const Measurements& m);
// The cores the trainer's own threads use.
double TrainerCores(const Measurements& m);

}  // namespace sluice::placement

#endif  // SLUICE_PLACEMENT_POLICY_H_
