#include "sluice/ops/device_decode_stats.h"

#include <atomic>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sluice::ops {
namespace {

std::atomic<int64_t> hardware{0}, cuda{0}, cpu{0};
absl::Mutex decoder_mu(absl::kConstInit);
std::string* decoder ABSL_GUARDED_BY(decoder_mu) = nullptr;

}  // namespace

DeviceDecodeStats GetDeviceDecodeStats() {
  DeviceDecodeStats stats;
  stats.hardware = hardware.load(std::memory_order_relaxed);
  stats.cuda = cuda.load(std::memory_order_relaxed);
  stats.cpu = cpu.load(std::memory_order_relaxed);
  absl::MutexLock lock(&decoder_mu);
  if (decoder != nullptr) stats.decoder = *decoder;
  return stats;
}

void CountDeviceDecodes(int64_t on_hardware, int64_t on_cuda, int64_t on_cpu) {
  hardware.fetch_add(on_hardware, std::memory_order_relaxed);
  cuda.fetch_add(on_cuda, std::memory_order_relaxed);
  cpu.fetch_add(on_cpu, std::memory_order_relaxed);
}

void SetDeviceDecoder(const std::string& description) {
  absl::MutexLock lock(&decoder_mu);
  if (decoder == nullptr) decoder = new std::string();
  *decoder = description;
}

}  // namespace sluice::ops
