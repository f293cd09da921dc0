// A dispatcher's journal of arbitrary bytes: opening it (a torn tail is
// cut, damage before the end refused), then replaying what it held into
// the dispatcher's state, which must take forged entries (unknown jobs,
// splits out of range) without crashing.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "fuzz_input.h"
#include "sluice/service/dispatcher_state.h"
#include "sluice/service/journal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const sluice::fuzz::ScratchDir scratch("journal");
  const std::string& dir = scratch.path();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    std::ofstream journal(dir + "/journal.tfrecord", std::ios::binary);
    journal.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::vector<sluice::JournalEntry> replay;
  std::string warning;
  auto journal = sluice::service::Journal::Open(dir, {}, &replay, &warning);
  if (!journal.ok()) return 0;
  sluice::service::DispatcherState state({}, nullptr);
  for (const sluice::JournalEntry& entry : replay) state.Apply(entry);
  const absl::Time now = absl::Now();
  state.Recovered(now);
  (void)state.Status(now);
  (void)state.Expire(now + absl::Hours(1));
  return 0;
}
