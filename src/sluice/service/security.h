// Transport security and the shared token. A server speaks TLS when it has
// a certificate; a client dials with TLS when it has the CA that signed the
// servers' certificates. For mutual TLS, servers require client
// certificates signed by that CA and clients present their own.
// Tokens travel as "authorization: Bearer <token>" metadata. A server
// either shares one token with everyone (its holders may do anything) or
// has a table of callers, each a role (client, worker, admin) and a name:
// clients' names are tenants, who see and touch only their own jobs. A call
// without a known token is UNAUTHENTICATED; one whose role may not make it,
// PERMISSION_DENIED.
#ifndef SLUICE_SERVICE_SECURITY_H_
#define SLUICE_SERVICE_SECURITY_H_

#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::service {

enum class Role { kClient, kWorker, kAdmin };

// Who is calling.
struct Caller {
  Role role = Role::kAdmin;
  std::string name;   // a client's tenant; empty for the shared token
  std::string token;  // only in the servers' tables

  bool admin() const { return role == Role::kAdmin; }
};

struct SecurityOptions {
  std::string cert_file;             // this process's certificate chain (PEM)
  std::string key_file;              // its private key (PEM)
  std::string ca_file;               // the CA that signs the service's certificates (PEM)
  bool require_client_cert = false;  // servers: mutual TLS
  // What this process presents when it calls; also what its server accepts
  // from everyone when it has no `callers`. Empty: no token.
  std::string token;
  // Servers: who may call, by token (see ReadCallersFile).
  std::vector<Caller> callers;

  // Reads the token from `path` (surrounding whitespace dropped).
  absl::Status ReadTokenFile(const std::string& path);
  // Reads lines "ROLE NAME TOKEN" (ROLE client, worker or admin; '#'
  // starts a comment) into `callers`.
  absl::Status ReadCallersFile(const std::string& path);
};

// The caller of the server call `call`, if its token is known and its role
// one of `allowed` (admins may make every call).
absl::StatusOr<Caller> Authorize(const grpc::ServerContextBase& context, const SecurityOptions& options,
                                 std::initializer_list<Role> allowed, absl::string_view call);

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const SecurityOptions& options);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const SecurityOptions& options);

// Adds `token` (when there is one) to an outgoing call's metadata.
void AddToken(grpc::ClientContext* context, const std::string& token);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_SECURITY_H_
