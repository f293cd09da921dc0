// How many CPUs this process may run on.
#ifndef SLUICE_CORE_USABLE_CORES_H_
#define SLUICE_CORE_USABLE_CORES_H_

namespace sluice {

// The CPUs in this process's affinity mask (taskset, a container's cpuset,
// a scheduler's binding), at least 1. std::thread::hardware_concurrency()
// counts every CPU online, so a loader given two cores of 64 would start 64
// threads on them.
int UsableCores();

}  // namespace sluice

#endif  // SLUICE_CORE_USABLE_CORES_H_
