// The memory budget a pipeline gets when its options set none.
#ifndef SLUICE_CORE_MEMORY_DEFAULT_H_
#define SLUICE_CORE_MEMORY_DEFAULT_H_

#include <cstdint>
#include <string>

namespace sluice {

struct DefaultMemoryBudget {
  int64_t bytes = 0;
  // What it was taken from: the memory this process may use (the machine's
  // RAM, or its cgroup's limit when lower) and the ranks that share it.
  int64_t machine_bytes = 0;
  int local_ranks = 1;

  // "256 MiB (1/128 of 23.5 GiB for 1 rank)".
  std::string Describe() const;
};

// A 128th of the memory this process may use, divided by the ranks on the
// node (LOCAL_WORLD_SIZE, as torchrun sets it), within [256 MiB, 2 GiB]:
// the loaders of eight ranks take a sixteenth of the node together. A
// pipeline whose batches need more raises it (exec/memory_minimum.h).
DefaultMemoryBudget DefaultMemoryBudgetOfMachine();

}  // namespace sluice

#endif  // SLUICE_CORE_MEMORY_DEFAULT_H_
