#include "sluice/ops/attrs.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

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
  // Beyond +-2^63 the conversion is undefined: no attr needs such values.
  if (std::abs(v.number_value()) >= 9.2e18) {
    return AttrError(s.name, absl::StrCat("must be an integer within +-9.2e18, got ", Describe(v)));
  }
  return static_cast<int64_t>(v.number_value());
}

absl::StatusOr<double> ToFloat(const AttrSchema& s, const Value& v) {
  if (v.kind_case() != Value::kNumberValue) {
    return AttrError(s.name, absl::StrCat("must be a number, got ", Describe(v)));
  }
  // A NaN or an infinity (a C++ builder's, JSON has none) would fill every
  // output with NaN, silently.
  if (!std::isfinite(v.number_value())) {
    return AttrError(s.name, absl::StrCat("must be a finite number, got ", v.number_value()));
  }
  // The kernels compute in 32-bit floats, in which a larger value is an
  // infinity (1e39 made every output NaN or 0).
  if (std::abs(v.number_value()) > std::numeric_limits<float>::max()) {
    return AttrError(s.name, absl::StrCat("must be within +-3.4e38 (a 32-bit float), got ", v.number_value()));
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
      return AttrError(s.name, absl::StrCat("must be a list of ", AttrTypeName(s.type), ", got ", Describe(v)));
    }
    out.push_back(*x);
  }
  return out;
}

// Numbers as they were written: 3, not 3.000000; 2147483647, not 2.14748e+09.
std::string Number(double v) {
  if (v == std::floor(v) && std::abs(v) < 9.2e18) return absl::StrCat(static_cast<int64_t>(v));
  return absl::StrCat(v);
}

std::string Quoted(const std::vector<std::string>& values) {
  return absl::StrJoin(values, ", ",
                       [](std::string* out, const std::string& v) { absl::StrAppend(out, "\"", v, "\""); });
}

bool InRange(const AttrSchema& s, double v) {
  if (s.min && (s.min_exclusive ? !(v > *s.min) : !(v >= *s.min))) return false;
  return !s.max || v <= *s.max;
}

// InvalidArgument naming the attr unless `value` meets its constraints.
absl::Status CheckConstraints(const AttrSchema& s, const AttrValue& value) {
  auto fail = [&](const std::string& got) {
    return AttrError(s.name, absl::StrCat("must be ", s.Constraint(), ", got ", got));
  };
  if (const auto* str = std::get_if<std::string>(&value)) {
    if (s.choices.empty()) return absl::OkStatus();
    for (const std::string& c : s.choices) {
      if (c == *str) return absl::OkStatus();
    }
    return fail(absl::StrCat("\"", *str, "\""));
  }
  std::vector<double> numbers;
  bool list = false;
  if (const auto* i = std::get_if<int64_t>(&value)) numbers = {static_cast<double>(*i)};
  if (const auto* f = std::get_if<double>(&value)) numbers = {*f};
  if (const auto* is = std::get_if<std::vector<int64_t>>(&value)) {
    numbers.assign(is->begin(), is->end());
    list = true;
  }
  if (const auto* fs = std::get_if<std::vector<double>>(&value)) {
    numbers = *fs;
    list = true;
  }
  const std::string written =
      list ? absl::StrCat("[", absl::StrJoin(numbers, ", ", [](std::string* out, double v) { out->append(Number(v)); }),
                          "]")
           : (numbers.empty() ? "" : Number(numbers[0]));
  const int n = static_cast<int>(numbers.size());
  if (list && (n < s.min_count || (s.max_count > 0 && n > s.max_count))) return fail(written);
  for (double v : numbers) {
    if (!InRange(s, v)) return fail(written);
  }
  return absl::OkStatus();
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

AttrSchema& AttrSchema::Range(double lo, double hi) {
  min = lo;
  max = hi;
  return *this;
}

AttrSchema& AttrSchema::AtLeast(double lo) {
  min = lo;
  return *this;
}

AttrSchema& AttrSchema::Above(double lo) {
  min = lo;
  min_exclusive = true;
  return *this;
}

AttrSchema& AttrSchema::OneOf(std::vector<std::string> values) {
  choices = std::move(values);
  return *this;
}

AttrSchema& AttrSchema::Count(int lo, int hi) {
  min_count = lo;
  max_count = hi;
  return *this;
}

std::string AttrSchema::Constraint() const {
  std::vector<std::string> parts;
  if (!choices.empty()) parts.push_back(absl::StrCat("one of ", Quoted(choices)));
  if (min_count > 0 || max_count > 0) {
    if (max_count == min_count) {
      parts.push_back(absl::StrCat(min_count, min_count == 1 ? " value" : " values"));
    } else if (max_count == 0) {
      parts.push_back(absl::StrCat(min_count, " or more values"));
    } else if (max_count == min_count + 1) {
      parts.push_back(absl::StrCat(min_count, " or ", max_count, " values"));
    } else {
      parts.push_back(absl::StrCat(min_count, " to ", max_count, " values"));
    }
  }
  const bool list = type == AttrType::kInts || type == AttrType::kFloats;
  std::string range;
  if (min && max) {
    range = absl::StrCat("in [", Number(*min), ", ", Number(*max), "]");
  } else if (min) {
    range = absl::StrCat(min_exclusive ? "> " : ">= ", Number(*min));
  } else if (max) {
    range = absl::StrCat("<= ", Number(*max));
  }
  if (!range.empty()) parts.push_back(list ? absl::StrCat("each ", range) : range);
  return absl::StrJoin(parts, ", ");
}

absl::Status AttrError(absl::string_view name, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("attr '", name, "' ", message));
}

