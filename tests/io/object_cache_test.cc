#include "sluice/io/object_cache.h"

#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// The "store": local files standing for objects, each fetch counted.
struct Store {
  testing::TempDir dir;
  std::atomic<int> fetches{0};

  std::string Put(const std::string& name, const std::string& bytes) {
    testing::WriteFileBytes(dir.Join(name), bytes);
    return "s3://bucket/" + name;
  }
  ObjectCache::Fetch FetchOf(const std::string& url) {
    return [this, url]() -> absl::StatusOr<std::unique_ptr<RandomAccessFile>> {
      ++fetches;
      return RandomAccessFile::Open(dir.Join(url.substr(url.rfind('/') + 1)));
    };
  }
};

std::string ReadAll(const RandomAccessFile& f) {
  std::string out(f.size(), '\0');
  SLUICE_EXPECT_OK(f.ReadExact(0, out.size(), out.data()));
  return out;
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  while (const struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  return names;
}

std::shared_ptr<ObjectCache> Configured(const std::string& dir, int64_t max_bytes) {
  SLUICE_EXPECT_OK(ObjectCache::Configure(dir, max_bytes));
  return ObjectCache::Get();
}

const std::string kBytes = std::string(3000, 'a') + "the end";

TEST(ObjectCache, SecondOpenReadsTheCopyNotTheStore) {
  Store store;
  testing::TempDir cache_dir;
  const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 1 << 20);
  const std::string url = store.Put("a.tar", kBytes);
  const ObjectVersion v{static_cast<int64_t>(kBytes.size()), 1700000000};
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto f, cache->Open(url, v, store.FetchOf(url)));
    EXPECT_EQ(f->path(), url);
    EXPECT_EQ(ReadAll(*f), kBytes);
  }
  EXPECT_EQ(store.fetches, 1);
  EXPECT_EQ(cache->stats().hits, 2);
  EXPECT_EQ(cache->stats().misses, 1);
  EXPECT_EQ(Entries(cache_dir.path()).size(), 1u);
}

TEST(ObjectCache, AnotherVersionIsAnotherEntry) {
  Store store;
  testing::TempDir cache_dir;
  const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 1 << 20);
  const std::string url = store.Put("a.tar", kBytes);
  SLUICE_ASSERT_OK(cache->Open(url, {static_cast<int64_t>(kBytes.size()), 1}, store.FetchOf(url)).status());
  store.Put("a.tar", "new");
  ASSERT_OK_AND_ASSIGN(auto f, cache->Open(url, {3, 2}, store.FetchOf(url)));
  EXPECT_EQ(ReadAll(*f), "new");
  EXPECT_EQ(store.fetches, 2);
}

TEST(ObjectCache, CorruptOrTruncatedEntryIsFetchedAgain) {
  Store store;
  testing::TempDir cache_dir;
  const std::string url = store.Put("a.tar", kBytes);
  const ObjectVersion v{static_cast<int64_t>(kBytes.size()), 7};
  {
    const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 1 << 20);
    SLUICE_ASSERT_OK(cache->Open(url, v, store.FetchOf(url)).status());
  }
  const std::string entry = Entries(cache_dir.path()).at(0);
  testing::IncrementByte(entry, 100);
  // A cache made anew, as another process would: it checks the entry.
  const std::shared_ptr<ObjectCache> fresh = Configured(cache_dir.path(), (1 << 20) + 1);
  ASSERT_OK_AND_ASSIGN(auto f, fresh->Open(url, v, store.FetchOf(url)));
  EXPECT_EQ(ReadAll(*f), kBytes);
  EXPECT_EQ(fresh->stats().corrupt, 1);
  EXPECT_EQ(store.fetches, 2);

  testing::TruncateFile(entry, 1000);
  const std::shared_ptr<ObjectCache> again = Configured(cache_dir.path(), (1 << 20) + 2);
  ASSERT_OK_AND_ASSIGN(f, again->Open(url, v, store.FetchOf(url)));
  EXPECT_EQ(ReadAll(*f), kBytes);
  EXPECT_EQ(again->stats().corrupt, 1);
  EXPECT_EQ(store.fetches, 3);
}

