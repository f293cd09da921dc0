// Batches from a worker on the consumer's own host through shared memory
// instead of TCP.
//
// The client makes a ring in /dev/shm (mode 0600: its user's alone) and
// names it, with a fresh session number, in each stream request. A worker
// that can open the ring (same host, same /dev/shm, same user) and claim
// the session writes each batch's column bytes into it and sends only where
// they are; anywhere else the stream carries the bytes as it always did.
// Through the ring, the bytes cross neither the TCP stack nor a CRC (they
// never leave this host's memory), and the client hands them on in place: a
// column is a view of the ring, given back when its last tensor is freed.
// Nothing ever waits for room: a batch that does not fit in what the
// consumer has given back goes over gRPC.
//
// Positions count bytes since the ring was made and never wrap; a
// position's place in the ring is position % capacity. A message never
// straddles the ring's end: the writer skips to the next lap.
#ifndef SLUICE_SERVICE_SHM_RING_H_
#define SLUICE_SERVICE_SHM_RING_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice::service {

struct ShmRingHeader;

// Whether a worker reached at `address` ("host:port", "[v6]:port") runs on
// this host and may share its /dev/shm: a loopback address, localhost,
// this host's name, or an address of one of its interfaces. Names are not
// resolved; an unknown one is taken for another host (its batches come
// over TCP), so no ring is reserved for a worker that could never use it.
bool AddressIsOnThisHost(const std::string& address);

// The client's side. Thread-safe.
class ShmRing : public std::enable_shared_from_this<ShmRing> {
 public:
  // A ring of `capacity` bytes, its memory reserved at once (a full
  // /dev/shm is an error here, never a SIGBUS later).
  static absl::StatusOr<std::shared_ptr<ShmRing>> Create(size_t capacity);
  ~ShmRing();  // unmaps and removes the ring

  // Removes the names of this process's rings from /dev/shm, mapped ones
  // too, for a process about to end without destroying them (a loader in a
  // global when the process leaves by os._exit).
  static void RemoveThisProcesssRings();

  const std::string& name() const { return name_; }
  size_t capacity() const { return capacity_; }

  // Offers the ring to the next stream: the session number its worker
  // must claim. REQUIRES: new, or Reclaim() returned true since.
  uint64_t Offer();
  // The offered stream ended: true when no worker holds the ring (none
  // claimed it, or the one that did let it go), so it may be offered again.
  // False when a worker still holds it (its stream was cancelled, or it
  // died holding it): the ring must not be offered again.
  bool Reclaim();

  // A received message whose ring bytes end at `end`: the bytes of each of
  // its columns, at [position, position + size), stay the client's until
  // every holder of the returned lease is gone. Checks that the message
  // lies after the ones before it and within the ring.
  absl::StatusOr<std::shared_ptr<void>> Hold(uint64_t end);
  // The bytes of one column of the message held last.
  absl::StatusOr<uint8_t*> At(uint64_t position, uint64_t size, uint64_t end);

  // Bytes given back so far (tests).
  uint64_t released() const;

 private:
  ShmRing(std::string name, int fd, ShmRingHeader* header, size_t capacity);
  void Done(uint64_t end);  // a lease ended

  const std::string name_;
  const int fd_;                 // open for the ring's life: it holds the ring's flock
  ShmRingHeader* const header_;  // the mapping starts with it
  const size_t capacity_;
  uint64_t session_ = 0;  // the last one offered

  mutable absl::Mutex mu_;
  struct Held {
    uint64_t end;
    bool done;
  };
  std::deque<Held> held_ ABSL_GUARDED_BY(mu_);  // in the order received
  uint64_t released_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t held_begin_ ABSL_GUARDED_BY(mu_) = 0;    // where the message before the last held ends
  uint64_t received_end_ ABSL_GUARDED_BY(mu_) = 0;  // where the last message held ends
};

// The worker's side of one stream. Thread-compatible.
class ShmRingWriter {
 public:
  // Opens the ring `name` and claims `session`; an error where the ring is
  // not there (another host), not this user's, or offered to another stream.
  static absl::StatusOr<std::unique_ptr<ShmRingWriter>> Claim(const std::string& name, uint64_t session);
  ~ShmRingWriter();  // lets the ring go: the client may offer it again

  // Room for `size` contiguous bytes, or nullopt while the consumer holds
  // too much of the ring (or `size` exceeds it): the position to write at.
  std::optional<uint64_t> Reserve(uint64_t size);
  // Reserve, waiting up to `patience` for the consumer to give back room: a
  // consumer slower than the worker holds the ring full, and sending its
  // batches over TCP instead would cost it the receive and a copy. A
  // consumer that gave nothing back since the last wait ran out holds a
  // batch (the ring is given back in order): then nothing waits.
  std::optional<uint64_t> ReserveWithin(uint64_t size, absl::Duration patience);
  uint8_t* At(uint64_t position) const;

  // Removes the rings of clients that died (killed -9, the rings not in a
  // stream: the next client would, but there may be none), then unmaps the
  // removed ones a worker kept mapped for its clients' next streams. The
  // worker's heartbeat calls it.
  static void ReleaseRingsOfGoneClients();

  struct Mapping;

 private:
  ShmRingWriter(std::shared_ptr<Mapping> mapping, uint64_t session);

  const std::shared_ptr<Mapping> mapping_;
  ShmRingHeader* const header_;
  const uint64_t capacity_;  // as mapped: not read again from the client's memory
  const uint64_t session_;
  uint64_t released_when_waited_ = UINT64_MAX;  // after the last wait that ran out
  uint64_t next_;                               // where the next message goes
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_SHM_RING_H_
