#include "sluice/service/shm_ring.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/batch_builder.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/wire_batch.h"
#include "status_matchers.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

const Schema kSchema({ColumnSpec{"image", DType::kUInt8, Shape{8, 8, 3}}, ColumnSpec{"label", DType::kInt64, Shape{}}});
constexpr int64_t kImageBytes = 8 * 8 * 3;

// `rows` rows whose pixels and labels derive from `seed`.
Batch MakeBatch(int rows, int seed) {
  BatchBuilder b(kSchema, rows);
  for (int64_t i = 0; i < rows * kImageBytes; ++i) b.dense(0)[i] = static_cast<uint8_t>(i * 7 + seed);
  for (int r = 0; r < rows; ++r) reinterpret_cast<int64_t*>(b.dense(1))[r] = seed * 1000 + r;
  b.provenance().AddRun(0, 0, seed * 100);
  b.AddRows(rows);
  return b.Finish();
}

struct Received {
  Batch batch;
  bool via_ring;
};

// Encodes `in` as a worker holding `writer` would, and parses it as the
// client holding `ring` does.
absl::StatusOr<Received> RoundTrip(const Batch& in, ShmRingWriter* writer, ShmRing* ring) {
  SLUICE_ASSIGN_OR_RETURN(grpc::ByteBuffer wire, EncodeWireBatch(in, BatchMessage(), COMPRESSION_NONE, writer));
  ReceivedBatch received;
  SLUICE_RETURN_IF_ERROR(ParseReceivedBatch(&wire, BufferPool::Default(), nullptr, ring, &received));
  const bool via_ring = received.header.shm_end() != 0;
  SLUICE_ASSIGN_OR_RETURN(Batch out, DecodeBatch(std::move(received), kSchema, nullptr, BufferPool::Default()));
  return Received{std::move(out), via_ring};
}

void ExpectSameBatch(const Batch& a, const Batch& b) {
  ASSERT_EQ(a.rows, b.rows);
  ASSERT_EQ(a.columns.size(), b.columns.size());
  for (size_t c = 0; c < a.columns.size(); ++c) {
    ASSERT_EQ(a.columns[c].values.byte_size(), b.columns[c].values.byte_size());
    EXPECT_EQ(
        std::memcmp(a.columns[c].values.raw_data(), b.columns[c].values.raw_data(), a.columns[c].values.byte_size()), 0)
        << "column " << c;
  }
  for (int64_t r = 0; r < a.rows; ++r) EXPECT_EQ(a.provenance.SampleId(r), b.provenance.SampleId(r));
}

TEST(ShmRingTest, BatchesComeThroughTheRingAsSentAndHoldItUntilFreed) {
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ShmRing> ring, ShmRing::Create(1 << 20));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShmRingWriter> writer, ShmRingWriter::Claim(ring->name(), ring->Offer()));
  const Batch first = MakeBatch(16, 1), second = MakeBatch(16, 2);
  ASSERT_OK_AND_ASSIGN(Received a, RoundTrip(first, writer.get(), ring.get()));
  ASSERT_OK_AND_ASSIGN(Received b, RoundTrip(second, writer.get(), ring.get()));
  EXPECT_TRUE(a.via_ring);
  EXPECT_TRUE(b.via_ring);
  ExpectSameBatch(first, a.batch);
  ExpectSameBatch(second, b.batch);
  // The columns are views of the ring: it is given back as they go, and
  // only up to the oldest batch still held.
  EXPECT_EQ(ring->released(), 0u);
  b.batch = Batch();
  EXPECT_EQ(ring->released(), 0u) << "the first batch is still held";
  a.batch = Batch();
  const uint64_t both = 2 * (16 * kImageBytes + 16 * 8);  // whole cache lines here
  EXPECT_EQ(ring->released(), both);
}

