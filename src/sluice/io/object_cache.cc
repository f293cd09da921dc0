#include "sluice/io/object_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "sluice/io/crc32c.h"

namespace sluice::io {
namespace {

// An entry is the object's bytes, then its URL, then this trailer: what
// was cached, and the CRC32C of the bytes.
struct Trailer {
  int64_t size;
  int64_t modified_s;
  uint64_t magic;
  uint32_t url_bytes;
  uint32_t crc;
};
static_assert(sizeof(Trailer) == 32, "no padding: every byte written is defined");
constexpr uint64_t kMagic = 0x3143454349554c53ull;  // "SLUICEC1"
constexpr char kPartMark[] = ".part-";
constexpr size_t kCopyBytes = size_t{1} << 20;

// FNV-1a: a name that is the same in every process sharing the folder.
uint64_t StableHash(absl::string_view text, uint64_t h = 1469598103934665603ull) {
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

absl::Status WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return absl::ErrnoToStatus(errno, "write");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

bool ReadAllAt(int fd, uint64_t offset, size_t n, void* dst) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

// Now, as an entry's access time: later than every earlier stamp of this
// process, though the clock's ticks are coarser than opens.
struct timespec UseStamp() {
  static std::atomic<int64_t> last{0};
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  int64_t ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
  int64_t seen = last.load();
  while (!last.compare_exchange_weak(seen, std::max(ns, seen + 1))) {
  }
  ns = std::max(ns, seen + 1);
  return {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

// A cached copy, read as the object itself: path() is the object's URL.
class CachedFile : public RandomAccessFile {
 public:
  CachedFile(std::string url, uint64_t size, int fd, std::string local)
      : RandomAccessFile(std::move(url), size), fd_(fd), local_(std::move(local)) {}
  ~CachedFile() override { ::close(fd_); }

  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, void* dst) const override {
    if (offset >= size()) return 0;
    n = static_cast<size_t>(std::min<uint64_t>(n, size() - offset));
    errno = 0;
    if (!ReadAllAt(fd_, offset, n, dst)) {
      // No errno: the copy ends early, cut since it was checked.
      const std::string why = errno != 0 ? std::strerror(errno) : "it is shorter than when it was checked";
      return absl::DataLossError(
          absl::StrCat("cannot read ", n, " bytes at offset ", offset, " of the cached copy ", local_, " of ", path(),
                       ": ", why, "; a pipeline made again finds the copy unsound and fetches the object again"));
    }
    return n;
  }

 private:
  int fd_;
  std::string local_;
};

// What identifies a file's content without reading it: its inode, length
// and modification time (a write changes it; marking an entry used sets
// only its access time).
std::string Identity(const std::string& path, const struct stat& st) {
  return absl::StrCat(path, ":", st.st_ino, ":", st.st_size, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
}

// Whether `name` is an entry's: 16 hex digits (EntryPath). Any other file
// in the folder is the user's, never counted nor removed: one pointed at a
// folder of checkpoints deleted them to make room.
bool IsEntryName(absl::string_view name) {
  return name.size() == 16 && std::all_of(name.begin(), name.end(), [](char c) { return absl::ascii_isxdigit(c); });
}

// Whether an object modified at `version` may still be rewritten within
// the same second: a rewrite of the same length then has the same version,
// and its cached copy would be served to every later job. Read, not cached.
bool Settling(const ObjectVersion& version) {
  constexpr int64_t kSettledSeconds = 2;
  return version.modified_s > 0 && absl::ToUnixSeconds(absl::Now()) - version.modified_s < kSettledSeconds;
}

// The pid in a partial entry's name, or 0 (also for a file of the user's).
pid_t PartOwner(absl::string_view name) {
  const size_t mark = name.find(kPartMark);
  if (mark == absl::string_view::npos || !IsEntryName(name.substr(0, mark))) return 0;
  absl::string_view rest = name.substr(mark + sizeof(kPartMark) - 1);
  int64_t pid = 0;
  return absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) ? static_cast<pid_t>(pid) : 0;
}

struct Entry {
  std::string path;
  int64_t bytes;
  struct timespec used;
};

struct Folder {
  std::vector<Entry> entries;  // complete
  int64_t filling_bytes = 0;   // the entries live processes are copying in, at their final length
};

// What the folder holds; partial entries of processes that are gone are
// removed on the way.
Folder ScanFolder(const std::string& dir) {
  Folder folder;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return folder;
  while (const struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = absl::StrCat(dir, "/", name);
    struct stat st;
    if (const pid_t owner = PartOwner(name); owner != 0) {
      if (::kill(owner, 0) != 0 && errno == ESRCH) {
        ::unlink(path.c_str());
      } else if (::stat(path.c_str(), &st) == 0) {
        folder.filling_bytes += static_cast<int64_t>(st.st_size);
      }
      continue;
    }
    if (IsEntryName(name) && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      folder.entries.push_back(Entry{path, static_cast<int64_t>(st.st_size), st.st_atim});
    }
  }
  ::closedir(d);
  return folder;
}

// Whether no open of `path` is under way (mu_ held).
struct NotOpening {
  const absl::flat_hash_set<std::string>* opening;
  const std::string* path;
  static bool Holds(NotOpening* n) { return !n->opening->contains(*n->path); }
};

absl::Mutex configure_mu;
std::shared_ptr<ObjectCache>* the_cache = nullptr;

}  // namespace

absl::Status ObjectCache::Configure(const std::string& dir, int64_t max_bytes) {
  if (max_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("object cache ", dir, ": max_bytes must be > 0, got ", max_bytes));
  }
  absl::MutexLock lock(&configure_mu);
  if (the_cache != nullptr && (*the_cache)->dir_ == dir && (*the_cache)->max_bytes_ == max_bytes) {
    return absl::OkStatus();
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || ::access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("object cache: cannot make or write the folder ", dir, ": ",
                                                   ec ? ec.message() : std::strerror(errno)));
  }
  auto cache = std::shared_ptr<ObjectCache>(new ObjectCache(dir, max_bytes));
  int64_t held = 0;
  for (const Entry& e : ScanFolder(dir).entries) held += e.bytes;
  cache->stats_.bytes = held;
  // A folder filled under a larger bound (an earlier job's) is cut to this
  // one now: hits alone would never make room.
  if (held > max_bytes) cache->MakeRoom(0);
  if (the_cache == nullptr) the_cache = new std::shared_ptr<ObjectCache>();
  *the_cache = std::move(cache);
  return absl::OkStatus();
}

std::shared_ptr<ObjectCache> ObjectCache::Get() {
  absl::MutexLock lock(&configure_mu);
  return the_cache == nullptr ? nullptr : *the_cache;
}

std::string ObjectCache::EntryPath(const std::string& url, const ObjectVersion& version) const {
  const uint64_t h = StableHash(absl::StrCat(version.size, ":", version.modified_s), StableHash(url));
  return absl::StrFormat("%s/%016x", dir_, h);
}

void ObjectCache::Count(int64_t Stats::* counter, int64_t n) {
  absl::MutexLock lock(&mu_);
  stats_.*counter += n;
}

ObjectCache::Stats ObjectCache::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

std::unique_ptr<RandomAccessFile> ObjectCache::Find(const std::string& path, const std::string& url,
                                                    const ObjectVersion& version) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  Trailer t{};
  const uint64_t size = static_cast<uint64_t>(version.size);
  const uint64_t entry_bytes = size + url.size() + sizeof(Trailer);
  bool sound = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == entry_bytes &&
               ReadAllAt(fd, size + url.size(), sizeof(t), &t) && t.magic == kMagic && t.size == version.size &&
               t.modified_s == version.modified_s && t.url_bytes == url.size();
  if (sound) {
    std::string stored(url.size(), '\0');
    sound = ReadAllAt(fd, size, url.size(), stored.data()) && stored == url;
  }
  const std::string identity = sound ? Identity(path, st) : "";
  bool checked = false;
  if (sound) {
    absl::MutexLock lock(&mu_);
    checked = checked_.contains(identity);
  }
  if (sound && !checked) {
    std::vector<char> buf(std::min<uint64_t>(kCopyBytes, std::max<uint64_t>(size, 1)));
    uint32_t crc = 0;
    for (uint64_t off = 0; sound && off < size; off += buf.size()) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
      sound = ReadAllAt(fd, off, n, buf.data());
      crc = Crc32cExtend(crc, buf.data(), n);
    }
    sound = sound && crc == t.crc;
    if (sound) {
      absl::MutexLock lock(&mu_);
      checked_.insert(identity);
    }
  }
  if (!sound) {
    const bool sized = ::fstat(fd, &st) == 0;
    ::close(fd);
    if (::unlink(path.c_str()) == 0 && sized) {
      absl::MutexLock lock(&mu_);
      stats_.bytes = std::max<int64_t>(0, stats_.bytes - static_cast<int64_t>(st.st_size));  // fetched again
    }
    Count(&Stats::corrupt);
    return nullptr;
  }
  const struct timespec used[2] = {UseStamp(), {0, UTIME_OMIT}};  // least recently used goes first
  ::futimens(fd, used);
  return std::make_unique<CachedFile>(url, size, fd, path);
}

