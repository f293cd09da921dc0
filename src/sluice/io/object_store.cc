#include "sluice/io/object_store.h"

#include <fnmatch.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "arrow/filesystem/filesystem.h"
#include "arrow/filesystem/gcsfs.h"
#include "arrow/filesystem/s3fs.h"
#include "arrow/io/interfaces.h"
#include "arrow/memory_pool.h"
#include "arrow/util/io_util.h"
#include "arrow/util/key_value_metadata.h"
#include "sluice/core/environment_number.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/aws_config.h"
#include "sluice/io/object_listing.h"
#include "sluice/io/object_store_arrow.h"
#include "sluice/io/object_store_retry.h"
#include "sluice/io/object_url.h"
#include "sluice/io/path_pattern.h"

namespace sluice::io {
namespace {

std::atomic<int64_t> retries{0};

// The AWS client's own retries (a 5xx, a throttle, a connection refused or
// reset), counted, with the project's backoff: 100 ms doubling, six times
// (6.3 s in all) before the failure reaches WithRetries.
class CountedS3Retries : public arrow::fs::S3RetryStrategy {
 public:
  bool ShouldRetry(const AWSErrorDetail& error, int64_t attempted_retries) override {
    if (!error.should_retry || attempted_retries >= kRetries) return false;
    if (absl::Now() + absl::Milliseconds(Delay(attempted_retries)) > RetryDeadline()) return false;
    CountRetry();
    return true;
  }
  int64_t CalculateDelayBeforeNextRetry(const AWSErrorDetail&, int64_t attempted_retries) override {
    return Delay(attempted_retries);
  }

 private:
  static int64_t Delay(int64_t attempted_retries) { return int64_t{100} << std::min<int64_t>(attempted_retries, 5); }

  static constexpr int64_t kRetries = 6;
};

// Takes `anonymous=true` (public buckets) or `=false` out of the URL's
// query, where Arrow's URLs have no such option; whether it was true.
bool TakeAnonymous(ObjectUrl* u) {
  std::vector<std::string> params = absl::StrSplit(u->query, '&', absl::SkipEmpty());
  const bool anonymous = std::find(params.begin(), params.end(), "anonymous=true") != params.end();
  params.erase(std::remove_if(params.begin(), params.end(),
                              [](const std::string& p) { return absl::StartsWith(p, "anonymous="); }),
               params.end());
  u->query = absl::StrJoin(params, "&");
  return anonymous;
}

// The blocks read from a store come from the C library's heap, which keeps
// what is freed for the next block (heap_reuse.h). Arrow's default pool
// (mimalloc in pyarrow's wheel) hands each 8 MiB block back to the kernel,
// and zeroing the pages of every block anew took 11% of W2's CPU on
// objects (bench/RESULTS.md).
arrow::io::IOContext BlockIoContext() { return arrow::io::IOContext(arrow::system_memory_pool()); }

// The AWS SDK checks each GET's body against the checksum a store may
// send with it ("when_supported"). A ranged GET, which is all sluice
// sends, comes without one, yet the check spells out each checksum
// header's name for every 16 KiB the body arrives in: a third of the CPU
// of reading CIFAR's TFRecords from SeaweedFS (bench/RESULTS.md). Unless
// the user chose, the client is made with "when_required"; the
// environment, which the SDK reads as a client is made, is put back at
// once, so that other S3 clients in the process keep their default.
class ResponseChecksumsWhenRequired {
 public:
  ResponseChecksumsWhenRequired() {
    if (std::getenv(kVariable) == nullptr) set_ = ::setenv(kVariable, "when_required", 0) == 0;
  }
  ~ResponseChecksumsWhenRequired() {
    if (set_) ::unsetenv(kVariable);
  }
  ResponseChecksumsWhenRequired(const ResponseChecksumsWhenRequired&) = delete;
  ResponseChecksumsWhenRequired& operator=(const ResponseChecksumsWhenRequired&) = delete;

