#include "sluice/exec/thread_start.h"

#include <new>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::exec {

int StartThreads(int count, const std::function<void(int)>& body, std::vector<std::thread>* threads) {
  for (int i = 0; i < count; ++i) {
    std::thread thread = TryStartThread([body, i] { body(i); });
    if (!thread.joinable()) return i;
    threads->push_back(std::move(thread));
  }
  return count;
}

std::thread TryStartThread(std::function<void()> body) {
  try {
    return std::thread(std::move(body));
  } catch (const std::system_error&) {  // no thread to be had
    return std::thread();
  } catch (const std::bad_alloc&) {  // no memory for its state (`ulimit -v`)
    return std::thread();
  }
}

absl::Status ThreadStartError(absl::string_view who) {
  return absl::ResourceExhaustedError(
      absl::StrCat(who,
                   ": the system refused to start a thread (a limit on processes and threads: `ulimit -u`, a "
                   "container's pids limit; or on memory: `ulimit -v`); raise the limit or run fewer threads "
                   "(with_options(threads=...))"));
}

}  // namespace sluice::exec
