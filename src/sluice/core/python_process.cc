#include "sluice/core/python_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/core/byte_gauge.h"
#include "sluice/core/descriptor_limit.h"
#include "sluice/core/status_macros.h"
#include "sluice/core/wait_child.h"

extern char** environ;

namespace sluice {
namespace {

struct Request {
  uint64_t kind;
  uint64_t shared_bytes;
  int64_t rows;
  int64_t unused;
};

// Where the child finds the caller's stderr while its own fd 2 is the file
// that keeps what it prints before sluice._python_worker runs.
constexpr int kCallersStderr = 5;
// A reply's message (a traceback) longer than this, or a request for more
// shared memory than kMaxSharedBytes, means the process is out of step.
constexpr uint64_t kMaxMessageBytes = 16 << 20;
constexpr int64_t kMaxSharedBytes = int64_t{16} << 30;

struct Reply {
  int64_t code;
  int64_t row;
  uint64_t message_bytes;
  int64_t unused;
};

absl::Status Errno(const std::string& what) {
  const int err = errno;
  const std::string message = absl::StrCat(what, ": ", std::strerror(err), DescriptorLimitHint(err));
  return err == EMFILE || err == ENFILE ? absl::ResourceExhaustedError(message) : absl::InternalError(message);
}

// false when the other end closed (or the read failed): the process died.
bool ReadAll(int fd, void* data, size_t bytes) {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    // MSG_NOSIGNAL: a dead process is an error to report, not a SIGPIPE.
    const ssize_t n = send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

ByteGauge shared_bytes;

// The caller's environment, but PYTHONPATH led by the trainer's import
// path, so that the child finds sluice (and the user's modules) where the
// trainer did.
std::vector<std::string> ChildEnvironment(bool stderr_captured) {
  std::vector<std::string> env;
  const char* path = std::getenv("SLUICE_PYTHONPATH");
  const char* inherited = std::getenv("PYTHONPATH");
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env.emplace_back(*e);
  }
  std::string python_path = path != nullptr ? path : "";
  if (inherited != nullptr && *inherited != '\0') {
    python_path += (python_path.empty() ? "" : ":") + std::string(inherited);
  }
  if (!python_path.empty()) env.push_back("PYTHONPATH=" + python_path);
  // The pool's processes are the parallelism: the libraries in each run one
  // thread (as a torch DataLoader's workers run torch), or a pool of N
  // processes on N cores runs up to N x N threads. A variable the user set
  // stays.
  for (const char* threads : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OPENCV_FOR_THREADS_NUM"}) {
    if (std::getenv(threads) == nullptr) env.push_back(std::string(threads) + "=1");
  }
  if (stderr_captured) env.push_back(absl::StrCat("SLUICE_STDERR_FD=", kCallersStderr));
  return env;
}

// What a process that died printed before it could report through its
// socket: the last lines, for the error.
std::string EarlyWords(int file) {
  constexpr off_t kTail = 1024;
  struct stat st;
  if (file < 0 || fstat(file, &st) != 0 || st.st_size == 0) return "";
  const off_t from = std::max<off_t>(0, st.st_size - kTail);
  std::string text(static_cast<size_t>(st.st_size - from), '\0');
  const ssize_t got = pread(file, text.data(), text.size(), from);
  text.resize(got > 0 ? static_cast<size_t>(got) : 0);
  absl::StripTrailingAsciiWhitespace(&text);
  if (text.empty()) return "";
  // The interpreter ($SLUICE_PYTHON, else python3) is not the one sluice is installed in.
  const bool no_sluice = absl::StrContains(text, "No module named 'sluice'");
  return absl::StrCat("; it printed", from > 0 ? " (the end)" : "", ":\n", text,
                      no_sluice ? "\n(that interpreter has no sluice package: set SLUICE_PYTHON to one that has)" : "");
}

// `fd` moved to 10 or above (close-on-exec), so that the spawn's dup2s
// onto 2 to 5 never overwrite a source they copy later (a caller with
// stdin closed gets its new descriptors from 0 up).
int AboveTheChildsNumbers(int fd) {
  if (fd < 0 || fd >= 10) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  return moved;
}

}  // namespace

int64_t PythonSharedBytes() { return shared_bytes.now(); }

int64_t PythonSharedPeakBytes() { return shared_bytes.peak(); }

absl::StatusOr<std::unique_ptr<PythonProcess>> PythonProcess::Spawn(const std::string& interpreter,
                                                                    const std::string& spec_json) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) return Errno("socketpair");
  sockets[1] = AboveTheChildsNumbers(sockets[1]);
  const int memory = AboveTheChildsNumbers(memfd_create("sluice-python-op", MFD_CLOEXEC));
  if (memory < 0 || sockets[1] < 0) {
    const absl::Status error = Errno("making the Python process's descriptors");
    close(sockets[0]);
    if (sockets[1] >= 0) close(sockets[1]);
    if (memory >= 0) close(memory);
    return error;
  }
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  // dup2 onto fixed numbers clears close-on-exec there, so the child
  // gets these two (the child marks them not inheritable for its own).
  posix_spawn_file_actions_adddup2(&files, sockets[1], 3);
  posix_spawn_file_actions_adddup2(&files, memory, 4);
  // Until sluice._python_worker runs, the child's stderr is a file: a
  // process that dies before (no sluice or numpy where that interpreter
  // looks) then says why in the error, not only on a terminal or in a
  // service worker's log. The worker then writes to the caller's again.
  const int early_stderr = fcntl(STDERR_FILENO, F_GETFD) >= 0
                               ? AboveTheChildsNumbers(memfd_create("sluice-python-stderr", MFD_CLOEXEC))
                               : -1;
  if (early_stderr >= 0) {
    posix_spawn_file_actions_adddup2(&files, STDERR_FILENO, kCallersStderr);
    posix_spawn_file_actions_adddup2(&files, early_stderr, STDERR_FILENO);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group (a terminal's Ctrl-C is the trainer's to handle),
  // no blocked signals and default dispositions: a service worker blocks
  // SIGTERM and SIGINT in its threads, which a child would inherit.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // The spec goes at the start of the shared memory, not on the command
  // line: it may hold a callable larger than an argument may be (128 KiB).
  if (pwrite(memory, spec_json.data(), spec_json.size(), 0) != static_cast<ssize_t>(spec_json.size())) {
    const absl::Status error = Errno("writing the spec into the shared memory");
    close(sockets[0]);
    close(sockets[1]);
    close(memory);
    if (early_stderr >= 0) close(early_stderr);
    return error;
  }
  std::vector<std::string> args = {interpreter, "-m", "sluice._python_worker", std::to_string(spec_json.size())};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env = ChildEnvironment(early_stderr >= 0);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, interpreter.c_str(), &files, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  close(sockets[1]);
  if (spawned != 0) {
    close(sockets[0]);
    close(memory);
    if (early_stderr >= 0) close(early_stderr);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start the Python interpreter '", interpreter, "': ", std::strerror(spawned)));
  }
  return std::unique_ptr<PythonProcess>(new PythonProcess(pid, sockets[0], memory, early_stderr));
}

