// Opening an object: its version checked against the listing's, its bytes
// read with ranged GETs fetched ahead, or from the process's object cache.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "arrow/util/key_value_metadata.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/background_result.h"
#include "sluice/io/object_cache.h"
#include "sluice/io/object_listing.h"
#include "sluice/io/object_read_ahead.h"
#include "sluice/io/object_store.h"
#include "sluice/io/object_store_arrow.h"
#include "sluice/io/object_store_retry.h"

namespace sluice::io {
namespace {

// What the store says of an opened object.
struct Described {
  ObjectVersion version;
  std::string etag;  // empty when the store did not say
};

std::string MetadataValue(const arrow::KeyValueMetadata* metadata, const std::string& key) {
  if (metadata == nullptr) return "";
  arrow::Result<std::string> value = metadata->Get(key);
  return value.ok() ? *value : "";
}

absl::StatusOr<Described> Describe(arrow::io::RandomAccessFile& in, const std::string& url) {
  arrow::Result<int64_t> size = in.GetSize();
  if (!size.ok()) return ToStatus(size.status(), "cannot size", url);
  arrow::Result<std::shared_ptr<const arrow::KeyValueMetadata>> metadata = in.ReadMetadata();
  const arrow::KeyValueMetadata* m = metadata.ok() ? metadata->get() : nullptr;
  Described d{ObjectVersion{*size, 0}, MetadataValue(m, "ETag")};
  absl::Time modified;
  std::string error;
  if (absl::ParseTime(absl::RFC3339_full, MetadataValue(m, "Last-Modified"), &modified, &error)) {
    d.version.modified_s = absl::ToUnixSeconds(modified);
  }
  return d;
}

absl::StatusOr<std::pair<std::shared_ptr<arrow::io::RandomAccessFile>, Described>> OpenDescribed(
    const std::string& url) {
  absl::StatusOr<std::shared_ptr<arrow::io::RandomAccessFile>> in = OpenArrowObject(url);
  if (!in.ok()) return in.status();
  absl::StatusOr<Described> described = Describe(**in, url);
  if (!described.ok()) return described.status();
  return std::make_pair(*std::move(in), *std::move(described));
}

// What the store says of the object now.
absl::StatusOr<Described> Look(const std::string& url) {
  SLUICE_ASSIGN_OR_RETURN(auto opened, OpenDescribed(url));
  return std::move(opened.second);
}

std::string Said(const ObjectVersion& v) {
  return v.modified_s == 0 ? absl::StrCat(v.size, " bytes")
                           : absl::StrCat(v.size, " bytes written at ",
                                          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(v.modified_s),
                                                           absl::UTCTimeZone()));
}

// DataLoss when the store's object is not the one its listing found.
absl::Status CheckListed(const std::string& url, const ObjectVersion& now) {
  const std::optional<ObjectVersion> listed = ListedVersion(url);
  if (!listed.has_value()) return absl::OkStatus();
  const bool same_time = listed->modified_s == 0 || now.modified_s == 0 || listed->modified_s == now.modified_s;
  if (listed->size == now.size && same_time) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("object ", url, " changed after it was listed: the listing found ",
                                          Said(*listed), ", the store now holds ", Said(now),
                                          "; a dataset must not change while a job reads it"));
}

// A changed ETag is taken from a second look (counted as a retry): a reply
// cut in its headers may lack it.
absl::Status CompareETag(const std::string& url, const std::string& etag) {
  absl::StatusOr<Described> now = Look(url);
  if (now.ok() && now->etag != etag) {
    CountRetry();
    now = Look(url);
  }
  if (absl::IsNotFound(now.status())) {
    return absl::DataLossError(absl::StrCat("object ", url, " changed while being read: it is gone now (",
                                            now.status().message(),
                                            "); a dataset must not change while a job reads it"));
  }
  if (!now.ok()) return now.status();
  if (now->etag == etag) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("object ", url, " changed while being read: its ETag was ", etag,
                                          " when opened and is ", now->etag,
                                          " now; a dataset must not change while a job reads it"));
}

// The ETag checks of an object's GETs, by GET: each asked on a thread of
// its own as soon as its GET came (a reader slower than the store never
// waits for one), and waited for before that GET's bytes go on.
class FetchChecks {
 public:
  using Check = std::shared_ptr<BackgroundResult<absl::Status>>;

  FetchChecks(std::string url, std::string etag) : url_(std::move(url)), etag_(std::move(etag)) {}

  // GET `fetch`'s check, started when it was not yet.
  Check Start(uint64_t fetch) {
    absl::MutexLock lock(&mu_);
    Check& check = checks_[fetch];
    if (check == nullptr) {
      check = BackgroundResult<absl::Status>::Start([url = url_, etag = etag_] { return CompareETag(url, etag); });
    }
    return check;
  }

