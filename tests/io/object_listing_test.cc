// A folder's listing says which objects it lacks only for a while: an
// object written after it (for a later pipeline of the process, a
// long-lived dispatcher's next job) is asked for, not taken as missing.
#include "sluice/io/object_listing.h"

#include "gtest/gtest.h"

namespace sluice::io {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

TEST(ObjectListing, AFolderListedLacksWhatItDidNotListForAWhileOnly) {
  RememberListed("s3://b/train/a.tfrecord", ObjectVersion{10, 1});
  RememberListedFolder("s3://b/train", /*recursive=*/false, kT0);
  EXPECT_TRUE(ListedAbsent("s3://b/train/a.tfrecord.index", kT0 + absl::Seconds(1)));
  EXPECT_FALSE(ListedAbsent("s3://b/train/a.tfrecord", kT0 + absl::Seconds(1))) << "listed";
  EXPECT_FALSE(ListedAbsent("s3://b/train/deeper/x", kT0 + absl::Seconds(1))) << "not listed recursively";
  EXPECT_FALSE(ListedAbsent("s3://b/other/x", kT0 + absl::Seconds(1)));
  // Past the time a listing is trusted, the object may have been written.
  EXPECT_FALSE(ListedAbsent("s3://b/train/a.tfrecord.index", kT0 + kListingTrusted + absl::Seconds(1)));
  RememberListedFolder("s3://b/train", /*recursive=*/true, kT0 + absl::Minutes(5));
  EXPECT_TRUE(ListedAbsent("s3://b/train/deeper/x", kT0 + absl::Minutes(5)));
}

}  // namespace
}  // namespace sluice::io
