// Native objects a process got from its parent by fork(): their threads
// stayed in the parent, so the child neither uses nor destroys them.
#ifndef SLUICE_PYTHON_FORK_GUARD_H_
#define SLUICE_PYTHON_FORK_GUARD_H_

#include <unistd.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sluice::python {

class MadeInThisProcess {
 public:
  bool inherited() const { return ::getpid() != pid_; }
  // FailedPrecondition naming both processes if inherited: `what` ("this
  // iterator was started"), then what to do instead.
  absl::Status Check(const std::string& what, const std::string& instead) const {
    if (!inherited()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(what, " in process ", pid_, ", which this process (", ::getpid(),
                                                      ") was forked from: its threads stayed there. ", instead));
  }

 private:
  const pid_t pid_ = ::getpid();
};

// Lets go of what `p` owns without destroying it: destroying a parent's
// object in a child would join threads that are not there, and could stop
// the parent's processes and connections.
template <typename T>
void Abandon(std::unique_ptr<T>& p) {
  (void)p.release();
}
template <typename T>
void Abandon(std::shared_ptr<T>& p) {
  new std::shared_ptr<T>(std::move(p));  // never deleted: the count never reaches 0
}

}  // namespace sluice::python

#endif  // SLUICE_PYTHON_FORK_GUARD_H_
