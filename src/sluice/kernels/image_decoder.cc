#include "sluice/kernels/image_decoder.h"

// libjpeg's headers need FILE and size_t declared first.
#include <jpeglib.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/image_framing.h"
#include "sluice/kernels/netpbm.h"
#include "sluice/kernels/png_decode.h"
#include "sluice/kernels/webp_decode.h"

namespace sluice::kernels {
namespace {

// libjpeg reports errors through error_exit, which must not return: it
// jumps back to the decoder with the message kept.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnJpegError(j_common_ptr cinfo) {
  JpegError* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void OnJpegWarning(j_common_ptr, int) {}  // corrupt-data warnings: decode what is there, as PIL does

// A decompressor whose errors land in `error`; destroyed at scope exit.
class Jpeg {
 public:
  Jpeg() {
    cinfo_.err = jpeg_std_error(&error_.mgr);
    error_.mgr.error_exit = OnJpegError;
    error_.mgr.emit_message = OnJpegWarning;
    error_.message[0] = '\0';
    jpeg_create_decompress(&cinfo_);
  }
  ~Jpeg() { jpeg_destroy_decompress(&cinfo_); }
  jpeg_decompress_struct* cinfo() { return &cinfo_; }
  JpegError& error() { return error_; }

 private:
  jpeg_decompress_struct cinfo_;
  JpegError error_;
};

absl::Status JpegFailure(const JpegError& e) { return absl::DataLossError(absl::StrCat("corrupt JPEG: ", e.message)); }

// Grows, never shrinks: a vector shrunk and grown again zero-fills the
// regrown part, a memset per image for nothing.
void GrowTo(size_t bytes, std::vector<uint8_t>* pixels) {
  if (pixels->size() < bytes) pixels->resize(bytes);
}

// CMYK as Adobe writes it (inverted) or plain, to RGB.
void CmykToRgb(const uint8_t* cmyk, int n, bool inverted, uint8_t* rgb) {
  for (int i = 0; i < n; ++i) {
    int c = cmyk[4 * i], m = cmyk[4 * i + 1], y = cmyk[4 * i + 2], k = cmyk[4 * i + 3];
    if (!inverted) {
      c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
    }
    rgb[3 * i] = static_cast<uint8_t>((c * k + 127) / 255);
    rgb[3 * i + 1] = static_cast<uint8_t>((m * k + 127) / 255);
    rgb[3 * i + 2] = static_cast<uint8_t>((y * k + 127) / 255);
  }
}

// The pixels to decode past a window's edges (in the decoded image's pixels,
// `extent` of them across it) for the filter resizing it to `out`: one for
// a window read inside (its edges rounded out), the filter's reach else.
int Reach(const Window& window, double extent, int out) { return window.inside ? 1 : FilterReach(extent, out); }

// setjmp must be in the function whose locals stay valid after the jump:
// the decoder's state lives in `jpeg`, the caller's.
absl::Status DecodeJpeg(Jpeg& jpeg, absl::string_view bytes, const ImageInfo& info, const Window& window,
                        int scale_denom, int out_w, int out_h, DecodedRegion* out) {
  jpeg_decompress_struct* cinfo = jpeg.cinfo();
  std::vector<uint8_t> cmyk_row;
  if (setjmp(jpeg.error().jump)) return JpegFailure(jpeg.error());
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  const bool cmyk = cinfo->jpeg_color_space == JCS_CMYK || cinfo->jpeg_color_space == JCS_YCCK;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  cinfo->scale_num = 1;
  cinfo->scale_denom = static_cast<unsigned int>(scale_denom);
  jpeg_start_decompress(cinfo);
  // A decoded pixel is a block of scale_denom source pixels, the last one
  // partly past the edge (output_width is ceil(width / denom)): scaling
  // by output_width / width stretched the image by up to denom - 1 pixels.
  const double sx = 1.0 / scale_denom, sy = sx;
  // The window in decoded pixels, widened to whole pixels and the filter's
  // reach past its edges.
  const int reach_x = Reach(window, window.w * sx, out_w), reach_y = Reach(window, window.h * sy, out_h);
  JDIMENSION x0 = static_cast<JDIMENSION>(std::max(0.0, std::floor(window.x * sx) - reach_x));
  const JDIMENSION x1 =
      static_cast<JDIMENSION>(std::min<double>(cinfo->output_width, std::ceil((window.x + window.w) * sx) + reach_x));
  const JDIMENSION y0 = static_cast<JDIMENSION>(std::max(0.0, std::floor(window.y * sy) - reach_y));
  const JDIMENSION y1 =
      static_cast<JDIMENSION>(std::min<double>(cinfo->output_height, std::ceil((window.y + window.h) * sy) + reach_y));
  JDIMENSION width = x1 - x0;
  if (width < cinfo->output_width) jpeg_crop_scanline(cinfo, &x0, &width);  // moves x0 to an iMCU boundary
  if (y0 > 0) jpeg_skip_scanlines(cinfo, y0);
  const int rows = static_cast<int>(y1 - y0);
  out->width = static_cast<int>(width);
  out->height = rows;
  GrowTo(static_cast<size_t>(rows) * width * 3, &out->pixels);
  if (cmyk) cmyk_row.resize(static_cast<size_t>(width) * 4);
  for (int r = 0; r < rows; ++r) {
    uint8_t* dst = out->pixels.data() + static_cast<size_t>(r) * width * 3;
    JSAMPROW row = cmyk ? cmyk_row.data() : dst;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) return absl::DataLossError("corrupt JPEG: too few rows");
    if (cmyk) CmykToRgb(cmyk_row.data(), static_cast<int>(width), cinfo->saw_Adobe_marker, dst);
  }
  out->window = Window{window.x * sx - x0, window.y * sy - y0, window.w * sx, window.h * sy, window.inside};
  jpeg_abort_decompress(cinfo);  // the rows below the window are not needed
  return absl::OkStatus();
}

// PNG and WebP: the whole image (the window lies within it).
absl::Status DecodeWhole(absl::string_view bytes, const ImageInfo& info, const Window& window, DecodedRegion* out) {
  SLUICE_RETURN_IF_ERROR(info.webp ? DecodeWebpRgb(bytes, &out->width, &out->height, &out->pixels)
                                   : DecodePngRgb(bytes, &out->width, &out->height, &out->pixels));
  out->window = window;
  return absl::OkStatus();
}

// Raw pixels: only the window's rows and columns (and the filter's reach
// past its edges), gray made RGB.
absl::Status DecodeNetpbm(absl::string_view bytes, const Window& window, int out_w, int out_h, DecodedRegion* out) {
  absl::StatusOr<NetpbmHeader> h = ReadNetpbmHeader(bytes);
  if (!h.ok()) return h.status();
  const int reach_x = Reach(window, window.w, out_w), reach_y = Reach(window, window.h, out_h);
  const int x0 = static_cast<int>(std::max(0.0, std::floor(window.x) - reach_x));
  const int x1 = static_cast<int>(std::min<double>(h->width, std::ceil(window.x + window.w) + reach_x));
  const int y0 = static_cast<int>(std::max(0.0, std::floor(window.y) - reach_y));
  const int y1 = static_cast<int>(std::min<double>(h->height, std::ceil(window.y + window.h) + reach_y));
  out->width = x1 - x0;
  out->height = y1 - y0;
  GrowTo(static_cast<size_t>(out->width) * out->height * 3, &out->pixels);
  const size_t stride = static_cast<size_t>(h->width) * h->channels;
  for (int y = y0; y < y1; ++y) {
    const auto* src = reinterpret_cast<const uint8_t*>(bytes.data()) + h->pixels_at + y * stride +
                      static_cast<size_t>(x0) * h->channels;
    uint8_t* dst = out->pixels.data() + static_cast<size_t>(y - y0) * out->width * 3;
    if (h->channels == 3) {
      std::memcpy(dst, src, static_cast<size_t>(out->width) * 3);
      continue;
    }
    for (int x = 0; x < out->width; ++x) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = src[x];
  }
  out->window = Window{window.x - x0, window.y - y0, window.w, window.h, window.inside};
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImageInfo> ReadImageInfo(absl::string_view bytes) {
  const std::string problem = io::ImageFramingProblem(bytes);
  if (!problem.empty()) return absl::DataLossError(problem);
  ImageInfo info;
  if (IsNetpbm(bytes)) {
    absl::StatusOr<NetpbmHeader> h = ReadNetpbmHeader(bytes);
    if (!h.ok()) return h.status();
    info.width = h->width;
    info.height = h->height;
    info.netpbm = true;
    return info;
  }
  if (IsPng(bytes)) {
    SLUICE_RETURN_IF_ERROR(ReadPngSize(bytes, &info.width, &info.height));
    return info;
  }
  if (IsWebp(bytes)) {
    SLUICE_RETURN_IF_ERROR(ReadWebpSize(bytes, &info.width, &info.height));
    info.webp = true;
    return info;
  }
  Jpeg jpeg;
  jpeg_decompress_struct* cinfo = jpeg.cinfo();
  if (setjmp(jpeg.error().jump)) return JpegFailure(jpeg.error());
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  info.width = static_cast<int>(cinfo->image_width);
  info.height = static_cast<int>(cinfo->image_height);
  info.jpeg = true;
  return info;
}

int FilterReach(double extent, int out) { return static_cast<int>(std::ceil(std::max(extent / out, 1.0))) + 1; }

Window WholeImage(const ImageInfo& info) {
  return Window{0, 0, static_cast<double>(info.width), static_cast<double>(info.height)};
}

int DctScaleFor(const ImageInfo& info, const Window& window, int out_w, int out_h) {
  if (!info.jpeg) return 1;
  int denom = 1;
  while (denom < 8 && window.w / (2 * denom) >= out_w && window.h / (2 * denom) >= out_h) denom *= 2;
  return denom;
}

absl::Status DecodeRegion(absl::string_view bytes, const ImageInfo& info, const Window& window, int scale_denom,
                          int out_w, int out_h, DecodedRegion* out) {
  if (info.netpbm) return DecodeNetpbm(bytes, window, out_w, out_h, out);
  if (!info.jpeg) return DecodeWhole(bytes, info, window, out);
  Jpeg jpeg;
  return DecodeJpeg(jpeg, bytes, info, window, scale_denom, out_w, out_h, out);
}

}  // namespace sluice::kernels
