// The calling thread's share of the engine's cores (the executor's CPU
// budget, exec/exec_context.h). A kernel that waits on work done outside
// the engine (a Python process running the user's code) lends it for the
// wait, so that another of the engine's threads computes meanwhile.
#ifndef SLUICE_CORE_CORE_SHARE_H_
#define SLUICE_CORE_CORE_SHARE_H_

namespace sluice {

class CoreShare {
 public:
  virtual ~CoreShare() = default;
  virtual void Lend() = 0;
  // Takes a share back, waiting for one to be free; false once the run is
  // cancelled.
  virtual bool Reclaim() = 0;
};

}  // namespace sluice

#endif  // SLUICE_CORE_CORE_SHARE_H_