void ObjectCache::MakeRoom(int64_t incoming) {
  {
    absl::MutexLock lock(&mu_);
    filled_since_count_ += incoming;
    if (stats_.bytes + incoming <= max_bytes_ && filled_since_count_ <= max_bytes_ / 8) return;
    filled_since_count_ = 0;
  }
  Folder folder = ScanFolder(dir_);
  std::vector<Entry>& entries = folder.entries;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.used.tv_sec, a.used.tv_nsec) < std::tie(b.used.tv_sec, b.used.tv_nsec);
  });
  int64_t held = folder.filling_bytes;  // copies under way take their room before they land
  for (const Entry& e : entries) held += e.bytes;
  int64_t evicted = 0;
  for (const Entry& e : entries) {
    if (held + incoming <= max_bytes_) break;
    if (::unlink(e.path.c_str()) == 0) {
      held -= e.bytes;
      ++evicted;
    }
  }
  absl::MutexLock lock(&mu_);
  stats_.bytes = held - folder.filling_bytes;
  stats_.evicted += evicted;
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> ObjectCache::Fill(const std::string& path, const std::string& url,
                                                                    const ObjectVersion& version,
                                                                    const RandomAccessFile& object) {
  static std::atomic<int64_t> parts{0};
  const std::string part = absl::StrCat(path, kPartMark, ::getpid(), "-", parts.fetch_add(1));
  const int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  auto abandon = [&] {
    ::close(fd);
    ::unlink(part.c_str());
  };
  const uint64_t size = static_cast<uint64_t>(version.size);
  // At its final length from the start, so that other processes making
  // room count the copy before it lands (the bytes fill in as they come).
  if (::ftruncate(fd, static_cast<off_t>(size + url.size() + sizeof(Trailer))) != 0) {
    abandon();
    return nullptr;
  }
  std::vector<char> buf(kCopyBytes);
  uint32_t crc = 0;
  for (uint64_t off = 0; off < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    absl::Status read = object.ReadExact(off, want, buf.data());
    if (!read.ok()) {
      abandon();
      return read;
    }
    crc = Crc32cExtend(crc, buf.data(), want);
    if (!WriteAll(fd, buf.data(), want).ok()) {
      abandon();
      return nullptr;  // a full or failing disk: read from the store
    }
    off += want;
  }
  const Trailer t{version.size, version.modified_s, kMagic, static_cast<uint32_t>(url.size()), crc};
  if (!WriteAll(fd, url.data(), url.size()).ok() || !WriteAll(fd, &t, sizeof(t)).ok() || ::close(fd) != 0) {
    ::unlink(part.c_str());
    return nullptr;
  }
  struct stat st;
  if (::rename(part.c_str(), path.c_str()) != 0 || ::stat(path.c_str(), &st) != 0) {
    ::unlink(part.c_str());
    return nullptr;
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.bytes += static_cast<int64_t>(st.st_size);
    checked_.insert(Identity(path, st));  // its CRC was taken from the bytes as they came
  }
  return Find(path, url, version);
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> ObjectCache::Open(const std::string& url,
                                                                    const ObjectVersion& version, const Fetch& fetch) {
  const std::string path = EntryPath(url, version);
  {
    // One open of a path at a time looks and fills: an open that looked
    // before another's copy landed would fetch the object again.
    absl::MutexLock lock(&mu_);
    NotOpening other{&opening_, &path};
    mu_.Await(absl::Condition(&NotOpening::Holds, &other));
    opening_.insert(path);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> out = Find(path, url, version);
  if (*out != nullptr) {
    Count(&Stats::hits);
  } else {
    out = FetchAndFill(path, url, version, fetch);
  }
  absl::MutexLock lock(&mu_);
  opening_.erase(path);
  return out;
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> ObjectCache::FetchAndFill(const std::string& path,
                                                                            const std::string& url,
                                                                            const ObjectVersion& version,
                                                                            const Fetch& fetch) {
  Count(&Stats::misses);
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> object = fetch();
  if (!object.ok()) return object.status();
  const int64_t entry_bytes = version.size + static_cast<int64_t>(url.size() + sizeof(Trailer));
  if (entry_bytes > max_bytes_ || Settling(version)) {
    Count(&Stats::uncacheable);
    return object;
  }
  MakeRoom(entry_bytes);
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> copy = Fill(path, url, version, **object);
  if (!copy.ok()) return copy.status();
  if (*copy == nullptr) {
    Count(&Stats::uncacheable);
    return object;
  }
  return copy;
}

}  // namespace sluice::io
