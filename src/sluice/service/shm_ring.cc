#include "sluice/service/shm_ring.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <list>
#include <new>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/random_access_file.h"

namespace sluice::service {

// At the start of the mapping, a page of its own: the bytes after it are
// page-aligned.
struct ShmRingHeader {
  uint64_t magic;
  uint64_t capacity;
  uint64_t begin;  // where the offered session's writer starts
  // 0: idle; even: offered to that session; odd (offered + 1): claimed.
  std::atomic<uint64_t> session;
  // Every byte before it is given back: the writer may use it again.
  alignas(64) std::atomic<uint64_t> released;
};

namespace {

constexpr uint64_t kMagic = 0x676e6972656369ULL;  // "icering" in memory
constexpr size_t kHeaderBytes = 4096;
constexpr char kPrefix[] = "sluice-ring-";
static_assert(sizeof(ShmRingHeader) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the header's atomics are shared between processes");

// The pid in a ring's name ("/sluice-ring-PID-RANDOM"), or 0.
int PidOf(const std::string& name) {
  const size_t start = name.find(kPrefix);
  if (start == std::string::npos) return 0;
  const std::vector<std::string> parts = absl::StrSplit(name.substr(start + sizeof(kPrefix) - 1), '-');
  int pid = 0;
  return parts.size() == 2 && absl::SimpleAtoi(parts[0], &pid) && pid > 0 ? pid : 0;
}

// Whether process `pid` of this pid namespace runs. One killed but not yet
// waited for by its parent (a zombie) does not: its files and locks are gone.
bool Running(int pid) {
  if (::kill(pid, 0) != 0) return errno == EPERM;  // another user's
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t end_of_name = line.rfind(')');
  return end_of_name == std::string::npos || line.compare(end_of_name, 3, ") Z") != 0;
}

// A ring whose client died without removing it (killed -9) is removed by
// the next client or by a worker on its host. Its client holds a shared
// flock on the ring for its life, which the kernel drops when it dies: a
// pid that looks dead may be a live client's in another pid namespace
// sharing /dev/shm, whose lock keeps its ring.
void RemoveIfOrphan(const std::string& name) {
  const int pid = PidOf(name);
  if (pid == 0 || Running(pid)) return;
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return;
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) ::shm_unlink(name.c_str());
  ::close(fd);
}

// Calls `fn` with the name ("/sluice-ring-...") of each ring in /dev/shm.
template <typename Fn>
void ForEachRing(Fn fn) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, kPrefix, sizeof(kPrefix) - 1) == 0) fn(absl::StrCat("/", e->d_name));
  }
  ::closedir(dir);
}

void RemoveOrphans() { ForEachRing(RemoveIfOrphan); }

// The host part of "host:port" or "[v6]:port".
std::string HostOf(const std::string& address) {
  if (!address.empty() && address.front() == '[') return address.substr(1, address.find(']') - 1);
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || address.find(':') != colon) return address;  // no port, or a bare v6
  return address.substr(0, colon);
}

// The numeric addresses of this host's interfaces.
std::vector<std::string> InterfaceAddresses() {
  std::vector<std::string> out;
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) != 0) return out;
  for (const ifaddrs* i = all; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const int family = i->ifa_addr->sa_family;
    const void* raw = nullptr;
    if (family == AF_INET) raw = &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr;
    if (family == AF_INET6) raw = &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr;
    if (raw != nullptr && ::inet_ntop(family, raw, text, sizeof text) != nullptr) out.emplace_back(text);
  }
  ::freeifaddrs(all);
  return out;
}

// Sizes the ring's file and reserves its pages now: on a full /dev/shm (a
// container's 64 MB default), touching them later would be a SIGBUS. 0 or
// an errno; a signal (the trainer's SIGCHLD) stops fallocate, not the ring.
int Reserve(int fd, size_t bytes) {
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) return errno;
  int reserved;
  do {
    reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (reserved == EINTR);
  return reserved;
}

}  // namespace

bool AddressIsOnThisHost(const std::string& address) {
  const std::string host = HostOf(address);
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && host == name) return true;
  const std::vector<std::string> local = InterfaceAddresses();
  return std::find(local.begin(), local.end(), host) != local.end();
}