  // Waits for GET `fetch`'s check. The read-ahead serves its GETs in the
  // order they were made: earlier ones' blocks are gone.
  absl::Status Wait(uint64_t fetch) {
    const Check check = Start(fetch);
    {
      absl::MutexLock lock(&mu_);
      checks_.erase(checks_.begin(), checks_.lower_bound(fetch));
    }
    absl::Status* status = check->Wait();
    return status != nullptr ? *status : absl::CancelledError(absl::StrCat("pipeline stopped reading ", url_));
  }

 private:
  const std::string url_, etag_;
  absl::Mutex mu_;
  std::map<uint64_t, Check> checks_ ABSL_GUARDED_BY(mu_);
};

// An object read with ranged GETs, fetched ahead. An object of more than
// one block is read with several GETs, which a rewrite between them would
// mix: its ETag is asked again after each GET, and no byte of a block goes
// on before the answer for its GET is the ETag the object was opened with.
class ObjectFile : public RandomAccessFile {
 public:
  ObjectFile(std::string url, Described described, std::shared_ptr<arrow::io::RandomAccessFile> in,
             ObjectReadAhead::Options options = ObjectReadAhead::FromEnvironment())
      : RandomAccessFile(std::move(url), static_cast<uint64_t>(described.version.size)),
        described_(std::move(described)),
        checks_(size() > static_cast<uint64_t>(std::min(options.first_block_bytes, options.block_bytes)) &&
                        !described_.etag.empty()
                    ? std::make_shared<FetchChecks>(path(), described_.etag)
                    : nullptr),
        blocks_(std::move(in), size(), options, StartsChecks(checks_)) {}

  const ObjectVersion& version() const { return described_.version; }
  void FetchFirstBlock() { blocks_.FetchFirst(); }

  absl::StatusOr<size_t> Read(uint64_t offset, size_t n, void* dst) const override {
    size_t done = 0;
    while (done < n && offset + done < size()) {
      uint64_t fetch = 0;
      absl::StatusOr<size_t> got = WithRetries([&]() -> absl::StatusOr<size_t> {
        arrow::Result<size_t> read = blocks_.Read(offset + done, n - done, static_cast<uint8_t*>(dst) + done, &fetch);
        if (read.ok()) return *read;
        blocks_.Forget();  // fetch them again
        return ToStatus(read.status(), absl::StrCat("cannot read ", n, " bytes at offset ", offset, " of"), path());
      });
      if (absl::IsNotFound(got.status()) || absl::IsOutOfRange(got.status())) {  // gone, or cut shorter
        return absl::DataLossError(absl::StrCat("object ", path(), " changed while being read: it held ", size(),
                                                " bytes when opened; now ", got.status().message()));
      }
      if (!got.ok()) return got.status();
      if (*got == 0) {
        return absl::DataLossError(absl::StrCat("object ", path(), " changed while being read: it held ", size(),
                                                " bytes when opened and ends before ", offset + done, " now"));
      }
      if (checks_ != nullptr) SLUICE_RETURN_IF_ERROR(checks_->Wait(fetch));
      done += *got;
    }
    return done;
  }

 private:
  static ObjectReadAhead::Fetched StartsChecks(const std::shared_ptr<FetchChecks>& checks) {
    if (checks == nullptr) return nullptr;
    return [checks](uint64_t fetch) { checks->Start(fetch); };
  }

  const Described described_;
  const std::shared_ptr<FetchChecks> checks_;  // none: one GET, or no ETag to compare
  mutable ObjectReadAhead blocks_;
};

// The store's object through Arrow's file system, its version checked
// against the listing's: a size of 0 or a version that differs is taken
// from a second look, counted as a retry (a reply cut after its date
// reads as 0 bytes).
absl::StatusOr<std::pair<std::shared_ptr<arrow::io::RandomAccessFile>, Described>> OpenListed(const std::string& url) {
  absl::StatusOr<std::pair<std::shared_ptr<arrow::io::RandomAccessFile>, Described>> opened = OpenDescribed(url);
  if (opened.ok() && (opened->second.version.size == 0 || !CheckListed(url, opened->second.version).ok())) {
    CountRetry();
    opened = OpenDescribed(url);
  }
  if (!opened.ok()) return opened.status();
  SLUICE_RETURN_IF_ERROR(CheckListed(url, opened->second.version));
  return opened;
}

absl::StatusOr<std::unique_ptr<ObjectFile>> OpenFromStore(const std::string& url) {
  SLUICE_ASSIGN_OR_RETURN(auto listed, OpenListed(url));
  return std::make_unique<ObjectFile>(url, std::move(listed.second), std::move(listed.first));
}

// An object being opened ahead of its reader.
struct OpenedAhead {
  std::string url;
  std::shared_ptr<BackgroundResult<absl::StatusOr<std::unique_ptr<ObjectFile>>>> file;
};

// The AWS client's own retries of a request take 6.3 s.
constexpr absl::Duration kReopenWait = absl::Seconds(7);

