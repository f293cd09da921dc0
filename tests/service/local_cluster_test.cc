#include "sluice/service/local_cluster.h"

#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::service {
namespace {

using ::testing::HasSubstr;

// Waits for `done`; the deadline is a hang guard, not a timing assertion.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

// A stand-in for `sluice`: a shell script with `body`.
std::string Command(const std::string& name, const std::string& body) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(LocalClusterTest, WorkersThatDieAtTheirStartFailTheClusterNamingTheCommand) {
  const std::string command = Command("exits_at_once", "exit 3");
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(2, 1, command);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Eventually([&] { return !(*cluster)->failure().ok(); }));
  const absl::Status failure = (*cluster)->failure();
  EXPECT_TRUE(absl::IsUnavailable(failure)) << failure;
  EXPECT_THAT(failure.message(), HasSubstr("exited with status 3, the 5th in a row within 10s of its start"));
  EXPECT_THAT(failure.message(), HasSubstr("(the command: " + command + " worker;"));
  EXPECT_THAT(failure.message(), HasSubstr("ulimit -u, -v"));
  EXPECT_TRUE((*cluster)->worker_pids().empty());
}

TEST(LocalClusterTest, AWorkerThatStartsAfterAFewFailuresKeepsTheClusterUp) {
  const std::string count = ::testing::TempDir() + "/starts";
  std::remove(count.c_str());
  // Dies at its first three starts, then runs.
  const std::string command =
      Command("starts_on_the_fourth_try", "n=$(cat " + count + " 2>/dev/null || echo 0)\n" + "echo $((n + 1)) > " +
                                              count + "\n" + "[ \"$n\" -ge 3 ] && exec sleep 600\nexit 1");
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(1, 1, command);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE(Eventually([&] {
    std::string starts;
    std::ifstream(count) >> starts;
    return starts == "4";
  }));
  const std::vector<pid_t> pids = (*cluster)->worker_pids();
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(::kill(pids[0], 0), 0);
  EXPECT_TRUE((*cluster)->failure().ok()) << (*cluster)->failure();
}

TEST(LocalClusterTest, AKilledWorkerIsReplaced) {
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(1, 1, Command("runs", "exec sleep 600"));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::vector<pid_t> before = (*cluster)->worker_pids();
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(::kill(before[0], SIGKILL), 0);
  ASSERT_TRUE(Eventually([&] {
    const std::vector<pid_t> now = (*cluster)->worker_pids();
    return now.size() == 1 && now[0] != before[0];
  }));
  EXPECT_TRUE((*cluster)->failure().ok()) << (*cluster)->failure();
}

}  // namespace
}  // namespace sluice::service