absl::StatusOr<std::shared_ptr<ShmRing>> ShmRing::Create(size_t capacity) {
  RemoveOrphans();
  capacity = (capacity + kHeaderBytes - 1) / kHeaderBytes * kHeaderBytes;
  if (capacity == 0) return absl::InvalidArgumentError("a shared-memory ring needs a capacity");
  absl::BitGen gen;
  const std::string name =
      absl::StrCat("/", kPrefix, ::getpid(), "-", absl::Hex(absl::Uniform<uint64_t>(gen), absl::kZeroPad16));
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return io::ErrnoStatus(errno, "cannot make shared-memory ring", "/dev/shm" + name);
  ::flock(fd, LOCK_SH);  // held while the fd is open: this client lives (RemoveIfOrphan)
  const size_t total = kHeaderBytes + capacity;
  const int reserved = Reserve(fd, total);
  void* mapped = reserved == 0 ? ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int mapped_errno = errno;
  if (reserved != 0 || mapped == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    ::close(fd);
    errno = reserved != 0 ? reserved : mapped_errno;
    return io::ErrnoStatus(errno, absl::StrCat("no room for a ", capacity >> 20, " MiB shared-memory ring"),
                           "/dev/shm" + name);
  }
  auto* header = new (mapped) ShmRingHeader{kMagic, capacity, 0, {0}, {0}};
  return std::shared_ptr<ShmRing>(new ShmRing(name, fd, header, capacity));
}

ShmRing::ShmRing(std::string name, int fd, ShmRingHeader* header, size_t capacity)
    : name_(std::move(name)), fd_(fd), header_(header), capacity_(capacity) {}

void ShmRing::RemoveThisProcesssRings() {
  const int self = ::getpid();
  ForEachRing([self](const std::string& name) {
    if (PidOf(name) == self) ::shm_unlink(name.c_str());
  });
}

ShmRing::~ShmRing() {
  ::munmap(header_, kHeaderBytes + capacity_);
  ::shm_unlink(name_.c_str());
  ::close(fd_);
}

uint64_t ShmRing::Offer() {
  absl::BitGen gen;
  session_ = absl::Uniform<uint64_t>(gen, 1, uint64_t{1} << 62) * 2;  // even, never 0
  {
    absl::MutexLock lock(&mu_);
    header_->begin = received_end_;
  }
  header_->session.store(session_, std::memory_order_release);
  return session_;
}

bool ShmRing::Reclaim() {
  uint64_t expected = session_;
  return header_->session.compare_exchange_strong(expected, 0, std::memory_order_acq_rel) || expected == 0;
}

absl::StatusOr<std::shared_ptr<void>> ShmRing::Hold(uint64_t end) {
  {
    absl::MutexLock lock(&mu_);
    if (end <= received_end_ || end - released_ > capacity_) {
      return absl::DataLossError(absl::StrCat("malformed batch message: its shared-memory bytes end at ", end,
                                              ", the ring holds ", released_, " to ", released_ + capacity_,
                                              " and the message before ended at ", received_end_));
    }
    held_begin_ = received_end_;
    received_end_ = end;
    held_.push_back(Held{end, false});
  }
  // Points at the ring, owning nothing: its deleter, run when the last
  // holder goes, gives the message's bytes back.
  return std::shared_ptr<void>(this, [ring = shared_from_this(), end](void*) { ring->Done(end); });
}

absl::StatusOr<uint8_t*> ShmRing::At(uint64_t position, uint64_t size, uint64_t end) {
  absl::MutexLock lock(&mu_);
  if (position < held_begin_ || size > end - position || end > received_end_ ||
      position % capacity_ + size > capacity_) {
    return absl::DataLossError(absl::StrCat("malformed batch message: a column's ", size,
                                            " bytes at shared-memory position ", position,
                                            " lie outside its message's, which end at ", end));
  }
  return reinterpret_cast<uint8_t*>(header_) + kHeaderBytes + position % capacity_;
}

void ShmRing::Done(uint64_t end) {
  absl::MutexLock lock(&mu_);
  for (Held& h : held_) {
    if (h.end == end && !h.done) {
      h.done = true;
      break;
    }
  }
  while (!held_.empty() && held_.front().done) {
    released_ = held_.front().end;
    held_.pop_front();
  }
  header_->released.store(released_, std::memory_order_release);
}

uint64_t ShmRing::released() const {
  absl::MutexLock lock(&mu_);
  return released_;
}

// A worker's mapping of a client's ring. Kept across the client's streams
// (one per epoch): mapped anew per stream, the page faults of the first
// writes into each page cost more than the copies (and populating the
// whole mapping at once, 45 ms for 64 MiB, would delay the first batch).
struct ShmRingWriter::Mapping {
  std::string name;
  ShmRingHeader* header = nullptr;
  size_t size = 0;
  ~Mapping() { ::munmap(header, size); }
};

namespace {

// The worker's mappings, most recently used first; a mapping leaves when
// its ring is removed (its client is done with it) or the list is full.
class Mappings {
 public:
  static Mappings& Get() {
    static Mappings* mappings = new Mappings();
    return *mappings;
  }

