#include "sluice/service/security.h"

#include <openssl/crypto.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sluice/core/status_macros.h"

namespace sluice::service {
namespace {

// The whole of the file at `path`, `what` naming it in the error.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr char kTokenKey[] = "authorization";

}  // namespace

absl::Status SecurityOptions::ReadTokenFile(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "token file"));
  token = std::string(absl::StripAsciiWhitespace(text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const SecurityOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and its key");
  }
  if (options.cert_file.empty()) {
    if (options.require_client_cert) {
      return absl::InvalidArgumentError("requiring client certificates needs TLS: give a certificate and key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.require_client_cert && options.ca_file.empty()) {
    return absl::InvalidArgumentError("requiring client certificates needs the CA that signs them");
  }
  grpc::SslServerCredentialsOptions ssl(options.require_client_cert
                                            ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                            : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  SLUICE_ASSIGN_OR_RETURN(std::string cert, ReadWholeFile(options.cert_file, "certificate"));
  SLUICE_ASSIGN_OR_RETURN(std::string key, ReadWholeFile(options.key_file, "private key"));
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (options.require_client_cert) {
    SLUICE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadWholeFile(options.ca_file, "CA certificate"));
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const SecurityOptions& options) {
  if (options.ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  SLUICE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadWholeFile(options.ca_file, "CA certificate"));
  if (!options.cert_file.empty()) {
    SLUICE_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadWholeFile(options.cert_file, "certificate"));
    SLUICE_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadWholeFile(options.key_file, "private key"));
  }
  return grpc::SslCredentials(ssl);
}

namespace {

bool SameToken(const std::string& given, const std::string& expected) {
  return given.size() == expected.size() && CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kClient:
      return "client";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

}  // namespace

absl::Status SecurityOptions::ReadCallersFile(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "callers file"));
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::vector<std::string> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(path, ":", line_number);
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected \"ROLE NAME TOKEN\", got ", fields.size(), " fields"));
    }
    Caller caller{Role::kClient, fields[1], fields[2]};
    if (fields[0] == "worker") {
      caller.role = Role::kWorker;
    } else if (fields[0] == "admin") {
      caller.role = Role::kAdmin;
    } else if (fields[0] != "client") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": role must be client, worker or admin, got '", fields[0], "'"));
    }
    for (const Caller& other : callers) {
      if (SameToken(other.token, caller.token)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": the token of '", caller.name, "' is also '", other.name, "''s"));
      }
    }
    callers.push_back(std::move(caller));
  }
  if (callers.empty()) return absl::InvalidArgumentError(absl::StrCat("callers file ", path, " names no one"));
  return absl::OkStatus();
}

absl::StatusOr<Caller> Authorize(const grpc::ServerContextBase& context, const SecurityOptions& options,
                                 std::initializer_list<Role> allowed, absl::string_view call) {
  if (options.callers.empty() && options.token.empty()) return Caller();  // no tokens: open
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kTokenKey);
  const std::string given = it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
  const Caller* caller = nullptr;
  Caller shared;
  if (options.callers.empty()) {
    if (SameToken(given, "Bearer " + options.token)) caller = &shared;
  } else {
    for (const Caller& c : options.callers) {
      if (SameToken(given, "Bearer " + c.token)) caller = &c;
    }
  }
  if (caller == nullptr) {
    return absl::UnauthenticatedError(options.callers.empty()
                                          ? "missing or wrong token (give the shared token: --token-file, or "
                                            "distribute(token_file=...) in Python)"
                                          : "missing or unknown token (give yours: --token-file, or "
                                            "distribute(token_file=...) in Python)");
  }
  for (Role role : allowed) {
    if (caller->role == role || caller->admin()) return Caller{caller->role, caller->name, ""};
  }
  return absl::PermissionDeniedError(absl::StrCat(RoleName(caller->role), " '", caller->name, "' may not call ", call));
}

void AddToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata(kTokenKey, "Bearer " + token);
}

}  // namespace sluice::service
