// libpng's full API rather than its simplified one: the simplified API
// reads 16-bit samples as linear light and converts them to sRGB, and
// without a background it blends partly transparent pixels onto whatever
// the output buffer held before (an image's values then depended on the
// image decoded before it).
#include "sluice/kernels/png_decode.h"

#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace sluice::kernels {
namespace {

// Where libpng reads from, and the message of its error.
struct Input {
  const uint8_t* data;
  size_t size;
  size_t at;
  std::string error;
};

void ReadInput(png_structp png, png_bytep out, size_t n) {
  auto* in = static_cast<Input*>(png_get_io_ptr(png));
  if (n > in->size - in->at) png_error(png, "the file ends within the image");
  std::memcpy(out, in->data + in->at, n);
  in->at += n;
}

// libpng's errors must not return: the message is kept and the decoder
// jumps back.
void OnError(png_structp png, png_const_charp message) {
  static_cast<Input*>(png_get_error_ptr(png))->error = message;
  png_longjmp(png, 1);
}

void OnWarning(png_structp, png_const_charp) {}  // e.g. a bad CRC in an ancillary chunk: read on, as PIL does

// A read struct and its info, destroyed at scope exit.
class Png {
 public:
  explicit Png(Input* in)
      : png_(png_create_read_struct(PNG_LIBPNG_VER_STRING, in, OnError, OnWarning)),
        info_(png_ != nullptr ? png_create_info_struct(png_) : nullptr) {
    if (info_ != nullptr) png_set_read_fn(png_, in, ReadInput);
  }
  ~Png() { png_destroy_read_struct(&png_, info_ != nullptr ? &info_ : nullptr, nullptr); }
  Png(const Png&) = delete;
  Png& operator=(const Png&) = delete;
  bool ok() const { return info_ != nullptr; }
  png_structp png() const { return png_; }
  png_infop info() const { return info_; }

 private:
  png_structp png_;
  png_infop info_;
};

// The header, then the transforms to 8-bit RGB. No C++ object lives in a
// frame libpng may jump out of.
bool ReadHeader(const Png& p, int* width, int* height) {
  if (setjmp(png_jmpbuf(p.png()))) return false;
  png_read_info(p.png(), p.info());
  *width = static_cast<int>(png_get_image_width(p.png(), p.info()));
  *height = static_cast<int>(png_get_image_height(p.png(), p.info()));
  return true;
}

bool ReadRgb(const Png& p, uint8_t* pixels, int height) {
  if (setjmp(png_jmpbuf(p.png()))) return false;
  png_set_expand(p.png());  // palettes to RGB, gray below 8 bits to 8, tRNS to alpha
  png_set_strip_16(p.png());
  png_set_strip_alpha(p.png());
  png_set_gray_to_rgb(p.png());
  const int passes = png_set_interlace_handling(p.png());
  png_read_update_info(p.png(), p.info());
  const size_t stride = png_get_rowbytes(p.png(), p.info());
  for (int pass = 0; pass < passes; ++pass) {
    for (int y = 0; y < height; ++y) png_read_row(p.png(), pixels + static_cast<size_t>(y) * stride, nullptr);
  }
  return true;
}

absl::Status Corrupt(const Input& in) { return absl::DataLossError(absl::StrCat("corrupt PNG: ", in.error)); }

}  // namespace

bool IsPng(absl::string_view b) {
  return b.size() >= 8 && png_sig_cmp(reinterpret_cast<png_const_bytep>(b.data()), 0, 8) == 0;
}

absl::Status ReadPngSize(absl::string_view bytes, int* width, int* height) {
  Input in{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0, "out of memory"};
  Png p(&in);
  if (!p.ok() || !ReadHeader(p, width, height)) return Corrupt(in);
  return absl::OkStatus();
}

absl::Status DecodePngRgb(absl::string_view bytes, int* width, int* height, std::vector<uint8_t>* pixels) {
  Input in{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0, "out of memory"};
  Png p(&in);
  if (!p.ok() || !ReadHeader(p, width, height)) return Corrupt(in);
  const size_t size = static_cast<size_t>(*width) * static_cast<size_t>(*height) * 3;
  if (pixels->size() < size) pixels->resize(size);
  if (!ReadRgb(p, pixels->data(), *height)) return Corrupt(in);
  return absl::OkStatus();
}

}  // namespace sluice::kernels