  absl::StatusOr<std::shared_ptr<ShmRingWriter::Mapping>> Map(const std::string& name) {
    absl::MutexLock lock(&mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if ((*it)->name != name) continue;
      std::shared_ptr<ShmRingWriter::Mapping> found = *it;
      lru_.erase(it);
      lru_.push_front(found);
      return found;
    }
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return io::ErrnoStatus(errno, "cannot open shared-memory ring", "/dev/shm" + name);
    auto mapping = std::make_shared<ShmRingWriter::Mapping>();
    mapping->name = name;
    struct stat st;
    const bool sized = ::fstat(fd, &st) == 0 && st.st_size > static_cast<off_t>(kHeaderBytes);
    void* mapped = MAP_FAILED;
    if (sized) {
      mapping->size = static_cast<size_t>(st.st_size);
      mapped = ::mmap(nullptr, mapping->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    const int mapped_errno = errno;
    ::close(fd);
    if (!sized) return absl::FailedPreconditionError(absl::StrCat("/dev/shm", name, " is no shared-memory ring"));
    if (mapped == MAP_FAILED) {
      return io::ErrnoStatus(mapped_errno, "cannot map shared-memory ring", "/dev/shm" + name);
    }
    mapping->header = static_cast<ShmRingHeader*>(mapped);
    lru_.push_front(mapping);
    if (lru_.size() > kMaxMappings) lru_.pop_back();
    return mapping;
  }

  void ForgetRemoved() {
    absl::MutexLock lock(&mu_);
    lru_.remove_if([](const std::shared_ptr<ShmRingWriter::Mapping>& m) {
      return ::access(("/dev/shm" + m->name).c_str(), F_OK) != 0;
    });
  }

 private:
  static constexpr size_t kMaxMappings = 16;
  absl::Mutex mu_;
  std::list<std::shared_ptr<ShmRingWriter::Mapping>> lru_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShmRingWriter>> ShmRingWriter::Claim(const std::string& name, uint64_t session) {
  // Only a ring's name: a request must not make a worker write elsewhere.
  if (name.rfind(absl::StrCat("/", kPrefix), 0) != 0 || name.find('/', 1) != std::string::npos || session == 0 ||
      session % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("not a shared-memory ring: '", name, "' session ", session));
  }
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> mapping, Mappings::Get().Map(name));
  ShmRingHeader* header = mapping->header;
  uint64_t expected = session;
  if (header->magic != kMagic || header->capacity != mapping->size - kHeaderBytes ||
      !header->session.compare_exchange_strong(expected, session + 1, std::memory_order_acq_rel)) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared-memory ring /dev/shm", name, " is not offered to session ", session));
  }
  return std::unique_ptr<ShmRingWriter>(new ShmRingWriter(std::move(mapping), session));
}

void ShmRingWriter::ReleaseRingsOfGoneClients() {
  RemoveOrphans();
  Mappings::Get().ForgetRemoved();
}

ShmRingWriter::ShmRingWriter(std::shared_ptr<Mapping> mapping, uint64_t session)
    : mapping_(std::move(mapping)),
      header_(mapping_->header),
      capacity_(mapping_->size - kHeaderBytes),
      session_(session),
      next_(header_->begin) {}

ShmRingWriter::~ShmRingWriter() {
  uint64_t claimed = session_ + 1;
  header_->session.compare_exchange_strong(claimed, 0, std::memory_order_acq_rel);
  RemoveIfOrphan(mapping_->name);  // the stream ended because its client died
}

std::optional<uint64_t> ShmRingWriter::Reserve(uint64_t size) {
  if (size == 0 || size > capacity_) return std::nullopt;
  uint64_t position = next_;
  if (position % capacity_ + size > capacity_) position += capacity_ - position % capacity_;  // the next lap
  // A client that gives back more than it received only harms itself.
  if (position + size - header_->released.load(std::memory_order_acquire) > capacity_) return std::nullopt;
  next_ = position + size;
  return position;
}

std::optional<uint64_t> ShmRingWriter::ReserveWithin(uint64_t size, absl::Duration patience) {
  if (size == 0 || size > capacity_) return std::nullopt;
  const absl::Time deadline = absl::Now() + patience;
  absl::Duration pause = absl::Microseconds(20);
  while (true) {
    if (std::optional<uint64_t> at = Reserve(size)) return at;
    const uint64_t released = header_->released.load(std::memory_order_acquire);
    if (released == released_when_waited_) return std::nullopt;  // held: waiting would not help
    if (absl::Now() >= deadline) {
      released_when_waited_ = released;
      return std::nullopt;
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(2));
  }
}

uint8_t* ShmRingWriter::At(uint64_t position) const {
  return reinterpret_cast<uint8_t*>(header_) + kHeaderBytes + position % capacity_;
}

}  // namespace sluice::service
