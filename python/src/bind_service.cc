// sluice.dispatcher_status(): what a dispatcher reports about its workers
// and jobs (what `sluice status --json` prints, with the proto's snake_case
// field names), for tools such as the Ray front's autoscaler; and the
// removal of this process's shared-memory rings before it leaves.
#include "bindings.h"
#include "gil.h"
#include "google/protobuf/util/json_util.h"
#include "sluice/service/fetch_status.h"
#include "sluice/service/shm_ring.h"

namespace sluice::python {
namespace {

// The status as JSON with the proto's field names.
std::string DispatcherStatusJson(const std::string& dispatcher, const std::string& token_file,
                                 const std::string& tls_ca_file, const std::string& tls_cert_file,
                                 const std::string& tls_key_file) {
  absl::StatusOr<DispatcherStatus> status;
  WithoutGil([&] {
    service::SecurityOptions security;
    security.ca_file = tls_ca_file;
    security.cert_file = tls_cert_file;
    security.key_file = tls_key_file;
    const absl::Status token = token_file.empty() ? absl::OkStatus() : security.ReadTokenFile(token_file);
    status = token.ok() ? service::FetchDispatcherStatus(dispatcher, security) : token;
  });
  ThrowIfError(status.status());
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  const auto printed = google::protobuf::util::MessageToJsonString(*status, &json, options);
  if (!printed.ok()) ThrowIfError(absl::InternalError("the dispatcher's status as JSON: " + printed.ToString()));
  return json;
}

}  // namespace

void InitService(py::module_& m) {
  m.def("dispatcher_status", &DispatcherStatusJson, py::arg("dispatcher"), py::arg("token_file"),
        py::arg("tls_ca_file"), py::arg("tls_cert_file"), py::arg("tls_key_file"));
  m.def("remove_this_processs_rings", &service::ShmRing::RemoveThisProcesssRings,
        "Removes this process's shared-memory rings from /dev/shm (before os._exit).");
}

}  // namespace sluice::python
