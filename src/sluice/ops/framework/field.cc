#include "sluice/ops/field.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/value_loops.h"

namespace sluice::ops {

using kernels::StoreAs;

AttrSchema FieldAttr() { return {"field", AttrType::kString, "\"image\"", "the column to transform"}; }

absl::StatusOr<BoundField> BindField(const Attrs& attrs, const Schema& schema, std::initializer_list<DType> dtypes) {
  const std::string& name = attrs.GetString("field");
  std::optional<int> column = schema.Find(name);
  if (!column) {
    return AttrError("field", absl::StrCat("names no column: '", name, "' (columns: ", schema.Names(), ")"));
  }
  const ColumnSpec& spec = schema.column(*column);
  if (spec.ragged) {
    return AttrError("field", absl::StrCat("column '", name,
                                           "' holds variable-length bytes; decode it first (decode_image), or, "
                                           "for raw pixels, give it a fixed length at the source: (\"bytes\", N) "
                                           "in Python, BytesFeature(\"",
                                           name, "\", N) in C++"));
  }
  for (DType d : dtypes) {
    if (spec.dtype == d) return BoundField{*column, spec};
  }
  return AttrError("field", absl::StrCat("column '", name, "' is ", DTypeName(spec.dtype), ", this op takes ",
                                         absl::StrJoin(dtypes, " or ", [](std::string* out, DType d) {
                                           out->append(std::string(DTypeName(d)));
                                         })));
}

absl::StatusOr<ImageDims> ImageDimsOf(const ColumnSpec& spec) {
  const Shape& s = spec.shape;
  if (s.rank() == 2) return ImageDims{s.dim(0), s.dim(1), 1};
  if (s.rank() == 3) return ImageDims{s.dim(0), s.dim(1), s.dim(2)};
  return absl::InvalidArgumentError(absl::StrCat("column '", spec.name, "' has shape ", s.ToString(),
                                                 " but this op needs an image [H,W] or [H,W,C] (reshape it first)"));
}

AttrSchema LayoutAttr() {
  return AttrSchema{"layout", AttrType::kString, "\"CHW\"", "where the channels of [.,.,.] images are"}.OneOf(
      {"CHW", "HWC"});
}

absl::StatusOr<LaidOutImage> BindLayout(const Attrs& attrs, const ColumnSpec& spec, const char* op) {
  const Shape& s = spec.shape;
  if (s.rank() == 2) return LaidOutImage{ImageDims{s.dim(0), s.dim(1), 1}, false};
  if (s.rank() != 3) {
    return AttrError("field", absl::StrCat("column '", spec.name, "' is ", s.ToString(), "; ", op,
                                           " takes images [C,H,W], [H,W,C] or [H,W]"));
  }
  if (attrs.GetString("layout") == "CHW") return LaidOutImage{ImageDims{s.dim(1), s.dim(2), s.dim(0)}, true};
  return LaidOutImage{ImageDims{s.dim(0), s.dim(1), s.dim(2)}, false};
}

absl::StatusOr<ImageDims> BindUint8Image(const Attrs& attrs, const Schema& schema, BoundField* f) {
  SLUICE_ASSIGN_OR_RETURN(*f, BindField(attrs, schema, {DType::kUInt8}));
  if (f->spec.shape.rank() != 3) {
    return AttrError("field", absl::StrCat("column '", f->spec.name, "' is ", f->spec.shape.ToString(),
                                           "; this op takes an image [H,W,C]"));
  }
  return ImageDimsOf(f->spec);
}

absl::StatusOr<std::pair<BoundField, ImageDims>> BindColorImage(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8}));
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
  if (d.c != 1 && d.c != 3) {
    return AttrError("field", absl::StrCat("column '", f.spec.name, "' is ", f.spec.shape.ToString(),
                                           "; this op takes RGB or one-channel images"));
  }
  return std::make_pair(std::move(f), d);
}

AttrSchema FillAttr(const char* what) {
  return {"fill", AttrType::kFloats, "0", absl::StrCat(what, ": one value, or one per channel")};
}

absl::StatusOr<std::vector<uint8_t>> FillPixel(const std::vector<double>& fill, DType dtype, int64_t channels) {
  if (fill.size() != 1 && static_cast<int64_t>(fill.size()) != channels) {
    return AttrError("fill",
                     absl::StrCat("has ", fill.size(), " values; give one, or one per channel (", channels, ")"));
  }
  std::vector<uint8_t> pixel(channels * DTypeSize(dtype));
  DispatchImageType(dtype, [&](auto t) {
    using T = decltype(t);
    for (int64_t c = 0; c < channels; ++c) {
      const T v = StoreAs<T>(static_cast<float>(fill[fill.size() == 1 ? 0 : c]));
      std::memcpy(pixel.data() + c * sizeof(T), &v, sizeof(T));
    }
  });
  return pixel;
}

}  // namespace sluice::ops
