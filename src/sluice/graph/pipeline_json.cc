#include "sluice/graph/pipeline_json.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"

namespace sluice::graph {

absl::StatusOr<PipelineDef> PipelineFromJson(absl::string_view json) {
  absl::ConsumePrefix(&json, "\xEF\xBB\xBF");  // a byte-order mark some editors write
  PipelineDef def;
  google::protobuf::util::JsonParseOptions options;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &def, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid pipeline JSON: ", std::string(status.message())));
  }
  return def;
}

absl::StatusOr<PipelineDef> PipelineFromJsonFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open pipeline file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<PipelineDef> def = PipelineFromJson(text.str());
  if (!def.ok()) {
    return absl::Status(def.status().code(), absl::StrCat(path, ": ", def.status().message()));
  }
  return def;
}

std::string PipelineToJson(const PipelineDef& def) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(def, &json, options);
  return json;
}

}  // namespace sluice::graph