TEST(ShmRingTest, ABatchThatDoesNotFitGoesOverTheWireInstead) {
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ShmRing> ring, ShmRing::Create(16 << 10));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShmRingWriter> writer, ShmRingWriter::Claim(ring->name(), ring->Offer()));
  // 48 rows: 9,600 bytes. The first fits; the second would overwrite the
  // first, which the client still holds.
  const Batch first = MakeBatch(48, 1), second = MakeBatch(48, 2), third = MakeBatch(48, 3);
  ASSERT_OK_AND_ASSIGN(Received a, RoundTrip(first, writer.get(), ring.get()));
  ASSERT_OK_AND_ASSIGN(Received b, RoundTrip(second, writer.get(), ring.get()));
  EXPECT_TRUE(a.via_ring);
  EXPECT_FALSE(b.via_ring);
  ExpectSameBatch(second, b.batch);
  // Given back, the room is used again: the next batch starts the next lap.
  a.batch = Batch();
  ASSERT_OK_AND_ASSIGN(Received c, RoundTrip(third, writer.get(), ring.get()));
  EXPECT_TRUE(c.via_ring);
  ExpectSameBatch(third, c.batch);
  // Larger than the whole ring: always over the wire.
  const Batch huge = MakeBatch(100, 4);
  ASSERT_OK_AND_ASSIGN(Received d, RoundTrip(huge, writer.get(), ring.get()));
  EXPECT_FALSE(d.via_ring);
  ExpectSameBatch(huge, d.batch);
}

TEST(ShmRingTest, AWorkerWaitsForRoomAConsumerGivesBackButNotForAHeldBatch) {
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ShmRing> ring, ShmRing::Create(16 << 10));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShmRingWriter> writer, ShmRingWriter::Claim(ring->name(), ring->Offer()));
  const uint64_t span = 48 * kImageBytes + 48 * 8;  // a 48-row batch: more than half the ring
  ASSERT_OK_AND_ASSIGN(Received a, RoundTrip(MakeBatch(48, 1), writer.get(), ring.get()));
  ASSERT_TRUE(a.via_ring);
  // A consumer that frees its batch while the worker waits: the room is
  // taken (the patience is far longer than the free can take).
  std::thread consumer([&] { a.batch = Batch(); });
  EXPECT_TRUE(writer->ReserveWithin(span, absl::Minutes(5)).has_value());
  consumer.join();
  // Now the ring holds that reservation and nothing is given back: the
  // first wait runs out, and the next one does not wait at all.
  EXPECT_FALSE(writer->ReserveWithin(span, absl::Milliseconds(10)).has_value());
  EXPECT_FALSE(writer->ReserveWithin(span, absl::Minutes(5)).has_value());
}

TEST(ShmRingTest, OnlyTheOfferedSessionClaimsTheRingAndOnlyOnce) {
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ShmRing> ring, ShmRing::Create(1 << 16));
  const uint64_t session = ring->Offer();
  EXPECT_THAT(ShmRingWriter::Claim(ring->name(), session + 2).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not offered to session")));
  EXPECT_THAT(ShmRingWriter::Claim("/sluice-ring-1-00000000000000ff", session).status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot open shared-memory ring")));
  EXPECT_THAT(ShmRingWriter::Claim("/../etc/passwd", session).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a shared-memory ring")));
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShmRingWriter> writer, ShmRingWriter::Claim(ring->name(), session));
    EXPECT_FALSE(ShmRingWriter::Claim(ring->name(), session).ok()) << "claimed twice";
    EXPECT_FALSE(ring->Reclaim()) << "a worker still holds it";
  }
  EXPECT_TRUE(ring->Reclaim()) << "the worker let it go";
  // Offered and never claimed (the worker is on another host): reclaimed,
  // and a late claim of that session fails.
  const uint64_t unclaimed = ring->Offer();
  EXPECT_TRUE(ring->Reclaim());
  EXPECT_FALSE(ShmRingWriter::Claim(ring->name(), unclaimed).ok());
}

