// The S3 endpoint an AWS shared config file names (`endpoint_url`, as
// boto3 and the AWS CLI read it), which the AWS SDK under Arrow does not
// read: without it a profile made for an S3-compatible store would send
// its requests to AWS.
#ifndef SLUICE_IO_AWS_CONFIG_H_
#define SLUICE_IO_AWS_CONFIG_H_

#include <string>

#include "absl/strings/string_view.h"

namespace sluice::io {

// The S3 endpoint of `profile` in `config` (a shared config file's text):
// the s3 endpoint_url of the services section it names, else its own
// endpoint_url; empty if neither, or if the profile sets
// ignore_configured_endpoint_urls. Profile "default" is section [default].
std::string ConfiguredS3Endpoint(absl::string_view config, absl::string_view profile);

// The same for this process: AWS_PROFILE's (else AWS_DEFAULT_PROFILE's,
// else "default") in AWS_CONFIG_FILE (else ~/.aws/config). Empty where the
// environment names an endpoint (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL),
// which comes first, or AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true.
std::string ConfiguredS3EndpointOfThisProcess();

}  // namespace sluice::io

#endif  // SLUICE_IO_AWS_CONFIG_H_
