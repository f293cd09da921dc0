#include "sluice/ops/op_schema.h"

namespace sluice::ops {

OpSchema& OpSchema::Doc(std::string doc) {
  doc_ = std::move(doc);
  return *this;
}

OpSchema& OpSchema::Attr(AttrSchema attr) {
  attrs_.push_back(std::move(attr));
  return *this;
}

OpSchema& OpSchema::Input(std::string name, std::string doc) {
  inputs_.push_back({std::move(name), std::move(doc)});
  return *this;
}

OpSchema& OpSchema::Output(std::string name, std::string doc) {
  outputs_.push_back({std::move(name), std::move(doc)});
  return *this;
}

OpSchema& OpSchema::Random() {
  random_ = true;
  return *this;
}

OpSchema& OpSchema::BatchLevel() {
  level_ = OpLevel::kBatch;
  return *this;
}

OpSchema& OpSchema::Predicate() {
  predicate_ = true;
  return *this;
}

OpSchema& OpSchema::InPlace() {
  in_place_ = true;
  return *this;
}

OpSchema& OpSchema::WholeRanges() {
  whole_ranges_ = true;
  return *this;
}

OpSchema& OpSchema::View() {
  view_ = true;
  return *this;
}

OpSchema& OpSchema::Elementwise() {
  elementwise_ = true;
  return *this;
}

OpSchema& OpSchema::Internal() {
  internal_ = true;
  return *this;
}

OpSchema& OpSchema::Infer(InferFn infer) {
  infer_ = std::move(infer);
  return *this;
}

}  // namespace sluice::ops