absl::Status PythonProcess::Ready(const std::atomic<bool>* cancelled) {
  PythonFailure failure;
  SLUICE_RETURN_IF_ERROR(Receive(&failure, cancelled));
  return failure.message.empty() ? absl::OkStatus() : absl::InvalidArgumentError(failure.message);
}

PythonProcess::~PythonProcess() {
  close(socket_);  // it exits when it reads the end
  if (alive_) {
    const absl::Time deadline = absl::Now() + absl::Seconds(2);
    while (WaitChild(pid_, nullptr, WNOHANG) == 0) {
      if (absl::Now() > deadline) {  // busy in the function: it is not coming back
        kill(-pid_, SIGKILL);        // its group: what the user's code started too
        WaitChild(pid_, nullptr, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  if (mapped_ != nullptr) munmap(mapped_, mapped_bytes_);
  shared_bytes.Add(-static_cast<int64_t>(mapped_bytes_));
  close(memory_);
  if (early_stderr_ >= 0) close(early_stderr_);
}

bool PythonProcess::Alive() {
  if (alive_ && WaitChild(pid_, &exit_status_, WNOHANG) == pid_) alive_ = false;
  return alive_;
}

absl::StatusOr<uint8_t*> PythonProcess::Memory(size_t bytes) {
  if (bytes <= mapped_bytes_) return mapped_;
  const size_t grown = std::max(bytes, mapped_bytes_ * 2);
  if (ftruncate(memory_, static_cast<off_t>(grown)) != 0) return Errno("growing the Python op's shared memory");
  if (mapped_ != nullptr) munmap(mapped_, mapped_bytes_);
  shared_bytes.Add(-static_cast<int64_t>(mapped_bytes_));
  void* p = mmap(nullptr, grown, PROT_READ | PROT_WRITE, MAP_SHARED, memory_, 0);
  if (p == MAP_FAILED) {
    mapped_ = nullptr;
    mapped_bytes_ = 0;
    return Errno("mapping the Python op's shared memory");
  }
  mapped_ = static_cast<uint8_t*>(p);
  mapped_bytes_ = grown;
  shared_bytes.Add(static_cast<int64_t>(grown));
  return mapped_;
}

absl::Status PythonProcess::Send(int64_t rows) {
  const Request request{1, mapped_bytes_, rows, 0};
  rows_counted_ = 0;
  if (WriteAll(socket_, &request, sizeof(request))) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat("its Python process (pid ", pid_, ") ", Reap()));
}

absl::Status PythonProcess::Receive(PythonFailure* failure, const std::atomic<bool>* cancelled,
                                    std::atomic<int64_t>* progress) {
  *failure = PythonFailure();
  // The user's code may never return (a deadlock, an endless loop): the
  // wait looks at the cancellation between short polls.
  pollfd readable{socket_, POLLIN, 0};
  while (cancelled != nullptr) {
    const int ready = poll(&readable, 1, 100);
    if (ready > 0 || (ready < 0 && errno != EINTR)) break;  // a reply, or an error the read reports
    CountRows(progress);
    if (!cancelled->load(std::memory_order_acquire)) continue;
    kill(-pid_, SIGKILL);  // its group: what the user's code started too
    Reap();
    return absl::CancelledError(absl::StrCat("pipeline cancelled while its Python process (pid ", pid_,
                                             ") ran the user's code; the process was killed"));
  }
  Reply reply;
  if (ReadAll(socket_, &reply, sizeof(reply))) {
    if (reply.message_bytes > kMaxMessageBytes) {
      return absl::DataLossError(absl::StrCat("its Python process (pid ", pid_, ") sent a reply of ",
                                              reply.message_bytes, " bytes: out of step with this sluice"));
    }
    std::string message(reply.message_bytes, '\0');
    if (ReadAll(socket_, message.data(), message.size())) {
      if (reply.code == kPythonNeedsMemory) {
        *failure = PythonFailure{"", reply.row};
        return absl::ResourceExhaustedError("needs more shared memory");
      }
      if (reply.code != kPythonOk) {
        *failure = PythonFailure{message.empty() ? "(it said nothing more)" : std::move(message), reply.row};
      }
      return absl::OkStatus();
    }
  }
  // The row it was on, as it wrote it before calling the function.
  failure->row = mapped_ != nullptr ? *reinterpret_cast<const int64_t*>(mapped_) : -1;
  return absl::AbortedError(absl::StrCat("its Python process (pid ", pid_, ") ", Reap()));
}

void PythonProcess::CountRows(std::atomic<int64_t>* progress) {
  if (progress == nullptr || mapped_ == nullptr) return;
  // The header's row, written by the process before each row (another
  // process's store: read whole, never torn, on every target sluice builds for).
  const int64_t row = __atomic_load_n(reinterpret_cast<const int64_t*>(mapped_), __ATOMIC_RELAXED);
  if (row <= rows_counted_) return;
  progress->fetch_add(row - rows_counted_, std::memory_order_relaxed);
  rows_counted_ = row;
}

size_t PythonProcess::WaitAny(const std::vector<PythonProcess*>& processes, const std::atomic<bool>* cancelled,
                              int also, std::atomic<int64_t>* progress) {
  if (processes.size() < 2 && also < 0) return 0;
  std::vector<pollfd> fds;
  for (const PythonProcess* p : processes) fds.push_back(pollfd{p->socket_, POLLIN, 0});
  if (also >= 0) fds.push_back(pollfd{also, POLLIN, 0});
  for (;;) {
    const int ready = poll(fds.data(), fds.size(), 100);
    if (ready < 0 && errno != EINTR) return 0;  // its Receive reports the error
    for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].revents != 0) return i;
    }
    for (PythonProcess* p : processes) p->CountRows(progress);
    if (cancelled != nullptr && cancelled->load(std::memory_order_acquire)) return 0;
  }
}

