// Op attributes: the schema an op declares (type, default, allowed values),
// and the validated values of one op instance.
#ifndef SLUICE_OPS_ATTRS_H_
#define SLUICE_OPS_ATTRS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace google::protobuf {
class Struct;
}  // namespace google::protobuf

namespace sluice::ops {

// kInts and kFloats also accept a single number (a list of one).
enum class AttrType { kInt, kFloat, kBool, kString, kInts, kFloats };

absl::string_view AttrTypeName(AttrType type);

// One attr of an op. The constraints are checked when an instance is bound,
// so inference sees only allowed values and every error names the attr and
// what it allows. Chain the setters on a brace-initialized schema:
//   AttrSchema{"mirror", AttrType::kFloat, "0.5", "probability"}.Range(0, 1)
struct AttrSchema {
  AttrSchema(std::string name, AttrType type, std::string default_json, std::string doc)
      : name(std::move(name)), type(type), default_json(std::move(default_json)), doc(std::move(doc)) {}

  std::string name;
  AttrType type;
  // JSON text of the default, e.g. "11", "\"image\"", "[0.1, 2.0]"; empty
  // when the attr is required.
  std::string default_json;
  std::string doc;
  // Numbers (each number of a list): min <= v (min < v when min_exclusive)
  // and v <= max.
  std::optional<double> min, max;
  bool min_exclusive = false;
  // Strings: the allowed values (empty: any).
  std::vector<std::string> choices;
  // Lists: how many values (max_count 0: no limit).
  int min_count = 0, max_count = 0;

  AttrSchema& Range(double lo, double hi);
  AttrSchema& AtLeast(double lo);
  AttrSchema& Above(double lo);
  AttrSchema& OneOf(std::vector<std::string> values);
  AttrSchema& Count(int lo, int hi);

  // What the constraints allow, in words: "in [0, 1]", "> 0", "one of
  // \"CHW\", \"HWC\"", "1 or 2 values"; empty when anything goes.
  std::string Constraint() const;
};

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

// The attrs of one op instance, converted to their declared types, defaults
// filled in. Immutable after Bind.
class Attrs {
 public:
  // Validates `values` (JSON-like, from PipelineDef) against `schema`:
  // InvalidArgument naming the attr for an unknown name, a missing required
  // attr, a value of the wrong type or one its constraints do not allow.
  static absl::StatusOr<Attrs> Bind(const std::vector<AttrSchema>& schema, const google::protobuf::Struct& values);
  // Whether every default in `schema` is JSON of its attr's type (its
  // constraints aside: one out of range may mean "unset"): InvalidArgument
  // naming the attr and the default otherwise (a string default is JSON
  // text, quoted: "\"image\"").
  static absl::Status CheckDefaults(const std::vector<AttrSchema>& schema);

  // REQUIRES: `name` is declared with the matching type.
  int64_t GetInt(absl::string_view name) const;
  double GetFloat(absl::string_view name) const;
  bool GetBool(absl::string_view name) const;
  const std::string& GetString(absl::string_view name) const;
  const std::vector<int64_t>& GetInts(absl::string_view name) const;
  const std::vector<double>& GetFloats(absl::string_view name) const;

 private:
  const AttrValue& Get(absl::string_view name) const;
  std::map<std::string, AttrValue, std::less<>> values_;
};

// InvalidArgument "attr 'name' <message>", the form every op uses.
absl::Status AttrError(absl::string_view name, absl::string_view message);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_ATTRS_H_
