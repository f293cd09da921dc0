// An object for Arrow's Parquet and IPC readers, its version checked
// against the listing: the object cache's copy (through OpenObject) as
// Arrow's own input file, or Arrow's file when there is no cache.
#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "arrow/buffer.h"
#include "arrow/io/concurrency.h"
#include "sluice/io/object_cache.h"
#include "sluice/io/object_store.h"
#include "sluice/io/object_store_arrow.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {
namespace {

arrow::Status ToArrow(const absl::Status& s) {
  // The text names the object and what went wrong; Arrow's code matters
  // less than keeping it (the source reports it as read).
  return arrow::Status::IOError(s.ToString());
}

class ArrowObjectFile : public arrow::io::internal::RandomAccessFileConcurrencyWrapper<ArrowObjectFile> {
 public:
  explicit ArrowObjectFile(std::unique_ptr<io::RandomAccessFile> object) : object_(std::move(object)) {}

 protected:
  friend RandomAccessFileConcurrencyWrapper<ArrowObjectFile>;

  arrow::Status DoClose() {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }
  arrow::Result<int64_t> DoTell() const { return position_; }
  arrow::Status DoSeek(int64_t position) {
    position_ = position;
    return arrow::Status::OK();
  }
  arrow::Result<int64_t> DoGetSize() { return static_cast<int64_t>(object_->size()); }

  arrow::Result<int64_t> DoRead(int64_t nbytes, void* out) {
    ARROW_ASSIGN_OR_RAISE(int64_t n, DoReadAt(position_, nbytes, /*allow_short_read=*/true, out));
    position_ += n;
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> DoRead(int64_t nbytes) {
    ARROW_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> b, DoReadAt(position_, nbytes, /*allow_short_read=*/true));
    position_ += b->size();
    return b;
  }

  // Arrow's readers call this from several threads; the file (a cached
  // copy, or an uncacheable object's blocks fetched ahead) is read one
  // caller at a time.
  arrow::Result<int64_t> DoReadAt(int64_t position, int64_t nbytes, bool allow_short_read, void* out) {
    const int64_t size = static_cast<int64_t>(object_->size());
    const int64_t n = std::max<int64_t>(0, std::min(nbytes, size - position));
    if (n < nbytes && !allow_short_read) {
      return arrow::Status::IOError(absl::StrCat("cannot read ", nbytes, " bytes at offset ", position, " of ",
                                                 object_->path(), ": it holds ", size));
    }
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Status read = object_->ReadExact(static_cast<uint64_t>(position), static_cast<size_t>(n), out);
    if (!read.ok()) return ToArrow(read);
    return n;
  }
  arrow::Result<std::shared_ptr<arrow::Buffer>> DoReadAt(int64_t position, int64_t nbytes, bool allow_short_read) {
    ARROW_ASSIGN_OR_RAISE(std::unique_ptr<arrow::Buffer> buffer, arrow::AllocateBuffer(nbytes));
    ARROW_ASSIGN_OR_RAISE(int64_t n, DoReadAt(position, nbytes, allow_short_read, buffer->mutable_data()));
    return arrow::SliceBuffer(std::shared_ptr<arrow::Buffer>(std::move(buffer)), 0, n);
  }

 private:
  const std::unique_ptr<io::RandomAccessFile> object_;
  std::mutex mu_;
  int64_t position_ = 0;
  bool closed_ = false;
};

}  // namespace

absl::StatusOr<ArrowObject> OpenObjectForArrow(const std::string& url) {
  if (ObjectCache::Get() == nullptr) return OpenListedArrowObject(url);
  absl::StatusOr<std::unique_ptr<io::RandomAccessFile>> object = OpenObject(url);
  if (!object.ok()) return object.status();
  return ArrowObject{std::make_shared<ArrowObjectFile>(*std::move(object)), nullptr};
}

}  // namespace sluice::io
