// Keeps memory that gRPC frees in the process's heap for its next message.
#ifndef SLUICE_SERVICE_HEAP_REUSE_H_
#define SLUICE_SERVICE_HEAP_REUSE_H_

namespace sluice::service {

// glibc returns a heap's free top to the kernel once it passes 128 KiB, and
// gRPC reads each message into fresh buffers, so every batch received
// faulted in new zeroed pages: a third of a client's CPU on the service
// bench. This raises the trim threshold to 64 MiB and fixes the mmap
// threshold at glibc's own ceiling (32 MiB), which setting the first would
// otherwise pin at 128 KiB. Process-wide; idempotent. Called by the
// service's clients and workers.
void ReuseFreedHeapMemory();

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_HEAP_REUSE_H_
