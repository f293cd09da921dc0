// Encodes a pipeline's batches for the wire one or two batches ahead of the
// stream that writes them, on a thread of its own: the CRC and the header
// of the next batch overlap the socket copy of this one. Measured on the
// streaming bench, encoding on the writing thread left the sender idle
// between writes and the stream at 76% of a bare gRPC loop.
#ifndef SLUICE_SERVICE_ENCODE_AHEAD_H_
#define SLUICE_SERVICE_ENCODE_AHEAD_H_

#include <deque>
#include <thread>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "service.pb.h"
#include "sluice/exec/pipeline.h"
#include "sluice/service/shm_ring.h"

namespace sluice::service {

// Thread-compatible: one consumer calls Next. Destroying it cancels `it`
// and joins the thread.
class EncodeAhead {
 public:
  struct Encoded {
    grpc::ByteBuffer bytes;
    int64_t rows = 0;
    uint64_t ring_bytes = 0;  // written into the client's ring, not sent
  };

  // REQUIRES: `it` and `ring` (null: none) outlive this object. `header` is
  // copied into every message; its files only into the first.
  EncodeAhead(exec::PipelineIterator* it, BatchMessage header, Compression compression, ShmRingWriter* ring,
              size_t depth = 2);
  ~EncodeAhead();

  // The next encoded batch; *end after the last. A pipeline or encoding
  // error is returned once the batches before it were taken.
  absl::Status Next(Encoded* out, bool* end);

 private:
  void Run();

  exec::PipelineIterator* const it_;
  const Compression compression_;
  ShmRingWriter* const ring_;
  const size_t depth_;
  BatchMessage header_;  // used by the thread only

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Encoded> ready_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // the thread produced its last
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_ENCODE_AHEAD_H_
