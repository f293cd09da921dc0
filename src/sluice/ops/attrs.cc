#include "sluice/ops/attrs.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "sluice/core/status_macros.h"

namespace sluice::ops {
namespace {

using google::protobuf::Value;

std::string Describe(const Value& v) {
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(v, &json).ok()) return "?";
  return json;
}

absl::StatusOr<int64_t> ToInt(const AttrSchema& s, const Value& v) {
  if (v.kind_case() != Value::kNumberValue || std::floor(v.number_value()) != v.number_value()) {
    return AttrError(s.name, absl::StrCat("must be an integer, got ", Describe(v)));
  }
  return static_cast<int64_t>(v.number_value());
}

absl::StatusOr<double> ToFloat(const AttrSchema& s, const Value& v) {
  if (v.kind_case() != Value::kNumberValue) {
    return AttrError(s.name, absl::StrCat("must be a number, got ", Describe(v)));
  }
  return v.number_value();
}

template <typename T, typename Convert>
absl::StatusOr<std::vector<T>> ToList(const AttrSchema& s, const Value& v, Convert convert) {
  std::vector<T> out;
  if (v.kind_case() != Value::kListValue) {
    SLUICE_ASSIGN_OR_RETURN(T x, convert(s, v));
    out.push_back(x);
    return out;
  }
  for (const Value& item : v.list_value().values()) {
    absl::StatusOr<T> x = convert(s, item);
    if (!x.ok()) {
      return AttrError(s.name, absl::StrCat("must be a list of ", AttrTypeName(s.type), ", got ",
                                            Describe(v)));
    }
    out.push_back(*x);
  }
  return out;
}

absl::StatusOr<AttrValue> Convert(const AttrSchema& s, const Value& v) {
  switch (s.type) {
    case AttrType::kInt:
      return ToInt(s, v);
    case AttrType::kFloat:
      return ToFloat(s, v);
    case AttrType::kBool:
      if (v.kind_case() != Value::kBoolValue) {
        return AttrError(s.name, absl::StrCat("must be true or false, got ", Describe(v)));
      }
      return v.bool_value();
    case AttrType::kString:
      if (v.kind_case() != Value::kStringValue) {
        return AttrError(s.name, absl::StrCat("must be a string, got ", Describe(v)));
      }
      return v.string_value();
    case AttrType::kInts:
      return ToList<int64_t>(s, v, ToInt);
    case AttrType::kFloats:
      return ToList<double>(s, v, ToFloat);
  }
  return absl::InternalError("unknown attr type");
}

}  // namespace

absl::string_view AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kBool:
      return "bool";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "ints";
    case AttrType::kFloats:
      return "floats";
  }
  return "?";
}

absl::Status AttrError(absl::string_view name, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("attr '", name, "' ", message));
}

absl::StatusOr<Attrs> Attrs::Bind(const std::vector<AttrSchema>& schema,
                                  const google::protobuf::Struct& values) {
  Attrs attrs;
  for (const auto& [name, value] : values.fields()) {
    const AttrSchema* s = nullptr;
    for (const AttrSchema& candidate : schema) {
      if (candidate.name == name) s = &candidate;
    }
    if (s == nullptr) {
      return AttrError(name, absl::StrCat("is unknown (attrs: ",
                                          absl::StrJoin(schema, ", ",
                                                        [](std::string* out, const AttrSchema& a) {
                                                          out->append(a.name);
                                                        }),
                                          ")"));
    }
    SLUICE_ASSIGN_OR_RETURN(attrs.values_[name], Convert(*s, value));
  }
  for (const AttrSchema& s : schema) {
    if (attrs.values_.count(s.name)) continue;
    if (s.default_json.empty()) return AttrError(s.name, "is required");
    Value v;
    if (!google::protobuf::util::JsonStringToMessage(s.default_json, &v).ok()) {
      return absl::InternalError(absl::StrCat("bad default for attr '", s.name, "'"));
    }
    SLUICE_ASSIGN_OR_RETURN(attrs.values_[s.name], Convert(s, v));
  }
  return attrs;
}

const AttrValue& Attrs::Get(absl::string_view name) const { return values_.find(name)->second; }
int64_t Attrs::GetInt(absl::string_view name) const { return std::get<int64_t>(Get(name)); }
double Attrs::GetFloat(absl::string_view name) const { return std::get<double>(Get(name)); }
bool Attrs::GetBool(absl::string_view name) const { return std::get<bool>(Get(name)); }
const std::string& Attrs::GetString(absl::string_view name) const {
  return std::get<std::string>(Get(name));
}
const std::vector<int64_t>& Attrs::GetInts(absl::string_view name) const {
  return std::get<std::vector<int64_t>>(Get(name));
}
const std::vector<double>& Attrs::GetFloats(absl::string_view name) const {
  return std::get<std::vector<double>>(Get(name));
}

}  // namespace sluice::ops
