#include "sluice/graph/pipeline_json.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "sluice/core/edit_distance.h"
#include "sluice/core/status_macros.h"

namespace sluice::graph {
namespace {

// The message at `path` ("nodes[0].source.tfrecord"; empty: the pipeline)
// of a PipelineDef, or null where the path leaves messages.
const google::protobuf::Descriptor* MessageAt(absl::string_view path) {
  const google::protobuf::Descriptor* message = PipelineDef::descriptor();
  if (path.empty()) return message;
  for (absl::string_view step : absl::StrSplit(path, '.')) {
    step = step.substr(0, step.find('['));
    const google::protobuf::FieldDescriptor* field = message->FindFieldByName(std::string(step));
    if (field == nullptr) field = message->FindFieldByCamelcaseName(std::string(step));
    if (field == nullptr || field->message_type() == nullptr) return nullptr;
    message = field->message_type();
  }
  return message;
}

// For protobuf's "(where) name: Cannot find field.": the names allowed
// there, the nearest first when it is a likely misspelling.
std::string UnknownFieldHint(absl::string_view error) {
  absl::string_view rest = error, path;
  if (absl::ConsumePrefix(&rest, "(")) {
    const size_t close = rest.find(") ");
    if (close == absl::string_view::npos) return "";
    path = rest.substr(0, close);
    rest.remove_prefix(close + 2);
  }
  const size_t colon = rest.find(": Cannot find field");
  const google::protobuf::Descriptor* message = colon == absl::string_view::npos ? nullptr : MessageAt(path);
  if (message == nullptr) return "";
  const absl::string_view name = rest.substr(0, colon);
  std::vector<std::string> names;
  const google::protobuf::FieldDescriptor* nearest = nullptr;
  size_t nearest_edits = 0;
  for (int i = 0; i < message->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = message->field(i);
    names.push_back(field->name());
    const size_t edits = EditDistance(name, field->name());
    if (nearest == nullptr || edits < nearest_edits) nearest = field, nearest_edits = edits;
  }
  std::string hint = absl::StrCat(" (", path.empty() ? "a pipeline" : path, " takes ", absl::StrJoin(names, ", "), ")");
  if (nearest != nullptr && nearest_edits <= std::max<size_t>(2, name.size() / 3)) {
    hint = absl::StrCat(" Did you mean '", nearest->name(), "'?", hint);
  }
  return hint;
}

// Protobuf's parser says where JSON's syntax breaks by a snippet only; a
// strict parser says which line and column (and refuses trailing commas).
absl::Status CheckSyntax(absl::string_view json) {
  // Checked without building a document (an arrays source's data can be
  // large); parsed only to say where a bad one breaks.
  if (nlohmann::json::accept(json.begin(), json.end())) return absl::OkStatus();
  try {
    (void)nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    if (const size_t at = what.find("] "); at != std::string::npos) what.erase(0, at + 2);  // "[json.exception...] "
    return absl::InvalidArgumentError(absl::StrCat("invalid pipeline JSON: ", what));
  }
  return absl::OkStatus();
}

// Valid JSON nested deeper than any pipeline is (protobuf's transcoder
// took quadratic time over it: 30 s for 30,000 levels of lists in an
// attr, then failed naming nothing).
absl::Status CheckDepth(absl::string_view json) {
  constexpr int kMaxDepth = 64;
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;  // the escaped character
      in_string = c != '"';
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) {
        return absl::InvalidArgumentError(
            absl::StrCat("invalid pipeline JSON: nested more than ", kMaxDepth, " levels deep (at character ", i, ")"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PipelineDef> PipelineFromJson(absl::string_view json) {
  absl::ConsumePrefix(&json, "\xEF\xBB\xBF");  // a byte-order mark some editors write
  SLUICE_RETURN_IF_ERROR(CheckSyntax(json));
  SLUICE_RETURN_IF_ERROR(CheckDepth(json));
  PipelineDef def;
  google::protobuf::util::JsonParseOptions options;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &def, options);
  if (!status.ok()) {
    const std::string error(status.message());
    return absl::InvalidArgumentError(absl::StrCat("invalid pipeline JSON: ", error, UnknownFieldHint(error)));
  }
  return def;
}

absl::StatusOr<PipelineDef> PipelineFromJsonFile(const std::string& path) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a pipeline's JSON file"));
  }
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