 private:
  static constexpr char kVariable[] = "AWS_RESPONSE_CHECKSUM_VALIDATION";
  bool set_ = false;
};

// The S3 stores' clients that sign their requests, by s3://bucket: asked,
// once a store refused one, whether their credential chain found any.
std::mutex signing_mu;
auto* const signing = new std::map<std::string, std::shared_ptr<arrow::fs::S3FileSystem>>;

std::string BucketOf(absl::string_view url) {
  const size_t host = url.find("://");
  if (host == absl::string_view::npos) return "";
  return std::string(url.substr(0, url.find_first_of("/?", host + 3)));
}

// Why a store may have refused `url`: the credentials its client found, or
// none found (in the environment, a profile file or the machine's role).
std::string RefusalHint(absl::string_view url) {
  const std::string bucket = BucketOf(url);
  std::shared_ptr<arrow::fs::S3FileSystem> fs;
  {
    std::lock_guard<std::mutex> lock(signing_mu);
    if (auto it = signing->find(bucket); it != signing->end()) fs = it->second;
  }
  if (fs == nullptr) return "";
  if (!fs->options().GetAccessKey().empty()) {
    return " (the store refused the credentials found: wrong ones for this store, or ones not allowed to read "
           "this; a HEAD's refusal carries no reason)";
  }
  const char* profile = std::getenv("AWS_PROFILE");
  if (profile != nullptr && *profile != '\0') {
    return absl::StrCat(" (no credentials were found for ", bucket, ": AWS_PROFILE is '", profile,
                        "', and ~/.aws/credentials and ~/.aws/config gave none for it)");
  }
  return absl::StrCat(" (no credentials were found for ", bucket,
                      ": set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE, or write "
                      "~/.aws/credentials; a public bucket is read with ?anonymous=true)");
}

// The endpoint the AWS profile names, as Arrow's URL options, for a URL
// that names none (before Arrow looks up the bucket's region at AWS).
void UseConfiguredEndpoint(ObjectUrl& u) {
  if (absl::StrContains(u.query, "endpoint_override=")) return;
  std::string endpoint = ConfiguredS3EndpointOfThisProcess();
  if (endpoint.empty()) return;
  std::string scheme = "https";
  for (const char* given : {"http", "https"}) {
    if (absl::StartsWithIgnoreCase(endpoint, absl::StrCat(given, "://"))) {
      scheme = given;
      endpoint.erase(0, scheme.size() + 3);
    }
  }
  while (absl::EndsWith(endpoint, "/")) endpoint.pop_back();
  absl::StrAppend(&u.query, u.query.empty() ? "" : "&", "endpoint_override=", endpoint, "&scheme=", scheme);
}

// Arrow's options from the URL. S3's client retries as CountedS3Retries
// says; Google's stops after 10 s. WithRetries goes on to the store's
// timeout.
arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> MakeFileSystem(ObjectUrl u) {
  const bool anonymous = TakeAnonymous(&u);
  if (u.scheme == "s3") UseConfiguredEndpoint(u);
  const std::string url = u.Url(u.bucket);
  if (u.scheme == "s3") {
    ARROW_RETURN_NOT_OK(arrow::fs::EnsureS3Initialized());
    ARROW_ASSIGN_OR_RAISE(arrow::fs::S3Options options, arrow::fs::S3Options::FromUri(url));
    if (anonymous) options.ConfigureAnonymousCredentials();
    options.retry_strategy = std::make_shared<CountedS3Retries>();
    const ResponseChecksumsWhenRequired checksums;
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::fs::S3FileSystem> fs,
                          arrow::fs::S3FileSystem::Make(options, BlockIoContext()));
    if (!anonymous) {
      std::lock_guard<std::mutex> lock(signing_mu);
      (*signing)[BucketOf(url)] = fs;
    }
    return fs;
  }
  ARROW_ASSIGN_OR_RAISE(arrow::fs::GcsOptions options, arrow::fs::GcsOptions::FromUri(url, nullptr));
  if (anonymous) options.credentials = arrow::fs::GcsOptions::Anonymous().credentials;
  if (url.find("retry_limit_seconds=") == std::string::npos) options.retry_limit_seconds = 10;
  return arrow::fs::GcsFileSystem::Make(options, BlockIoContext());
}

// One file system per bucket and options, made once: making one resolves
// credentials (and, for S3 without an endpoint, the bucket's region).
absl::StatusOr<std::shared_ptr<arrow::fs::FileSystem>> FileSystemFor(const ObjectUrl& u) {
  static std::mutex mu;
  static auto* made = new std::map<std::string, std::shared_ptr<arrow::fs::FileSystem>>();
  const std::string key = u.Url(u.bucket);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = made->find(key); it != made->end()) return it->second;
  arrow::Result<std::shared_ptr<arrow::fs::FileSystem>> fs = MakeFileSystem(u);
  if (u.scheme == "s3") {
    // The AWS SDK must be shut down before the process exits, or it may
    // crash there. Registered once a client was made, or refused (options
    // Arrow refuses still start the SDK), so that it runs before the statics
    // making one created go (and Arrow's check at exit); idempotent beside
    // pyarrow's own finalizer.
    static const bool finalized_at_exit = std::atexit([] { (void)arrow::fs::EnsureS3Finalized(); }) == 0;
    (void)finalized_at_exit;
  }
  if (!fs.ok()) return ToStatus(fs.status(), "cannot reach the store of", key);
  made->emplace(key, *fs);
  return *fs;
}