absl::Status Attrs::CheckDefaults(const std::vector<AttrSchema>& schema) {
  for (const AttrSchema& s : schema) {
    if (s.default_json.empty()) continue;
    Value v;
    absl::StatusOr<AttrValue> value = absl::InvalidArgumentError("not JSON");
    if (google::protobuf::util::JsonStringToMessage(s.default_json, &v).ok()) value = Convert(s, v);
    // Its constraints are not checked: a default out of range can mean "unset".
    const absl::Status checked = value.status();
    if (!checked.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("attr '", s.name, "': its default ", s.default_json,
                                                     " is no JSON value it takes (", checked.message(),
                                                     "); a string default is JSON text, quoted: \"\\\"image\\\"\""));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Attrs> Attrs::Bind(const std::vector<AttrSchema>& schema, const google::protobuf::Struct& values) {
  Attrs attrs;
  for (const auto& [name, value] : values.fields()) {
    const AttrSchema* s = nullptr;
    for (const AttrSchema& candidate : schema) {
      if (candidate.name == name) s = &candidate;
    }
    if (s == nullptr) {
      return AttrError(
          name,
          absl::StrCat("is unknown (attrs: ",
                       absl::StrJoin(schema, ", ", [](std::string* out, const AttrSchema& a) { out->append(a.name); }),
                       ")"));
    }
    SLUICE_ASSIGN_OR_RETURN(attrs.values_[name], Convert(*s, value));
    SLUICE_RETURN_IF_ERROR(CheckConstraints(*s, attrs.values_[name]));
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

const AttrValue& Attrs::Get(absl::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {  // an op reading an attr its schema does not declare: a defect of the op
    std::fprintf(stderr, "sluice: an op read attr '%s', which its schema does not declare\n",
                 std::string(name).c_str());
    std::abort();
  }
  return it->second;
}
int64_t Attrs::GetInt(absl::string_view name) const { return std::get<int64_t>(Get(name)); }
double Attrs::GetFloat(absl::string_view name) const { return std::get<double>(Get(name)); }
bool Attrs::GetBool(absl::string_view name) const { return std::get<bool>(Get(name)); }
const std::string& Attrs::GetString(absl::string_view name) const { return std::get<std::string>(Get(name)); }
const std::vector<int64_t>& Attrs::GetInts(absl::string_view name) const {
  return std::get<std::vector<int64_t>>(Get(name));
}
const std::vector<double>& Attrs::GetFloats(absl::string_view name) const {
  return std::get<std::vector<double>>(Get(name));
}

}  // namespace sluice::ops
