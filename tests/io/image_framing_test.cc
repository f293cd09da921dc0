// The framing check on hand-built JPEG, PNG and WebP structures: data after
// the end marker is no truncation, an end marker inside a segment (an EXIF
// thumbnail's) or stuffed into a scan is no end, a WebP shorter than its
// header declares is cut, and files in other formats are named.
#include "sluice/io/image_framing.h"

#include <string>

#include "gtest/gtest.h"

namespace sluice::io {
namespace {

std::string Bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

// SOI; an APP1 segment holding a thumbnail's own FFD8..FFD9; a scan whose
// data holds a stuffed FF00 and a restart marker; EOI.
const std::string kHead = Bytes({0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x08, 0xFF, 0xD8, 0xFF, 0xD9, 0x00, 0x00});
// (longer than the tail the quick check reads, which would see the thumbnail's end)
const std::string kScan =
    Bytes({0xFF, 0xDA, 0x00, 0x04, 0x01, 0x02, 0x11, 0xFF, 0x00, 0x22, 0xFF, 0xD0, 0x33}) + std::string(100, '\x44');
const std::string kEnd = Bytes({0xFF, 0xD9});
const std::string kTrailer =
    "\x00\x00\x00\x18"
    "ftypmp42" +
    std::string(100, 'v');  // a Motion Photo's video

TEST(ImageFraming, AJpegWithDataAfterItsEndIsWhole) {
  EXPECT_EQ(ImageFramingProblem(kHead + kScan + kEnd), "");
  EXPECT_EQ(ImageFramingProblem(kHead + kScan + kEnd + kTrailer), "");
}

TEST(ImageFraming, AJpegCutBeforeItsEndIsTruncatedWhateverEndMarkersItsSegmentsHold) {
  const std::string truncated = "truncated JPEG (no end-of-image marker)";
  EXPECT_EQ(ImageFramingProblem(kHead + kScan), truncated);  // the thumbnail's FFD9 is no end
  EXPECT_EQ(ImageFramingProblem(kHead + kScan.substr(0, 100)), truncated);
  EXPECT_EQ(ImageFramingProblem(kHead + kScan + std::string(100, 'x')), truncated);
  // A segment whose length runs past the end.
  EXPECT_EQ(ImageFramingProblem(Bytes({0xFF, 0xD8, 0xFF, 0xE0, 0x7F, 0xFF, 0, 0}) + kTrailer), truncated);
}

std::string Chunk(const std::string& type, size_t length) {
  return Bytes({0, 0, static_cast<int>(length >> 8), static_cast<int>(length & 0xFF)}) + type +
         std::string(length, 'd') + "crc!";
}

TEST(ImageFraming, APngWithDataAfterIendIsWholeAndOneCutBeforeItIsTruncated) {
  const std::string head = std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", 13) + Chunk("IDAT", 300);
  EXPECT_EQ(ImageFramingProblem(head + Chunk("IEND", 0)), "");
  EXPECT_EQ(ImageFramingProblem(head + Chunk("IEND", 0) + "\n" + kTrailer), "");
  EXPECT_EQ(ImageFramingProblem(head.substr(0, 200) + kTrailer), "truncated PNG (no IEND chunk)");
}

// "RIFF", the size of what follows those 8 bytes, "WEBP", and a body.
std::string Webp(uint32_t declared, size_t body) {
  std::string s = "RIFF" + Bytes({static_cast<int>(declared & 0xFF), static_cast<int>(declared >> 8 & 0xFF),
                                  static_cast<int>(declared >> 16 & 0xFF), static_cast<int>(declared >> 24)});
  return s + "WEBP" + std::string(body, 'w');
}

TEST(ImageFraming, AWebpShorterThanItsHeaderDeclaresIsTruncated) {
  EXPECT_EQ(ImageFramingProblem(Webp(4 + 300, 300)), "");
  EXPECT_EQ(ImageFramingProblem(Webp(4 + 300, 300) + kTrailer), "");  // padding after it
  EXPECT_EQ(ImageFramingProblem(Webp(4 + 300, 299)), "truncated WebP (311 bytes of the 312 its header declares)");
  // From its head and tail alone, as an image folder checks a file.
  const std::string image = Webp(4 + 300, 300);
  EXPECT_EQ(ImageFramingProblem(image.substr(0, kFramingHead), image.substr(image.size() - kFramingTail), 312), "");
  EXPECT_EQ(ImageFramingProblem(image.substr(0, kFramingHead), image.substr(image.size() - kFramingTail), 200),
            "truncated WebP (200 bytes of the 312 its header declares)");
}

TEST(ImageFraming, AnEmptyFileAndFilesInOtherFormatsSayWhatTheyAre) {
  EXPECT_EQ(ImageFramingProblem(""), "an empty file, not an image");
  const std::string not_decoded =
      "not a JPEG, PNG, WebP or binary netpbm (P5, P6) file (the formats the decode ops read)";
  EXPECT_EQ(ImageFramingProblem("GIF89a" + std::string(100, 'g')), "a GIF image, " + not_decoded);
  EXPECT_EQ(ImageFramingProblem("BM" + std::string(4, 'b') + std::string(4, '\0') + std::string(100, 'b')),
            "a BMP image, " + not_decoded);
  EXPECT_EQ(ImageFramingProblem("BMW, a car" + std::string(100, 'b')), not_decoded);
  EXPECT_EQ(ImageFramingProblem(std::string("II*\0", 4) + std::string(100, 't')), "a TIFF image, " + not_decoded);
  EXPECT_EQ(ImageFramingProblem(std::string("MM\0*", 4) + std::string(100, 't')), "a TIFF image, " + not_decoded);
  EXPECT_EQ(ImageFramingProblem(std::string("\0\0\0\x1c", 4) + "ftypheic" + std::string(100, 'h')),
            "an ISO media file (HEIC, AVIF or a video), " + not_decoded);
  EXPECT_EQ(ImageFramingProblem("P3\n2 1\n255\n" + std::string(100, '7')),
            "an ASCII netpbm image (P1 to P3), " + not_decoded);
  EXPECT_EQ(ImageFramingProblem("P4 2 1\n" + std::string(100, '\x01')), "a netpbm bitmap (P4), " + not_decoded);
  EXPECT_EQ(ImageFramingProblem("hello, world" + std::string(100, 'x')), not_decoded);
  EXPECT_EQ(ImageFramingProblem("tiny"), not_decoded);
}

}  // namespace
}  // namespace sluice::io
