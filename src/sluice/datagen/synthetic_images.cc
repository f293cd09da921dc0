#include "sluice/datagen/synthetic_images.h"

// libjpeg's headers need FILE and size_t declared first.
#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "example.pb.h"
#include "sluice/core/rng.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/older_files.h"
#include "sluice/datagen/synthetic_data.h"
#include "sluice/io/random_access_file.h"
#include "sluice/io/staged_directory.h"
#include "sluice/io/tfrecord_writer.h"

namespace sluice::datagen {
namespace {

struct Shape {
  double cx, cy, rx, ry, cos_a, sin_a, softness;
  double color[3];
  bool ellipse;
};

double Smoothstep(double e0, double e1, double x) {
  const double t = std::clamp((x - e0) / (e1 - e0), 0.0, 1.0);
  return t * t * (3 - 2 * t);
}

struct JpegWriteError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnJpegWriteError(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegWriteError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

}  // namespace

Image PhotoLikeImage(int width, int height, uint64_t seed) {
  SampleRng rng(seed, 0x1a9e5, 0, 0);
  auto u = [&](double lo, double hi) { return rng.Uniform(static_cast<float>(lo), static_cast<float>(hi)); };
  double corners[4][3];
  for (auto& c : corners) {
    for (double& v : c) v = u(20, 235);
  }
  std::vector<Shape> shapes(static_cast<size_t>(u(8, 20)));
  for (Shape& s : shapes) {
    const double angle = u(0, 3.14159);
    s = Shape{u(0, width),
              u(0, height),
              u(width * 0.03, width * 0.3),
              u(height * 0.03, height * 0.3),
              std::cos(angle),
              std::sin(angle),
              u(0.01, 0.2),
              {u(0, 255), u(0, 255), u(0, 255)},
              rng.Bernoulli(0.6f)};
  }
  // Texture at two scales and sensor-like noise: the high frequencies that
  // make photos cost what they do to encode and decode.
  const double fx = u(0.05, 0.3), fy = u(0.05, 0.3), amp = u(4, 14);
  const double gx = u(0.5, 1.5), gy = u(0.5, 1.5), fine = u(3, 8);
  Image img{width, height, 3, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    const double ty = static_cast<double>(y) / (height - 1);
    for (int x = 0; x < width; ++x) {
      const double tx = static_cast<double>(x) / (width - 1);
      double rgb[3];
      for (int c = 0; c < 3; ++c) {  // a bilinear blend of the corners
        rgb[c] = (1 - ty) * ((1 - tx) * corners[0][c] + tx * corners[1][c]) +
                 ty * ((1 - tx) * corners[2][c] + tx * corners[3][c]);
      }
      for (const Shape& s : shapes) {
        const double dx = x - s.cx, dy = y - s.cy;
        const double px = (dx * s.cos_a + dy * s.sin_a) / s.rx, py = (-dx * s.sin_a + dy * s.cos_a) / s.ry;
        const double d = s.ellipse ? std::sqrt(px * px + py * py) : std::max(std::abs(px), std::abs(py));
        const double alpha = 1 - Smoothstep(1 - s.softness, 1 + s.softness, d);
        if (alpha <= 0) continue;
        for (int c = 0; c < 3; ++c) rgb[c] = (1 - alpha) * rgb[c] + alpha * (s.color[c] * (0.8 + 0.2 * py));
      }
      const double texture = amp * std::sin(x * fx + 2 * std::sin(y * fy)) * std::cos(y * fx * 0.7) +
                             fine * std::sin(x * gx) * std::sin(y * gy);
      uint8_t* out = &img.pixels[(static_cast<size_t>(y) * width + x) * 3];
      for (int c = 0; c < 3; ++c) {
        const double noise = (static_cast<int>(rng.NextU32() % 25) - 12);
        out[c] = static_cast<uint8_t>(std::clamp(rgb[c] + texture + noise, 0.0, 255.0));
      }
    }
  }
  return img;
}

Image ToGray(const Image& rgb) {
  Image g{rgb.width, rgb.height, 1, std::vector<uint8_t>(static_cast<size_t>(rgb.width) * rgb.height)};
  for (size_t i = 0; i < g.pixels.size(); ++i) {
    const uint8_t* p = &rgb.pixels[3 * i];
    g.pixels[i] = static_cast<uint8_t>((299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000);
  }
  return g;
}

Image ToCmyk(const Image& rgb) {
  Image out{rgb.width, rgb.height, 4, std::vector<uint8_t>(static_cast<size_t>(rgb.width) * rgb.height * 4)};
  for (size_t i = 0; i < static_cast<size_t>(rgb.width) * rgb.height; ++i) {
    const uint8_t* p = &rgb.pixels[3 * i];
    const int k = 255 - std::max({p[0], p[1], p[2]});
    uint8_t* q = &out.pixels[4 * i];
    for (int c = 0; c < 3; ++c) q[c] = static_cast<uint8_t>(k == 255 ? 0 : (255 - p[c] - k) * 255 / (255 - k));
    q[3] = static_cast<uint8_t>(k);
  }
  return out;
}

absl::StatusOr<std::string> EncodeJpeg(const Image& image, int quality, bool progressive) {
  jpeg_compress_struct cinfo;
  JpegWriteError error;
  cinfo.err = jpeg_std_error(&error.mgr);
  error.mgr.error_exit = OnJpegWriteError;
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_create_compress(&cinfo);
  if (setjmp(error.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(buffer);
    return absl::InternalError(absl::StrCat("JPEG encoding: ", error.message));
  }
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(image.width);
  cinfo.image_height = static_cast<JDIMENSION>(image.height);
  cinfo.input_components = image.channels;
  cinfo.in_color_space = image.channels == 1 ? JCS_GRAYSCALE : image.channels == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  const int stride = image.width * image.channels;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(&image.pixels[static_cast<size_t>(cinfo.next_scanline) * stride]);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buffer), size);
  jpeg_destroy_compress(&cinfo);
  std::free(buffer);
  return out;
}

absl::StatusOr<std::string> EncodePng(const Image& image) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr)) {
    return absl::InternalError(absl::StrCat("PNG encoding: ", png.message));
  }
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&png, out.data(), &size, 0, image.pixels.data(), 0, nullptr)) {
    return absl::InternalError(absl::StrCat("PNG encoding: ", png.message));
  }
  out.resize(size);
  return out;
}

