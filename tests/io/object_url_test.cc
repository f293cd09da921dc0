// Objects' URLs: a key's own '?' and '%' survive a listing's URL and back,
// as a name and as a pattern, and bad options are named.
#include "sluice/io/object_url.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace sluice::io {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ObjectUrl, AKeysQuestionMarkAndPercentComeBackFromTheUrlOfItsListing) {
  ASSERT_OK_AND_ASSIGN(const ObjectUrl store, ParseObjectUrl("s3://data/q/*?endpoint_override=h:1"));
  for (const std::string key : {"q/what?.tfrecord", "q/100%.tar", "q/a%3Fb", "q/%25?%"}) {
    const std::string url = store.Url("data/" + key);
    EXPECT_EQ(url.find('?'), url.rfind('?')) << url;  // the options' only
    ASSERT_OK_AND_ASSIGN(const ObjectUrl back, ParseObjectUrl(url));
    EXPECT_EQ(back.key, key);
    EXPECT_EQ(back.query, "endpoint_override=h:1");
  }
}

TEST(ObjectUrl, AnEscapedQuestionMarkInAPatternIsNoWildcard) {
  ASSERT_OK_AND_ASSIGN(const ObjectUrl pattern, ParseObjectUrl("s3://data/q/what%3F*.tfrecord", KeyAs::kPattern));
  EXPECT_EQ(pattern.key, "q/what\\?*.tfrecord");
  EXPECT_EQ(FirstWildcard(pattern.key), pattern.key.find('*'));
  ASSERT_OK_AND_ASSIGN(const ObjectUrl name, ParseObjectUrl("s3://data/q/what%3f.tfrecord"));
  EXPECT_EQ(name.key, "q/what?.tfrecord");
  // Any other '%' is itself.
  ASSERT_OK_AND_ASSIGN(const ObjectUrl other, ParseObjectUrl("s3://data/a%20b%2"));
  EXPECT_EQ(other.key, "a%20b%2");
}

TEST(ObjectUrl, OptionsAreCheckedAndCredentialsNeverShown) {
  EXPECT_THAT(ParseObjectUrl("s3://data/x?anonymous=yes").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("anonymous is true or false")));
  SLUICE_EXPECT_OK(ParseObjectUrl("s3://data/x?anonymous=false").status());
  SLUICE_EXPECT_OK(ParseObjectUrl("s3://data/x?tls_ca_dir_path=/etc/ssl/certs").status());
  EXPECT_THAT(ParseObjectUrl("s3://data/what?.tfrecord").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a key's own '?' %3F")));
  const absl::Status secret = ParseObjectUrl("s3://data/x?secret_key=hunter2").status();
  EXPECT_THAT(secret, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must not carry credentials")));
  EXPECT_THAT(std::string(secret.message()), ::testing::Not(HasSubstr("hunter2")));
  // In an endpoint's user and password, or a bare parameter named like one.
  for (const char* url :
       {"s3://data/x?endpoint_override=http://AKIA:hunter2@127.0.0.1:9000",
        "s3://data/x?scheme=http&endpoint_override=AKIA:hunter2%40127.0.0.1:9000",
        "gs://data/x?endpoint_override=AKIA:hunter2@127.0.0.1:9000", "s3://data/x?region=x&hunter2token"}) {
    const absl::Status status = ParseObjectUrl(url).status();
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must not carry credentials"))) << url;
    EXPECT_THAT(std::string(status.message()), ::testing::Not(HasSubstr("hunter2"))) << url;
  }
  SLUICE_EXPECT_OK(ParseObjectUrl("s3://data/x?endpoint_override=http://127.0.0.1:9000").status());
  // Each store's own place for them: a gs:// URL was told of AWS's variables.
  EXPECT_THAT(ParseObjectUrl("gs://data/x?credentials=hunter2").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("GOOGLE_APPLICATION_CREDENTIALS")));
  EXPECT_THAT(secret, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("AWS_ACCESS_KEY_ID")));
}

}  // namespace
}  // namespace sluice::io