// The objects opened ahead and not yet taken, while their sources hold
// them. Leaked: an open may still run on its thread when the process exits.
std::mutex ahead_mu;
auto* const opened_ahead = new std::vector<std::weak_ptr<OpenedAhead>>;
std::atomic<int64_t> taken_ahead{0};

// The object at `url` opened ahead, waited for while it is still opening
// (unless this thread's pipeline is cancelled); null when there is none or
// its open failed (the caller opens it again, and reports the error);
// Unavailable when it found the store unavailable through its timeout.
absl::StatusOr<std::unique_ptr<ObjectFile>> TakeOpenedAhead(const std::string& url) {
  std::shared_ptr<OpenedAhead> entry;
  {
    std::lock_guard<std::mutex> lock(ahead_mu);
    for (auto it = opened_ahead->begin(); it != opened_ahead->end(); ++it) {
      std::shared_ptr<OpenedAhead> e = it->lock();
      if (e == nullptr || e->url != url) continue;
      entry = std::move(e);
      opened_ahead->erase(it);
      break;
    }
  }
  if (entry == nullptr) return nullptr;
  absl::StatusOr<std::unique_ptr<ObjectFile>>* file = entry->file->Wait();
  if (file != nullptr && absl::IsUnavailable(file->status())) return file->status();
  if (file == nullptr || !file->ok()) return nullptr;
  taken_ahead.fetch_add(1, std::memory_order_relaxed);
  return *std::move(*file);
}

}  // namespace

std::shared_ptr<const void> OpenObjectAhead(const std::string& url) {
  if (!IsObjectUrl(url) || ListedAbsent(url) || ObjectCache::Get() != nullptr) return nullptr;
  auto entry = std::make_shared<OpenedAhead>();
  entry->url = url;
  entry->file = BackgroundResult<absl::StatusOr<std::unique_ptr<ObjectFile>>>::Start([url] {
    absl::StatusOr<std::unique_ptr<ObjectFile>> file = OpenFromStore(url);
    if (file.ok()) (*file)->FetchFirstBlock();
    return file;
  });
  std::lock_guard<std::mutex> lock(ahead_mu);
  opened_ahead->erase(std::remove_if(opened_ahead->begin(), opened_ahead->end(),
                                     [](const std::weak_ptr<OpenedAhead>& e) { return e.expired(); }),
                      opened_ahead->end());
  opened_ahead->push_back(entry);
  return entry;
}

int64_t ObjectsOpenedAhead() { return taken_ahead.load(std::memory_order_relaxed); }

absl::StatusOr<ArrowObject> OpenListedArrowObject(const std::string& url) {
  SLUICE_ASSIGN_OR_RETURN(auto listed, OpenListed(url));
  ArrowObject object{std::move(listed.first), nullptr};
  if (!listed.second.etag.empty()) {
    object.unchanged = [url, etag = listed.second.etag] { return CompareETag(url, etag); };
  }
  return object;
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenObject(const std::string& url) {
  if (ListedAbsent(url)) {
    return absl::NotFoundError(absl::StrCat("object not found: '", url, "' (not in the listing of its folder)"));
  }
  const std::shared_ptr<ObjectCache> cache = ObjectCache::Get();  // held through the open
  const std::optional<ObjectVersion> listed = ListedVersion(url);
  // Listed: a cached copy of that version is read without asking the store.
  if (cache != nullptr && listed.has_value()) {
    return cache->Open(url, *listed,
                       [&]() -> absl::StatusOr<std::unique_ptr<RandomAccessFile>> { return OpenFromStore(url); });
  }
  // Without a cache, an object opened ahead is taken (OpenObjectAhead opens none with one).
  absl::StatusOr<std::unique_ptr<ObjectFile>> ahead = TakeOpenedAhead(url);
  if (ahead.ok() && *ahead != nullptr) return std::unique_ptr<RandomAccessFile>(std::move(*ahead));
  // The store unavailable to the open ahead through its timeout: another
  // try with the client's own retries (it may be back, and busy), not
  // another timeout's wait.
  std::optional<ScopedRetryDeadline> short_wait;
  if (!ahead.ok()) short_wait.emplace(absl::Now() + kReopenWait);
  absl::StatusOr<std::unique_ptr<ObjectFile>> object = OpenFromStore(url);
  if (!object.ok() && short_wait && absl::IsUnavailable(object.status())) {
    return absl::UnavailableError(absl::StrCat(object.status().message(),
                                               "; opened ahead before, it had found the "
                                               "store unavailable through the store's timeout"));
  }
  if (!object.ok()) return object.status();
  if (cache == nullptr) return *std::move(object);
  const ObjectVersion version = (*object)->version();
  return cache->Open(url, version, [&]() -> absl::StatusOr<std::unique_ptr<RandomAccessFile>> {
    return std::unique_ptr<RandomAccessFile>(std::move(*object));
  });
}

}  // namespace sluice::io
