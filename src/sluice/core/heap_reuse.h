// Keeps freed memory in the process's heap for the next element.
#ifndef SLUICE_CORE_HEAP_REUSE_H_
#define SLUICE_CORE_HEAP_REUSE_H_

#include "sluice/core/buffer_pool.h"

namespace sluice {

// glibc returns a heap's free top to the kernel once it passes 128 KiB, so
// buffers of a few MB allocated and freed per element (gRPC's read buffers
// for each message received, libjpeg's coefficient arrays for each
// progressive image) faulted in new zeroed pages every time: a third of a
// service client's CPU, 7% of W3's. This raises the trim threshold to
// 64 MiB and fixes the mmap threshold at glibc's own ceiling (32 MiB),
// which setting the first would otherwise pin at 128 KiB. Process-wide;
// idempotent. Called when a pipeline is created.
void ReuseFreedHeapMemory();

// At an epoch's end: the blocks `pool` caches beyond the most the last 8
// epochs had in use at once go back to the system (sizes the pipeline moved
// past, and the block more that a stalled consumer once let the prefetch
// fill, which a peak over the whole run would keep for good), and with
// them the heap's free memory that the trim threshold above keeps.
void GiveBackUnused(BufferPool* pool);

// The heap's free memory back to the system (what the trim threshold above
// keeps): after a long-lived server dropped something large it will not
// make again soon (a pipeline with its data inline, tens of MB).
void GiveBackFreedHeap();

}  // namespace sluice

#endif  // SLUICE_CORE_HEAP_REUSE_H_