TEST(ShmRingTest, ASecondStreamWritesAfterWhatTheFirstLeftHeld) {
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ShmRing> ring, ShmRing::Create(1 << 16));
  const Batch first = MakeBatch(16, 1), second = MakeBatch(16, 2);
  Received a;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShmRingWriter> writer, ShmRingWriter::Claim(ring->name(), ring->Offer()));
    ASSERT_OK_AND_ASSIGN(a, RoundTrip(first, writer.get(), ring.get()));
  }
  ASSERT_TRUE(ring->Reclaim());
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShmRingWriter> writer, ShmRingWriter::Claim(ring->name(), ring->Offer()));
  ASSERT_OK_AND_ASSIGN(Received b, RoundTrip(second, writer.get(), ring.get()));
  EXPECT_TRUE(b.via_ring);
  ExpectSameBatch(first, a.batch);  // not overwritten by the second stream
  ExpectSameBatch(second, b.batch);
}

TEST(ShmRingTest, ForgedPositionsAreErrorsNotReadsOutsideTheRing) {
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ShmRing> ring, ShmRing::Create(1 << 16));
  const uint64_t capacity = ring->capacity();
  EXPECT_THAT(ring->Hold(capacity + 1).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("ring holds 0 to")));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<void> lease, ring->Hold(4096));
  EXPECT_THAT(ring->At(0, 8192, 4096).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("lie outside")));
  EXPECT_THAT(ring->At(4000, 200, 4096).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("lie outside")));
  SLUICE_EXPECT_OK(ring->At(1024, 3072, 4096).status());
  // A message must come after the one before it.
  EXPECT_THAT(ring->Hold(4096).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("message before")));
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<void> next, ring->Hold(8192));
  EXPECT_THAT(ring->At(0, 64, 8192).status(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("lie outside")))
      << "inside the previous one";

  // A message naming ring bytes on a stream that offered no ring.
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ShmRingWriter> writer, ShmRingWriter::Claim(ring->name(), ring->Offer()));
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer wire,
                       EncodeWireBatch(MakeBatch(4, 1), BatchMessage(), COMPRESSION_NONE, writer.get()));
  ReceivedBatch received;
  EXPECT_THAT(ParseReceivedBatch(&wire, BufferPool::Default(), nullptr, nullptr, &received),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("without a ring")));
}

// The pid of a process that has exited and been waited for (-1 when fork
// failed): a client killed -9.
pid_t DeadPid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  if (child > 0) ::waitpid(child, nullptr, 0);
  return child;
}

// A ring file named for `pid`'s client, as a killed one leaves it.
std::string RingFileOf(pid_t pid, const std::string& suffix) {
  const std::string path = absl::StrCat("/dev/shm/sluice-ring-", pid, "-", suffix);
  std::ofstream(path) << "a ring";
  return path;
}

TEST(ShmRingTest, RingsOfClientsThatDiedAreRemoved) {
  const pid_t dead = DeadPid();
  ASSERT_GT(dead, 0);
  const std::string orphan = RingFileOf(dead, "00000000000000aa");
  ASSERT_EQ(::access(orphan.c_str(), F_OK), 0);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ShmRing> ring, ShmRing::Create(1 << 16));
  EXPECT_NE(::access(orphan.c_str(), F_OK), 0);
  const std::string mine = "/dev/shm" + ring->name();
  EXPECT_EQ(::access(mine.c_str(), F_OK), 0);
  ring.reset();
  EXPECT_NE(::access(mine.c_str(), F_OK), 0) << "removed with the ring";
}