TEST(ObjectCache, PartialEntriesOfGoneProcessesAreRemoved) {
  testing::TempDir cache_dir;
  // No process has pid 2^22 + 1 (above Linux's pid_max limit).
  testing::WriteFileBytes(cache_dir.Join("0123456789abcdef.part-4194305-0"), "half");
  SLUICE_ASSERT_OK(ObjectCache::Configure(cache_dir.path(), 1 << 20));
  EXPECT_TRUE(Entries(cache_dir.path()).empty());
}

TEST(ObjectCache, LeastRecentlyUsedGoFirstWithinTheBound) {
  Store store;
  testing::TempDir cache_dir;
  const int64_t entry = static_cast<int64_t>(kBytes.size()) + 100;  // with its URL and trailer, about
  const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 2 * entry);
  std::vector<std::string> urls;
  for (const char* name : {"a", "b", "c"}) urls.push_back(store.Put(name, kBytes));
  const ObjectVersion v{static_cast<int64_t>(kBytes.size()), 1};
  SLUICE_ASSERT_OK(cache->Open(urls[0], v, store.FetchOf(urls[0])).status());
  SLUICE_ASSERT_OK(cache->Open(urls[1], v, store.FetchOf(urls[1])).status());
  SLUICE_ASSERT_OK(cache->Open(urls[0], v, store.FetchOf(urls[0])).status());  // "a" used after "b"
  SLUICE_ASSERT_OK(cache->Open(urls[2], v, store.FetchOf(urls[2])).status());  // "b" goes
  EXPECT_EQ(cache->stats().evicted, 1);
  EXPECT_LE(cache->stats().bytes, 2 * entry);
  EXPECT_EQ(Entries(cache_dir.path()).size(), 2u);
  const int before = store.fetches;
  SLUICE_ASSERT_OK(cache->Open(urls[0], v, store.FetchOf(urls[0])).status());
  EXPECT_EQ(store.fetches, before);
  SLUICE_ASSERT_OK(cache->Open(urls[1], v, store.FetchOf(urls[1])).status());
  EXPECT_EQ(store.fetches, before + 1);
}

TEST(ObjectCache, AFolderFilledUnderALargerBoundIsCutToTheNewOne) {
  Store store;
  testing::TempDir cache_dir;
  const int64_t entry = static_cast<int64_t>(kBytes.size()) + 100;
  const std::shared_ptr<ObjectCache> before = Configured(cache_dir.path(), 3 * entry);
  const ObjectVersion v{static_cast<int64_t>(kBytes.size()), 1};
  for (const char* name : {"a", "b", "c"}) {
    const std::string url = store.Put(name, kBytes);
    SLUICE_ASSERT_OK(before->Open(url, v, store.FetchOf(url)).status());
  }
  ASSERT_EQ(Entries(cache_dir.path()).size(), 3u);
  const std::shared_ptr<ObjectCache> after = Configured(cache_dir.path(), entry);
  EXPECT_EQ(Entries(cache_dir.path()).size(), 1u);
  EXPECT_LE(after->stats().bytes, entry);
  EXPECT_EQ(after->stats().evicted, 2);
}

// Two caches on one folder stand for two processes (a node's ranks): each
// counts the folder again as it fills, so neither's own count lets the
// folder grow past the bound.
TEST(ObjectCache, TwoProcessesOnOneFolderKeepItsBound) {
  Store store;
  testing::TempDir cache_dir, elsewhere;
  const int64_t entry = static_cast<int64_t>(kBytes.size()) + 100;  // with its URL and trailer, about
  const std::shared_ptr<ObjectCache> first = Configured(cache_dir.path(), 4 * entry);
  const ObjectVersion v{static_cast<int64_t>(kBytes.size()), 1};
  auto open = [&](const std::shared_ptr<ObjectCache>& cache, const std::string& name) {
    const std::string url = store.Put(name, kBytes);
    SLUICE_ASSERT_OK(cache->Open(url, v, store.FetchOf(url)).status());
  };
  for (const char* name : {"a1", "a2", "a3"}) open(first, name);
  Configured(elsewhere.path(), 4 * entry);
  const std::shared_ptr<ObjectCache> second = Configured(cache_dir.path(), 4 * entry);  // a cache of its own
  ASSERT_NE(first, second);
  for (const char* name : {"b1", "b2"}) open(second, name);
  open(first, "a4");  // the first's own count (3 entries) has room; the folder (4) has not
  EXPECT_EQ(Entries(cache_dir.path()).size(), 4u);
  EXPECT_EQ(first->stats().evicted, 1);
}

