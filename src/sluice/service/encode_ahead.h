// Encodes a pipeline's batches for the wire `depth` batches ahead of the
// stream that writes them, on a thread of its own, so that encoding
// overlaps the writes: worth it where encoding is dear (compression, the
// copy into a client's ring). Depth 0 encodes on the caller's thread in
// Next: an uncompressed batch's CRC then leaves its bytes in that core's
// cache for the socket copy that follows, where encoded ahead on another
// core they had to be read again from memory (2-core Xeon, 1 MiB batches:
// the stream went from 68-72% to 77-78% of a bare gRPC loop).
#ifndef SLUICE_SERVICE_ENCODE_AHEAD_H_
#define SLUICE_SERVICE_ENCODE_AHEAD_H_

#include <grpcpp/support/byte_buffer.h>

#include <deque>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // copied into every message; its files only into the first. At most
  // `depth` batches wait encoded. `with_state`: each message carries the
  // iterator's state after its batch (BatchMessage.state).
  EncodeAhead(exec::PipelineIterator* it, BatchMessage header, Compression compression, ShmRingWriter* ring,
              size_t depth, bool with_state = false);
  ~EncodeAhead();

  // The next encoded batch; *end after the last. A pipeline or encoding
  // error is returned once the batches before it were taken.
  absl::Status Next(Encoded* out, bool* end);

 private:
  void Run();
  // `batch` for the wire, with the header's files if none went before.
  absl::StatusOr<Encoded> Encode(const Batch& batch);

  exec::PipelineIterator* const it_;
  const Compression compression_;
  ShmRingWriter* const ring_;
  const size_t depth_;
  const bool with_state_;
  BatchMessage header_;  // used by the thread only (at depth 0, by Next)

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Encoded> ready_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // the thread produced its last
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is built; none at depth 0
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_ENCODE_AHEAD_H_