// A consumer killed -9 holding rings no stream had claimed, and no client
// after it on this host: a worker's heartbeat removes them.
TEST(ShmRingTest, AWorkerRemovesTheRingsOfClientsThatDied) {
  const pid_t dead = DeadPid();
  ASSERT_GT(dead, 0);
  const std::string orphan = RingFileOf(dead, "00000000000000bb");
  const std::string alive = RingFileOf(::getpid(), "00000000000000bb");
  // A live client in another pid namespace: its pid is not one here, but it
  // holds its ring's lock.
  const std::string elsewhere = RingFileOf(dead, "00000000000000cc");
  const int locked = ::open(elsewhere.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(locked, 0);
  ASSERT_EQ(::flock(locked, LOCK_SH), 0);

  ShmRingWriter::ReleaseRingsOfGoneClients();
  EXPECT_NE(::access(orphan.c_str(), F_OK), 0);
  EXPECT_EQ(::access(alive.c_str(), F_OK), 0) << "its client is alive";
  EXPECT_EQ(::access(elsewhere.c_str(), F_OK), 0) << "its client holds the lock";
  ::close(locked);
  ShmRingWriter::ReleaseRingsOfGoneClients();
  EXPECT_NE(::access(elsewhere.c_str(), F_OK), 0) << "its client died: the lock went with it";
  ::unlink(alive.c_str());
}

// A client killed -9 whose parent has not waited for it yet: a zombie,
// which kill(pid, 0) still finds, but its ring's lock is gone.
TEST(ShmRingTest, AWorkerRemovesTheRingsOfAClientKilledButNotYetWaitedFor) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    absl::StatusOr<std::shared_ptr<ShmRing>> ring = ShmRing::Create(1 << 16);
    const char ok = ring.ok() ? '1' : '0';
    (void)!::write(ready[1], &ok, 1);
    ::pause();  // killed here, the ring still made
  }
  ASSERT_GT(child, 0);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  const std::string prefix = absl::StrCat("sluice-ring-", child, "-");
  const auto rings_of_child = [&] {
    int n = 0;
    DIR* dir = ::opendir("/dev/shm");
    while (const dirent* e = ::readdir(dir)) n += std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0;
    ::closedir(dir);
    return n;
  };
  ASSERT_EQ(rings_of_child(), 1);
  ShmRingWriter::ReleaseRingsOfGoneClients();
  EXPECT_EQ(rings_of_child(), 1) << "its client runs";

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  siginfo_t info;
  ASSERT_EQ(::waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);  // dead, and not waited for
  ShmRingWriter::ReleaseRingsOfGoneClients();
  EXPECT_EQ(rings_of_child(), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  ::close(ready[0]);
  ::close(ready[1]);
}

// Only a worker that can share this host's /dev/shm is offered a ring;
// any other name or address is another host's (never resolved).
TEST(AddressIsOnThisHost, LoopbackThisHostsNameAndItsInterfacesButNoOtherAddress) {
  EXPECT_TRUE(AddressIsOnThisHost("127.0.0.1:5000"));
  EXPECT_TRUE(AddressIsOnThisHost("127.1.2.3:5000"));
  EXPECT_TRUE(AddressIsOnThisHost("localhost:5000"));
  EXPECT_TRUE(AddressIsOnThisHost("[::1]:5000"));
  char name[256] = {};
  ASSERT_EQ(::gethostname(name, sizeof name - 1), 0);
  EXPECT_TRUE(AddressIsOnThisHost(absl::StrCat(name, ":5000")));
  ifaddrs* all = nullptr;
  ASSERT_EQ(::getifaddrs(&all), 0);
  for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    EXPECT_TRUE(AddressIsOnThisHost(absl::StrCat(text, ":5000"))) << text << " is " << i->ifa_name << "'s";
  }
  ::freeifaddrs(all);
  EXPECT_FALSE(AddressIsOnThisHost("192.0.2.1:5000"));  // TEST-NET-1: documentation only
  EXPECT_FALSE(AddressIsOnThisHost("[2001:db8::1]:5000"));
  EXPECT_FALSE(AddressIsOnThisHost("worker-7.example.invalid:5000"));
}

}  // namespace
}  // namespace sluice::service