absl::Status PythonProcess::Call(int64_t rows, PythonFailure* failure, const std::atomic<bool>* cancelled,
                                 std::atomic<int64_t>* progress) {
  for (;;) {
    SLUICE_RETURN_IF_ERROR(Send(rows));
    const absl::Status received = Receive(failure, cancelled, progress);
    if (!absl::IsResourceExhausted(received) || !alive_) return received;
    const int64_t needed = failure->row;
    failure->row = -1;  // a size, not a row
    if (needed <= static_cast<int64_t>(mapped_bytes_) || needed > kMaxSharedBytes) {
      return absl::DataLossError(absl::StrCat("its Python process (pid ", pid_, ") asked for ", needed,
                                              " bytes of shared memory, having ", mapped_bytes_));
    }
    SLUICE_RETURN_IF_ERROR(Memory(static_cast<size_t>(needed)).status());
  }
}

std::string PythonProcess::Reap() {
  if (alive_ && WaitChild(pid_, &exit_status_, 0) != pid_) exit_status_ = -1;
  alive_ = false;
  const int status = exit_status_;
  if (status == -1) return "is gone";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("was killed by signal ", sig, " (", strsignal(sig), ")",
                        sig == SIGKILL ? ": out of memory, or killed by someone" : "", EarlyWords(early_stderr_));
  }
  if (WEXITSTATUS(status) == 0) return "exited with status 0";
  return absl::StrCat("exited with status ", WEXITSTATUS(status), EarlyWords(early_stderr_));
}

}  // namespace sluice