// An HTTP client takes a reply that ends in its headers as whole (curl does
// so for a HEAD): the headers that never came read as size 0 and no date.
// S3 stores send an object's Last-Modified, so a description without it
// was likely cut short, and is asked again twice (`*asked` counts); a
// store that never sends one is then taken at its word.
absl::Status WholeDescription(const ObjectUrl& u, bool dated, const std::string& url, int* asked) {
  if (u.scheme != "s3" || dated || ++*asked > 2) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("the store's reply describing ", url, " ended before its Last-Modified header"));
}

// The object's FileInfo from the store (a HEAD), with retries.
absl::StatusOr<arrow::fs::FileInfo> LookUp(arrow::fs::FileSystem& fs, const ObjectUrl& u, const std::string& what) {
  int undated = 0;
  return WithRetries([&]() -> absl::StatusOr<arrow::fs::FileInfo> {
    arrow::Result<arrow::fs::FileInfo> looked_up = fs.GetFileInfo(u.Path());
    if (!looked_up.ok()) return ToStatus(looked_up.status(), "cannot look up", what);
    const bool dated = looked_up->mtime().time_since_epoch().count() > 0;
    if (looked_up->IsFile()) SLUICE_RETURN_IF_ERROR(WholeDescription(u, dated, what, &undated));
    return *looked_up;
  });
}

ObjectVersion VersionOf(const arrow::fs::FileInfo& info) {
  const int64_t since_epoch = std::chrono::duration_cast<std::chrono::seconds>(info.mtime().time_since_epoch()).count();
  return ObjectVersion{info.size(), std::max<int64_t>(since_epoch, 0)};
}

// The sorted URLs of the objects under `dir` (and deeper when
// `recursive`) whose paths `keep` accepts, with the folders' (ending in
// '/') when `folders`; errors name `what`.
template <typename Keep>
absl::StatusOr<std::vector<std::string>> ListMatching(arrow::fs::FileSystem& fs, const ObjectUrl& u,
                                                      const std::string& dir, bool recursive, Keep keep,
                                                      const std::string& what, bool folders = false) {
  arrow::fs::FileSelector selector;
  selector.base_dir = dir;
  selector.recursive = recursive;
  selector.allow_not_found = true;
  absl::StatusOr<std::vector<arrow::fs::FileInfo>> infos =
      WithRetries([&]() -> absl::StatusOr<std::vector<arrow::fs::FileInfo>> {
        arrow::Result<std::vector<arrow::fs::FileInfo>> listed = fs.GetFileInfo(selector);
        if (!listed.ok()) return ToStatus(listed.status(), "cannot list", what);
        return *std::move(listed);
      });
  if (!infos.ok()) return infos.status();
  std::vector<std::string> urls;
  for (const arrow::fs::FileInfo& info : *infos) {
    if (!info.IsFile()) {
      if (folders && info.IsDirectory()) urls.push_back(u.Url(info.path() + "/"));
      continue;
    }
    std::string url = u.Url(info.path());
    RememberListed(url, VersionOf(info));
    if (keep(info.path())) urls.push_back(std::move(url));
  }
  RememberListedFolder(u.Url(dir), recursive);
  std::sort(urls.begin(), urls.end());
  return urls;
}

// NotFound for a listing that found nothing: `message`, and the bucket
// named when it is the bucket that is missing (a listing under a missing
// bucket finds nothing, like one under an empty prefix).
absl::Status NothingListed(arrow::fs::FileSystem& fs, const ObjectUrl& u, const std::string& message) {
  arrow::Result<arrow::fs::FileInfo> bucket = fs.GetFileInfo(u.bucket);
  if (bucket.ok() && bucket->type() == arrow::fs::FileType::NotFound) {
    return absl::NotFoundError(absl::StrCat(message, ": the store has no bucket '", u.bucket, "'"));
  }
  return absl::NotFoundError(message);
}

// Google's client fails so when it cannot get an access token: no
// credentials found (without a metadata server to ask), or a key file that
// cannot be read. Retrying does not help, however the client words it.
constexpr char kNoGoogleToken[] = "Could not create a OAuth2 access token";

