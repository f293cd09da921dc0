#include "sluice/service/security.h"

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <memory>
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

// A token goes in a gRPC header, which takes printable ASCII only: gRPC
// aborted the process on a line break (a file of two lines), a tab or
// UTF-8, after logging the header whole. Names the place, never the token.
absl::Status CheckToken(absl::string_view token, const std::string& where) {
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c >= 0x20 && c <= 0x7e) continue;
    const std::string what = c == '\n' || c == '\r' ? "a line break"
                             : c == '\t'            ? "a tab"
                             : c >= 0x80            ? "a byte of non-ASCII text"
                                                    : "a control character";
    return absl::InvalidArgumentError(absl::StrCat(where, ": the token holds ", what, " at character ", i + 1,
                                                   "; a token is one line of printable ASCII"));
  }
  return absl::OkStatus();
}

// That `cert` (PEM, from `cert_file`) is a certificate and `key` (from
// `key_file`) its private key: gRPC's refusal of a pair reads as a port in
// use, or as a handshake failing later.
absl::Status CheckKeyPair(const std::string& cert, const std::string& cert_file, const std::string& key,
                          const std::string& key_file) {
  std::unique_ptr<BIO, decltype(&BIO_free)> cert_bio(BIO_new_mem_buf(cert.data(), static_cast<int>(cert.size())),
                                                     &BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> x509(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  if (x509 == nullptr) return absl::InvalidArgumentError(absl::StrCat(cert_file, " holds no PEM certificate"));
  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(BIO_new_mem_buf(key.data(), static_cast<int>(key.size())),
                                                    &BIO_free);
  // No passphrase: OpenSSL's default callback would ask for one on the terminal.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return 0; };
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr), &EVP_PKEY_free);
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(key_file,
                     " holds no PEM private key (or one protected by a passphrase, which TLS here cannot "
                     "ask for)"));
  }
  if (X509_check_private_key(x509.get(), pkey.get()) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the private key ", key_file, " is not the key of the certificate ", cert_file));
  }
  return absl::OkStatus();
}

// Where a comment starts in a line of a callers file: a '#' at its start
// or after a space or tab; one within a token is the token's.
size_t CommentStart(absl::string_view line) {
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) return i;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::Status SecurityOptions::ReadTokenFile(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path, "token file"));
  token = std::string(absl::StripAsciiWhitespace(text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  return CheckToken(token, absl::StrCat("token file ", path));
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
  SLUICE_RETURN_IF_ERROR(CheckKeyPair(cert, options.cert_file, key, options.key_file));
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (options.require_client_cert) {
    SLUICE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadWholeFile(options.ca_file, "CA certificate"));
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const SecurityOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key (tls_cert_file and tls_key_file; --tls-cert and --tls-key)");
  }
  if (options.ca_file.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  SLUICE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadWholeFile(options.ca_file, "CA certificate"));
  if (!options.cert_file.empty()) {
    SLUICE_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadWholeFile(options.cert_file, "certificate"));
    SLUICE_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadWholeFile(options.key_file, "private key"));
    SLUICE_RETURN_IF_ERROR(CheckKeyPair(ssl.pem_cert_chain, options.cert_file, ssl.pem_private_key, options.key_file));
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
    line = absl::StripAsciiWhitespace(line.substr(0, CommentStart(line)));
    if (line.empty()) continue;
    const std::vector<std::string> fields = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const std::string where = absl::StrCat(path, ":", line_number);
    if (fields.size() != 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected \"ROLE NAME TOKEN\", got ", fields.size(), " fields"));
    }
    SLUICE_RETURN_IF_ERROR(CheckToken(fields[2], where));
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
