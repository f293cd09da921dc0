// What to say when a process runs out of file descriptors.
#ifndef SLUICE_CORE_DESCRIPTOR_LIMIT_H_
#define SLUICE_CORE_DESCRIPTOR_LIMIT_H_

#include <string>

namespace sluice {

// For EMFILE and ENFILE: the limit and how to raise it ("; this process
// may open 16 descriptors (ulimit -n): raise it"), to append to the
// error's words; "" for any other errno.
std::string DescriptorLimitHint(int err);

}  // namespace sluice

#endif  // SLUICE_CORE_DESCRIPTOR_LIMIT_H_