absl::Status NoGoogleToken(const std::string& message, absl::string_view what, absl::string_view url) {
  constexpr char kWhy[] = "The underlying error message was: ";
  std::string why = "no credentials were found";
  if (const size_t at = message.find(kWhy); at != std::string::npos) {
    const size_t from = at + sizeof(kWhy) - 1;
    why = message.substr(from, message.find(" error_info=", from) - from);
  }
  return absl::PermissionDeniedError(
      absl::StrCat(what, " ", url, ": Google's client could not get an access token (", why,
                   "): set GOOGLE_APPLICATION_CREDENTIALS to a service account's key file, or run `gcloud auth "
                   "application-default login`; a public bucket is read with ?anonymous=true"));
}

}  // namespace

absl::Duration ObjectStoreTimeout() {
  static const absl::Duration timeout = absl::Seconds(DoubleFromEnvironment("SLUICE_OBJECT_STORE_TIMEOUT_S", 60, 0));
  return timeout;
}

int64_t ObjectStoreRetries() { return retries.load(std::memory_order_relaxed); }

void CountRetry() { retries.fetch_add(1, std::memory_order_relaxed); }

namespace {
thread_local absl::Time retry_deadline = absl::InfiniteFuture();
}  // namespace

absl::Time RetryDeadline() { return retry_deadline; }

ScopedRetryDeadline::ScopedRetryDeadline(absl::Time deadline) : before_(retry_deadline) {
  retry_deadline = std::min(before_, deadline);
}

ScopedRetryDeadline::~ScopedRetryDeadline() { retry_deadline = before_; }

absl::Status ToStatus(const arrow::Status& st, absl::string_view what, absl::string_view url) {
  if (st.message().find(kNoGoogleToken) != std::string::npos) return NoGoogleToken(st.message(), what, url);
  const std::string msg = absl::StrCat(what, " ", url, ": ", st.message());
  if (arrow::internal::ErrnoFromStatus(st) == ENOENT) return absl::NotFoundError(msg);
  const std::string& m = st.message();
  for (const char* refused : {"ACCESS_DENIED", "AccessDenied", "PERMISSION_DENIED", "SIGNATURE_DOES_NOT_MATCH",
                              "INVALID_ACCESS_KEY_ID", "InvalidAccessKeyId"}) {
    if (m.find(refused) == std::string::npos) continue;
    return absl::PermissionDeniedError(absl::StrCat(msg, RefusalHint(url)));
  }
  // A 400 is the request's own fault, and asked again it fails again: an
  // invalid session token (S3's InvalidToken), a signature for another
  // region. RequestTimeout (a body sent too slowly) and a token that
  // expired while the client renews its credentials are worth another try.
  const bool retried_400 = absl::StrContains(m, "RequestTimeout") || absl::StrContains(m, "ExpiredToken") ||
                           absl::StrContains(m, "TokenRefreshRequired");
  if (absl::StrContains(m, "HTTP status 400") && !retried_400) {
    return absl::PermissionDeniedError(
        absl::StrCat(msg,
                     " (the store refused the request as malformed: most often an invalid or expired session token, "
                     "AWS_SESSION_TOKEN, or a region other than the bucket's; a HEAD's refusal carries no reason)"));
  }
  for (const char* missing : {"NO_SUCH_BUCKET", "NoSuchBucket", "NO_SUCH_KEY", "NoSuchKey", "RESOURCE_NOT_FOUND"}) {
    if (m.find(missing) != std::string::npos) return absl::NotFoundError(msg);
  }
  // A range past the object's end: it is shorter than it was.
  if (m.find("HTTP status 416") != std::string::npos || m.find("InvalidRange") != std::string::npos) {
    return absl::OutOfRangeError(msg);
  }
  if (st.IsInvalid()) return absl::InvalidArgumentError(msg);
  // A URL ending in '/', or naming a prefix: asked again, it stays one.
  if (m.find("Not a regular file") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(msg, " (a prefix, not an object: name an object, or a glob of them)"));
  }
  // TLS that fails to start does so on every try: most often an endpoint
  // without a scheme (https is assumed) in front of a plain HTTP store.
  if (m.find("wrong version number") != std::string::npos) {
    return absl::FailedPreconditionError(
        absl::StrCat(msg,
                     " (TLS could not start: an endpoint without a scheme is taken as https://; a plain HTTP store's "
                     "AWS_ENDPOINT_URL or endpoint_override starts with http://)"));
  }
  return absl::UnavailableError(msg);
}

