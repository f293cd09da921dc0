// Launchers of the cuda kernels of the geometric ops (geometry_params.h):
// plain C++ declarations, so that the kernel classes compile with the host
// compiler and only the launchers with nvcc.
#ifndef SLUICE_OPS_CUDA_GEOMETRY_KERNELS_H_
#define SLUICE_OPS_CUDA_GEOMETRY_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace sluice::ops::cuda {

// A batch of `rows` images [h, w, c] of uint8 or float32, back to back.
struct DeviceImages {
  int64_t rows;
  int h, w, c;
  bool is_float;
};

// Where bilinear taps outside the image come from (kernels::FillMode).
enum class DeviceFill { kConstant, kNearest, kReflect };

// dst = src resampled bilinearly through per-row affine maps (device
// array of rows x 6 floats, output to input pixel coordinates), with the
// cpu kernel's arithmetic and borders (kernels::WarpAffine).
cudaError_t LaunchWarpAffine(const DeviceImages& images, const float* maps, DeviceFill fill, float fill_value,
                             const uint8_t* src, uint8_t* dst, cudaStream_t stream);

// dst = src with whole pixels moved: row r is mirrored horizontally where
// maps[6r] < 0 and vertically where maps[6r + 4] < 0 (the maps of a flip).
cudaError_t LaunchFlip(const DeviceImages& images, const float* maps, const uint8_t* src, uint8_t* dst,
                       cudaStream_t stream);

// Each of `rows` samples [plane, channels] of `elem_bytes` (1, 4 or 8)
// values transposed to [channels, plane].
cudaError_t LaunchHwcToChw(const uint8_t* src, int64_t rows, int64_t plane, int64_t channels, int elem_bytes,
                           uint8_t* dst, cudaStream_t stream);

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_GEOMETRY_KERNELS_H_