// A copy another process (here: this one, under a name no open uses) is
// making takes its room before it lands, at the length it will have.
TEST(ObjectCache, AnEntryBeingCopiedInCountsTowardsTheBound) {
  Store store;
  testing::TempDir cache_dir;
  const int64_t entry = static_cast<int64_t>(kBytes.size()) + 100;  // with its URL and trailer, about
  testing::WriteFileBytes(cache_dir.Join(absl::StrCat("0123456789abcdef.part-", ::getpid(), "-99")),
                          std::string(2 * entry, 'p'));
  const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 4 * entry);
  const ObjectVersion v{static_cast<int64_t>(kBytes.size()), 1};
  for (const char* name : {"a", "b", "c"}) {
    const std::string url = store.Put(name, kBytes);
    SLUICE_ASSERT_OK(cache->Open(url, v, store.FetchOf(url)).status());
  }
  EXPECT_EQ(Entries(cache_dir.path()).size(), 3u);  // the copy under way and two entries
  EXPECT_EQ(cache->stats().evicted, 1);
}

TEST(ObjectCache, ObjectLargerThanTheBoundIsReadFromTheStore) {
  Store store;
  testing::TempDir cache_dir;
  const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 1000);
  const std::string url = store.Put("big", kBytes);
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(auto f, cache->Open(url, {static_cast<int64_t>(kBytes.size()), 1}, store.FetchOf(url)));
    EXPECT_EQ(ReadAll(*f), kBytes);
  }
  EXPECT_EQ(store.fetches, 2);
  EXPECT_EQ(cache->stats().uncacheable, 2);
  EXPECT_TRUE(Entries(cache_dir.path()).empty());
}

TEST(ObjectCache, ConcurrentOpensFetchOnce) {
  Store store;
  testing::TempDir cache_dir;
  const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 1 << 20);
  const std::string url = store.Put("a", kBytes);
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      auto f = cache->Open(url, {static_cast<int64_t>(kBytes.size()), 1}, store.FetchOf(url));
      if (f.ok() && ReadAll(**f) == kBytes) ++right;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(right, 8);
  EXPECT_EQ(store.fetches, 1);
}

TEST(ObjectCache, ACacheReplacedByAnotherLivesOnWhileHeld) {
  Store store;
  testing::TempDir first_dir, second_dir;
  const std::shared_ptr<ObjectCache> first = Configured(first_dir.path(), 1 << 20);
  const std::shared_ptr<ObjectCache> second = Configured(second_dir.path(), 1 << 20);
  EXPECT_EQ(ObjectCache::Get(), second);
  const std::string url = store.Put("a", kBytes);
  ASSERT_OK_AND_ASSIGN(auto f, first->Open(url, {static_cast<int64_t>(kBytes.size()), 1}, store.FetchOf(url)));
  EXPECT_EQ(ReadAll(*f), kBytes);
  EXPECT_EQ(Entries(first_dir.path()).size(), 1u);
}

TEST(ObjectCache, StoreErrorsPassThroughAndBadBoundsAreRefused) {
  testing::TempDir cache_dir;
  const std::shared_ptr<ObjectCache> cache = Configured(cache_dir.path(), 1 << 20);
  auto failing = []() -> absl::StatusOr<std::unique_ptr<RandomAccessFile>> {
    return absl::NotFoundError("object not found: 's3://bucket/x'");
  };
  EXPECT_THAT(cache->Open("s3://bucket/x", {1, 1}, failing), StatusIs(absl::StatusCode::kNotFound, HasSubstr("x")));
  EXPECT_THAT(ObjectCache::Configure(cache_dir.path(), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_bytes must be > 0")));
  EXPECT_THAT(ObjectCache::Configure("/proc/no-such/cache", 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/proc/no-such/cache")));
}

}  // namespace
}  // namespace sluice::io
