// Transport security and the shared token. A server speaks TLS when it has
// a certificate; a client dials with TLS when it has the CA that signed the
// servers' certificates. For mutual TLS, servers require client
// certificates signed by that CA and clients present their own.
// When a token is configured, every RPC must carry it ("authorization:
// Bearer <token>" metadata); a call without it is UNAUTHENTICATED.
#ifndef SLUICE_SERVICE_SECURITY_H_
#define SLUICE_SERVICE_SECURITY_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace sluice::service {

struct SecurityOptions {
  std::string cert_file;  // this process's certificate chain (PEM)
  std::string key_file;   // its private key (PEM)
  std::string ca_file;    // the CA that signs the service's certificates (PEM)
  bool require_client_cert = false;  // servers: mutual TLS
  std::string token;      // shared secret; empty: no token

  // Reads the token from `path` (surrounding whitespace dropped).
  absl::Status ReadTokenFile(const std::string& path);
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const SecurityOptions& options);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const SecurityOptions& options);

// A channel to `target` with sluice's message-size limits.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target,
                                                           const SecurityOptions& options);
// The largest message a sluice process accepts: a batch; larger ones are
// rejected by gRPC with RESOURCE_EXHAUSTED naming the sizes.
inline constexpr int kMaxMessageBytes = 1 << 30;
// The largest request the dispatcher accepts (a pipeline definition; arrays
// sources carry their data inside it).
inline constexpr int kMaxRequestBytes = 64 << 20;

// Fails unless the call carries `token` (always OK when it is empty).
grpc::Status CheckToken(const grpc::ServerContextBase& context, const std::string& token);
void AddToken(grpc::ClientContext* context, const std::string& token);

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status, const std::string& call);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_SECURITY_H_