absl::StatusOr<SyntheticImageFile> MakeSyntheticImageFile(int64_t index, int classes, uint64_t seed) {
  SyntheticImageFile file;
  file.label = static_cast<int>(index % classes);
  SampleRng pick(seed, 0x517e, 0, static_cast<uint64_t>(index));
  const bool portrait = pick.Bernoulli(0.2f);
  const int w = portrait ? 375 : 500 + static_cast<int>(pick.NextU32() % 41) - 20;
  const int h = portrait ? 500 : 375;
  Image image = PhotoLikeImage(w, h, seed * 1000003 + static_cast<uint64_t>(index));
  file.ext = SyntheticImageExt(index);
  if (file.ext == "png") {
    SLUICE_ASSIGN_OR_RETURN(file.bytes, EncodePng(image));
  } else {
    if (index % 25 == 24) image = ToGray(image);
    SLUICE_ASSIGN_OR_RETURN(file.bytes, EncodeJpeg(image, 90, index % 10 == 9));
  }
  return file;
}

std::string SyntheticImageExt(int64_t index) {
  if (index % 50 == 49) return "png";
  return index % 7 == 6 ? "JPEG" : "jpg";
}

std::string SyntheticImageName(int64_t index, int classes) {
  return absl::StrFormat("class_%03d/img_%07d.%s", index % classes, index, SyntheticImageExt(index));
}

