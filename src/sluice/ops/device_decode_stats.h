// Where the images of decode ops on a device were decoded, counted for the
// process: by the device's JPEG decoder (its hardware engines or its CUDA
// decoder), or on the CPU for what the device does not decode (PNG,
// netpbm, CMYK JPEGs, files it fails on). The cuda decode kernels count;
// `sluice-bench w3 --device cuda` and sluice.device_decode_stats() report.
#ifndef SLUICE_OPS_DEVICE_DECODE_STATS_H_
#define SLUICE_OPS_DEVICE_DECODE_STATS_H_

#include <cstdint>
#include <string>

namespace sluice::ops {

struct DeviceDecodeStats {
  int64_t hardware = 0;  // images decoded by the GPU's JPEG engines
  int64_t cuda = 0;      // by the GPU's CUDA JPEG decoder
  int64_t cpu = 0;       // on the CPU, then copied to the device
  std::string decoder;   // what decodes on the device; empty before any decode
};

// Thread-safe.
DeviceDecodeStats GetDeviceDecodeStats();
void CountDeviceDecodes(int64_t hardware, int64_t cuda, int64_t cpu);
void SetDeviceDecoder(const std::string& description);

}  // namespace sluice::ops

#endif  // SLUICE_OPS_DEVICE_DECODE_STATS_H_
