// One Python process running a user's function for the `python` op:
// `INTERPRETER -m sluice._python_worker SPEC`, its own process group (a
// terminal's Ctrl-C reaches the trainer, which stops it), fd 3 a Unix
// socket to this process, fd 4 a shared memory file (memfd) that carries
// the rows both ways, so tensors are copied once each way and never
// pickled. The protocol (sluice/_python_worker.py holds the other end):
//
//   shared memory:  [header 64 B: int64 row being run, int64 rows made
//                   (a dataset's process; fewer when a generator ended)]
//                   [uint64 seed per row, or int64 index for a dataset]
//                   [each input column] [each output column], each part
//                   64-byte aligned; a dense column is rows x row bytes, a
//                   ragged one (rows + 1) int64 offsets then the bytes.
//   request:        {uint64 kind (1: run), uint64 shared bytes, int64 rows, 0}
//   reply:          {int64 code (0 ok, 1 failed, 2 needs more shared memory:
//                   `row` bytes), int64 row (-1: the whole batch), uint64
//                   message bytes, 0} then the message. A dataset's process
//                   writes variable-length outputs after the fixed ones and
//                   may need more room than the engine gave; it keeps what
//                   it made for the request that comes again.
//
// The first reply comes unasked, once the function is imported: code 0, or
// 1 with why not. A process that dies is seen as the socket closing; it
// exits by itself when this end closes (the trainer died).
#ifndef SLUICE_CORE_PYTHON_PROCESS_H_
#define SLUICE_CORE_PYTHON_PROCESS_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice {

// What a call's failure says: the message, and the row it names (-1: the
// whole call, or unknown).
struct PythonFailure {
  std::string message;
  int64_t row = -1;
};

// The shared memory's header, and the alignment of each part after it.
inline constexpr size_t kPythonHeaderBytes = 64;
inline size_t PythonAligned(size_t bytes) { return (bytes + 63) & ~size_t{63}; }

// Bytes of shared memory the Python processes of this process have mapped
// now: a python op's or dataset's rows on their way, outside every
// pipeline's pool; each pipeline's memory budget counts them.
int64_t PythonSharedBytes();
// The most there was at once so far.
int64_t PythonSharedPeakBytes();

// Codes of a reply.
inline constexpr int64_t kPythonOk = 0, kPythonFailed = 1, kPythonNeedsMemory = 2;

class PythonProcess {
 public:
  // Starts the process; Ready() then waits until it imported the function.
  static absl::StatusOr<std::unique_ptr<PythonProcess>> Spawn(const std::string& interpreter,
                                                              const std::string& spec_json);
  // An error carries the process's own words (an ImportError's traceback).
  // `*cancelled` (may be null) stops the wait, killing the process: an
  // import that never ends is not waited for past a Ctrl-C.
  absl::Status Ready(const std::atomic<bool>* cancelled = nullptr);
  ~PythonProcess();
  PythonProcess(const PythonProcess&) = delete;
  PythonProcess& operator=(const PythonProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Whether it runs; a process that died while idle is reaped here.
  bool Alive();
  // Bytes of shared memory mapped now: what the caller may read.
  size_t mapped_bytes() const { return mapped_bytes_; }

  // Shared memory of at least `bytes`, for the caller to fill; valid until
  // the next call of Memory.
  absl::StatusOr<uint8_t*> Memory(size_t bytes);
  // Sends a run of `rows`, the memory filled (its header's row -1).
  absl::Status Send(int64_t rows);
  // Waits for the run's reply. OkStatus with `failure` set when the
  // function failed (an exception, a wrong output); an error when the
  // process died, saying how, with `failure->row` the row it was running.
  // Once `*cancelled` (may be null) turns true the wait ends: the process,
  // stuck in the user's code or not, is killed, and the error is Cancelled.
  // `*progress` (may be null; read only while `cancelled` is watched) counts
  // the rows the process moved on from during the wait: a run of slow items
  // is seen to go on, not to hang.
  absl::Status Receive(PythonFailure* failure, const std::atomic<bool>* cancelled = nullptr,
                       std::atomic<int64_t>* progress = nullptr);
  // The index of one of `processes` whose reply has come (or that ended),
  // waiting for the first; processes.size() once `also` (a descriptor, -1
  // for none) is readable. Once `*cancelled` (may be null) turns true, any
  // index: its Receive then ends the wait. `*progress` (may be null)
  // counts the rows they move on from, as Receive's.
  static size_t WaitAny(const std::vector<PythonProcess*>& processes, const std::atomic<bool>* cancelled, int also = -1,
                        std::atomic<int64_t>* progress = nullptr);
  // Send and Receive, growing the memory (its contents kept) and sending
  // again while the process needs more.
  absl::Status Call(int64_t rows, PythonFailure* failure, const std::atomic<bool>* cancelled = nullptr,
                    std::atomic<int64_t>* progress = nullptr);

 private:
  PythonProcess(pid_t pid, int socket, int memory, int early_stderr)
      : pid_(pid), socket_(socket), memory_(memory), early_stderr_(early_stderr) {}
  // Why the process ended ("killed by signal 9 (Killed)"); reaps it.
  std::string Reap();
  // Adds to `*progress` (may be null) the rows the header's row moved past
  // since the last count of this run.
  void CountRows(std::atomic<int64_t>* progress);

  pid_t pid_;
  int socket_;
  int memory_;
  int early_stderr_;  // what it printed before its own code ran; -1 if not kept
  uint8_t* mapped_ = nullptr;
  size_t mapped_bytes_ = 0;
  bool alive_ = true;
  int64_t rows_counted_ = 0;  // of the run sent last, added to a progress count
  int exit_status_ = -1;      // waitpid's, once reaped; -1 while not known
};

}  // namespace sluice

#endif  // SLUICE_CORE_PYTHON_PROCESS_H_