namespace {

// The index of a file named as SyntheticImageName names one, or -1.
int64_t SyntheticImageIndex(const std::string& name) {
  int label = 0, end = 0;
  long long index = 0;  // NOLINT(runtime/int): sscanf's %lld
  char ext[5] = {};
  if (std::sscanf(name.c_str(), "class_%d/img_%lld.%4[a-zA-Z]%n", &label, &index, ext, &end) != 3) return -1;
  const bool exact =
      static_cast<size_t>(end) == name.size() && name == absl::StrFormat("class_%03d/img_%07d.%s", label, index, ext) &&
      (absl::string_view(ext) == "jpg" || absl::string_view(ext) == "JPEG" || absl::string_view(ext) == "png");
  return exact ? index : -1;
}

}  // namespace

absl::Status WriteSyntheticImageFolder(const std::string& dir, int64_t count, int classes, uint64_t seed,
                                       const std::function<void(int64_t, int64_t)>& progress) {
  SLUICE_RETURN_IF_ERROR(RefuseOlderFiles(
      dir, [](const std::string& name) { return SyntheticImageIndex(name) >= 0; },
      [&](const std::string& name) {
        const int64_t index = SyntheticImageIndex(name);
        return index < count && name == SyntheticImageName(index, classes);
      }));
  for (int64_t i = 0; i < count; ++i) {
    SLUICE_ASSIGN_OR_RETURN(SyntheticImageFile file, MakeSyntheticImageFile(i, classes, seed));
    SLUICE_RETURN_IF_ERROR(io::CreateDirectories(absl::StrFormat("%s/class_%03d", dir, file.label)));
    const std::string path = absl::StrCat(dir, "/", SyntheticImageName(i, classes));
    std::ofstream out(path, std::ios::binary);
    out.write(file.bytes.data(), static_cast<std::streamsize>(file.bytes.size()));
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
    progress(i + 1, count);
  }
  return absl::OkStatus();
}

absl::Status WriteSyntheticImageTfRecords(const std::string& dir, int64_t count, int classes, int files, uint64_t seed,
                                          const std::function<void(int64_t, int64_t)>& progress) {
  if (files <= 0) return absl::InvalidArgumentError("--files must be > 0");
  SLUICE_RETURN_IF_ERROR(RefuseOlderShards(dir, files, false));
  SLUICE_RETURN_IF_ERROR(io::CreateDirectories(dir));
  SLUICE_ASSIGN_OR_RETURN(io::StagedDirectory staged, io::StagedDirectory::Create(dir));  // whole or not at all
  Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  int64_t done = 0;
  for (int f = 0; f < files; ++f) {
    SLUICE_ASSIGN_OR_RETURN(
        std::unique_ptr<io::TfRecordWriter> writer,
        io::TfRecordWriter::Create(absl::StrCat(staged.staging(), "/", TfRecordShardName(f, files))));
    const int64_t n = count / files + (f < count % files ? 1 : 0);
    for (int64_t i = 0; i < n; ++i, ++done) {
      SLUICE_ASSIGN_OR_RETURN(SyntheticImageFile file, MakeSyntheticImageFile(done, classes, seed));
      features["image/encoded"].mutable_bytes_list()->Clear();
      features["image/encoded"].mutable_bytes_list()->add_value(std::move(file.bytes));
      features["image/format"].mutable_bytes_list()->Clear();
      features["image/format"].mutable_bytes_list()->add_value(file.ext == "png" ? "png" : "jpeg");
      features["image/class/label"].mutable_int64_list()->Clear();
      features["image/class/label"].mutable_int64_list()->add_value(file.label);
      SLUICE_RETURN_IF_ERROR(writer->Write(ExampleBytes(example)));
      progress(done + 1, count);
    }
    SLUICE_RETURN_IF_ERROR(writer->Close());
  }
  return staged.Commit(TfRecordShardName(0, files));
}

}  // namespace sluice::datagen