absl::StatusOr<std::shared_ptr<arrow::io::RandomAccessFile>> OpenArrowObject(const std::string& url) {
  absl::StatusOr<ObjectUrl> u = ParseObjectUrl(url);
  if (!u.ok()) return u.status();
  int undated = 0;
  return WithRetries([&]() -> absl::StatusOr<std::shared_ptr<arrow::io::RandomAccessFile>> {
    absl::StatusOr<std::shared_ptr<arrow::fs::FileSystem>> fs = FileSystemFor(*u);
    if (!fs.ok()) return fs.status();
    arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> in = (*fs)->OpenInputFile(u->Path());
    if (!in.ok()) return ToStatus(in.status(), "cannot open", url);
    arrow::Result<std::shared_ptr<const arrow::KeyValueMetadata>> metadata = (*in)->ReadMetadata();
    const bool dated = metadata.ok() && *metadata != nullptr && (*metadata)->Contains("Last-Modified");
    SLUICE_RETURN_IF_ERROR(WholeDescription(*u, dated, url, &undated));
    return *std::move(in);
  });
}

absl::StatusOr<std::vector<std::string>> ListObjects(const std::string& pattern) {
  absl::StatusOr<ObjectUrl> u = ParseObjectUrl(pattern, KeyAs::kPattern);
  if (!u.ok()) return u.status();
  absl::StatusOr<std::shared_ptr<arrow::fs::FileSystem>> fs = FileSystemFor(*u);
  if (!fs.ok()) return fs.status();
  const size_t wild = FirstWildcard(u->key);
  if (wild == std::string::npos) {
    u->key = Unescaped(u->key);
    absl::StatusOr<arrow::fs::FileInfo> info = LookUp(**fs, *u, pattern);
    // A reply cut after its date and before its size reads as 0 bytes: a
    // size of 0 is taken from a second look.
    if (info.ok() && info->IsFile() && info->size() == 0) info = LookUp(**fs, *u, pattern);
    if (!info.ok()) return info.status();
    if (info->type() == arrow::fs::FileType::NotFound) {
      return NothingListed(**fs, *u, absl::StrCat("object not found: '", pattern, "'"));
    }
    if (!info->IsFile()) return absl::InvalidArgumentError(absl::StrCat(pattern, " is a prefix, not an object"));
    std::string url = u->Url(u->Path());
    RememberListed(url, VersionOf(*info));
    return std::vector<std::string>{std::move(url)};
  }
  const size_t slash = u->key.rfind('/', wild);
  const std::string dir =
      slash == std::string::npos ? u->bucket : absl::StrCat(u->bucket, "/", Unescaped(u->key.substr(0, slash)));
  const std::string wanted = u->Path();
  const bool any_depth = HasRecursiveWildcard(u->key);
  absl::StatusOr<std::vector<std::string>> urls = ListMatching(
      **fs, *u, dir, any_depth || u->key.find('/', wild) != std::string::npos,
      [&](const std::string& path) {
        return any_depth ? PathMatches(wanted, path) : ::fnmatch(wanted.c_str(), path.c_str(), FNM_PATHNAME) == 0;
      },
      pattern);
  if (!urls.ok()) return urls.status();
  if (urls->empty()) return NothingListed(**fs, *u, absl::StrCat("no object matches pattern '", pattern, "'"));
  return *std::move(urls);
}

absl::StatusOr<std::vector<std::string>> ListObjectsUnder(const std::string& prefix_url) {
  absl::StatusOr<ObjectUrl> u = ParseObjectUrl(prefix_url);
  if (!u.ok()) return u.status();
  absl::StatusOr<std::shared_ptr<arrow::fs::FileSystem>> fs = FileSystemFor(*u);
  if (!fs.ok()) return fs.status();
  while (absl::EndsWith(u->key, "/")) u->key.pop_back();
  absl::StatusOr<std::vector<std::string>> urls =
      ListMatching(**fs, *u, u->Path(), true, [](const std::string&) { return true; }, prefix_url, /*folders=*/true);
  if (!urls.ok()) return urls.status();
  if (urls->empty()) {
    arrow::Result<arrow::fs::FileInfo> itself = (*fs)->GetFileInfo(u->Path());
    if (itself.ok() && itself->IsFile()) {
      return absl::InvalidArgumentError(absl::StrCat(prefix_url, " is an object, not a folder of them"));
    }
    return NothingListed(**fs, *u, absl::StrCat("no object is under ", prefix_url));
  }
  return *std::move(urls);
}

}  // namespace sluice::io
