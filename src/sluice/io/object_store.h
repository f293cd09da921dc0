// Objects in S3-compatible stores (s3://bucket/key) and Google Cloud Storage
// (gs://bucket/key), read with Apache Arrow's file systems: the AWS and
// Google clients' credential chains, retries and ranged GETs, from the
// pyarrow wheel the build already links for Parquet. A build without it
// reports that it cannot read objects.
#ifndef SLUICE_IO_OBJECT_STORE_H_
#define SLUICE_IO_OBJECT_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

// Whether `path` is an object's URL rather than a local path.
inline bool IsObjectUrl(absl::string_view path) {
  return absl::StartsWith(path, "s3://") || absl::StartsWith(path, "gs://") || absl::StartsWith(path, "gcs://");
}

// Transient failures of a store (5xx after the client's own retries, a
// connection refused or reset, a request past its timeout) are retried
// with backoff for this long from the first (SLUICE_OBJECT_STORE_TIMEOUT_S,
// seconds; default 60) before they fail naming it.
absl::Duration ObjectStoreTimeout();
// Transient failures retried so far in this process.
int64_t ObjectStoreRetries();
// Bytes of the blocks of objects fetched ahead or in flight in this
// process (object_read_ahead.h): now, and at most so far. They are the
// object clients' buffers, outside every pipeline's pool; each pipeline's
// memory budget counts them.
int64_t ObjectBlockBytes();
int64_t ObjectBlockPeakBytes();

// Opens the object at `url` for ranged reads. Its size is read once; a
// later read past a shorter object is DataLoss naming it. Errors name the
// URL, never a credential: NotFound for a missing object or bucket,
// PermissionDenied when the store refuses, InvalidArgument for a URL that
// carries credentials of its own.
absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenObject(const std::string& url);

// Starts opening the object at `url` in the background (its HEAD, and the
// blocks a reader keeps in flight, within the blocks' bound) for the next
// OpenObject of it to
// take while the returned handle is held: a source calls it for its next
// split's object, so that a store's round trips at the start of an object
// overlap the reading of the one before, and drops the handle with the
// split. Null for a local path, or with an object cache (the copy is
// local).
std::shared_ptr<const void> OpenObjectAhead(const std::string& url);
// Opens so far in this process that took an object opened ahead.
int64_t ObjectsOpenedAhead();

// The objects' URLs matching `pattern` (a URL whose key may hold glob's
// `*`, `?` and `[...]`, none crossing a `/`), sorted; one listing of the
// longest prefix without a wildcard. A URL without wildcards must name an
// object. NotFound naming the pattern when nothing matches.
absl::StatusOr<std::vector<std::string>> ListObjects(const std::string& pattern);

// Every object whose key starts with `prefix_url`'s key and a '/' (the
// objects "under" it, at any depth), and every folder there (a URL ending
// in '/': a folder marker, or a prefix of a key), sorted. NotFound when
// there is none.
absl::StatusOr<std::vector<std::string>> ListObjectsUnder(const std::string& prefix_url);

}  // namespace sluice::io

#endif  // SLUICE_IO_OBJECT_STORE_H_
