#include "sluice/io/aws_config.h"

#include <gtest/gtest.h>

namespace sluice::io {
namespace {

constexpr char kConfig[] = R"(# a comment
[default]
region = us-east-1
endpoint_url = http://127.0.0.1:9000

[profile  dev]
region = eu-west-1
s3 =
  addressing_style = path
endpoint_url = https://minio.example:9000/

[profile shared]
endpoint_url = http://global:1
services = local

[services local]
dynamodb =
  endpoint_url = http://dynamo:2
s3 =
  endpoint_url = http://s3-only:3

[profile plain]
region = us-west-2
)";

TEST(AwsConfig, AProfilesEndpointIsItsOwn) {
  EXPECT_EQ(ConfiguredS3Endpoint(kConfig, "default"), "http://127.0.0.1:9000");
  EXPECT_EQ(ConfiguredS3Endpoint(kConfig, "dev"), "https://minio.example:9000/");
}

TEST(AwsConfig, TheServicesSectionsS3EndpointComesBeforeTheProfiles) {
  EXPECT_EQ(ConfiguredS3Endpoint(kConfig, "shared"), "http://s3-only:3");
}

TEST(AwsConfig, AProfileWithoutAnEndpointOrAbsentGivesNone) {
  EXPECT_EQ(ConfiguredS3Endpoint(kConfig, "plain"), "");
  EXPECT_EQ(ConfiguredS3Endpoint(kConfig, "nosuch"), "");
  EXPECT_EQ(ConfiguredS3Endpoint("", "default"), "");
}

TEST(AwsConfig, KeysAreReadInAnyCaseAsBoto3ReadsThem) {
  EXPECT_EQ(ConfiguredS3Endpoint("[profile x]\nEndpoint_URL = http://e:1\n", "x"), "http://e:1");
}

TEST(AwsConfig, AProfileThatIgnoresConfiguredEndpointsGivesNone) {
  EXPECT_EQ(
      ConfiguredS3Endpoint("[profile x]\nendpoint_url = http://e:1\nignore_configured_endpoint_urls = true\n", "x"),
      "");
}

TEST(AwsConfig, ANestedEndpointOfAnotherServiceIsNotS3s) {
  EXPECT_EQ(ConfiguredS3Endpoint("[profile x]\ndynamodb =\n  endpoint_url = http://d:1\n", "x"), "");
}

}  // namespace
}  // namespace sluice::io
