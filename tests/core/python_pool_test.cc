// The Python process pool with real processes: Debian's python3 running the
// package's own worker module (sluice/_python_worker.py, copied beside a
// bare package __init__, so no build of the extension is needed).
#include "sluice/core/python_pool.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kUserCode[] = R"(
import time

def double(sample):
    return {"x": sample["x"] * 2}

def sleeps(sample):
    time.sleep(3600)

def sleeps_on_0(sample):
    if sample["x"] == 0:
        time.sleep(3600)
    return sample
)";

// One int64 column in, the same out: where each part of a 1-row call sits.
constexpr size_t kInputAt = 128, kOutputAt = 192, kCallBytes = 256;

class PythonPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    const fs::path source = fs::path(std::getenv("SLUICE_SOURCE_DIR")) / "python" / "sluice";
    fs::create_directories(dir_.Join("sluice"));
    testing::WriteFileBytes(dir_.Join("sluice/__init__.py"), "");
    for (const char* module : {"_python_worker.py", "_imports.py", "_shipping.py"}) {
      fs::copy_file(source / module, dir_.Join(std::string("sluice/") + module));
    }
    testing::WriteFileBytes(dir_.Join("pool_test_code.py"), kUserCode);
    setenv("SLUICE_PYTHONPATH", dir_.path().c_str(), 1);
  }

  static std::string Spec(const std::string& function) {
    return R"({"function": "pool_test_code:)" + function + R"(", "batched": false, "rng": false,
               "inputs": [{"name": "x", "dtype": "int64", "shape": [], "ragged": false}],
               "outputs": [{"name": "x", "dtype": "int64", "shape": [], "ragged": false}]})";
  }

  static absl::StatusOr<std::unique_ptr<PythonPool>> Pool(const std::string& function, int initial, int most) {
    return PythonPool::Start("/usr/bin/python3", Spec(function), initial, most, "pool '" + function + "'");
  }

  // Runs `double` on `x` in `process`; its answer.
  static absl::StatusOr<int64_t> Double(PythonProcess* process, int64_t x) {
    SLUICE_ASSIGN_OR_RETURN(uint8_t* memory, process->Memory(kCallBytes));
    *reinterpret_cast<int64_t*>(memory + kInputAt) = x;
    PythonFailure failure;
    SLUICE_RETURN_IF_ERROR(process->Call(1, &failure));
    if (!failure.message.empty()) return absl::InternalError(failure.message);
    SLUICE_ASSIGN_OR_RETURN(memory, process->Memory(kCallBytes));
    return *reinterpret_cast<const int64_t*>(memory + kOutputAt);
  }

  // Whether `pid` has exited, all its threads, leaving it to be reaped (by
  // the pool: this does not reap it).
  static bool Exited(pid_t pid) {
    siginfo_t info{};
    return waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
  }

  // Whether `fd` is readable now.
  static bool Readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
  }

  // Kills `pid` and waits until it has exited (unreaped).
  static void KillAndWait(pid_t pid) {
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    while (!Exited(pid)) std::this_thread::yield();
  }

  testing::TempDir dir_;
};

TEST_F(PythonPoolTest, GrowsByOneForEachCallerFindingNoneFreeUpToItsSize) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PythonPool> pool, Pool("double", 1, 3));
  std::vector<std::unique_ptr<PythonProcess>> held;
  std::set<pid_t> pids;
  for (int caller = 0; caller < 3; ++caller) {
    std::vector<std::unique_ptr<PythonProcess>> got;
    SLUICE_ASSERT_OK(pool->Acquire(8, &got));
    ASSERT_EQ(got.size(), 1u) << "caller " << caller;
    ASSERT_OK_AND_ASSIGN(const int64_t doubled, Double(got[0].get(), 21 + caller));
    EXPECT_EQ(doubled, 42 + 2 * caller);
    pids.insert(got[0]->pid());
    held.push_back(std::move(got[0]));
  }
  EXPECT_EQ(pids.size(), 3u);
  // At its size, a fourth caller waits for one to come back.
  std::atomic<bool> served{false};
  std::thread fourth([&] {
    std::vector<std::unique_ptr<PythonProcess>> got;
    SLUICE_EXPECT_OK(pool->Acquire(8, &got));
    EXPECT_EQ(got.size(), 3u);  // all that came back
    served = true;
    pool->Release(std::move(got));
  });
  EXPECT_FALSE(served.load());
  pool->Release(std::move(held));
  fourth.join();
  EXPECT_TRUE(served.load());
  std::vector<std::unique_ptr<PythonProcess>> all;
  SLUICE_ASSERT_OK(pool->Acquire(8, &all));
  EXPECT_EQ(all.size(), 3u);  // all free again, none started beyond its size
  pool->Release(std::move(all));
}

// One caller holding every process (a tile split among them) is not a
// second caller's reason to grow: that one waits for them.
TEST_F(PythonPoolTest, ACallerHoldingEveryProcessMakesTheNextWaitNotGrow) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PythonPool> pool, Pool("double", 2, 4));
  std::vector<std::unique_ptr<PythonProcess>> first;
  SLUICE_ASSERT_OK(pool->Acquire(8, &first));
  ASSERT_EQ(first.size(), 2u);
  std::vector<std::unique_ptr<PythonProcess>> second;
  std::atomic<bool> served{false};
  std::thread waiter([&] {
    SLUICE_EXPECT_OK(pool->Acquire(8, &second));
    served = true;
  });
  // Until the waiter waits (a right pool) or was served at once (a wrong
  // pool, which grew): either way the next lines tell which.
  while (pool->waiting() == 0 && !served) std::this_thread::yield();
  EXPECT_FALSE(served) << "the second caller was served while the first held every process";
  pool->Release(std::move(first));
  waiter.join();
  EXPECT_EQ(second.size(), 2u);
  pool->Release(std::move(second));
  std::vector<std::unique_ptr<PythonProcess>> all;
  SLUICE_ASSERT_OK(pool->Acquire(8, &all));
  EXPECT_EQ(all.size(), 2u);  // none was started for the waiting caller
  pool->Release(std::move(all));
}

// Between Acquire and Release a caller takes the free live processes others
// gave back, and gives back its own one at a time.
TEST_F(PythonPoolTest, ACallerTakesFreeLiveProcessesAndGivesThemBackOneAtATime) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PythonPool> pool, Pool("double", 3, 3));
  std::vector<std::unique_ptr<PythonProcess>> first, second;
  SLUICE_ASSERT_OK(pool->Acquire(1, &first));
  SLUICE_ASSERT_OK(pool->Acquire(1, &second));
  const pid_t killed = second[0]->pid();
  KillAndWait(killed);
  pool->GiveBack(std::move(second[0]));
  pool->Release({});
  pool->TakeFree(8, &first);  // the third; not the dead one
  ASSERT_EQ(first.size(), 2u);
  EXPECT_NE(first[1]->pid(), killed);
  ASSERT_OK_AND_ASSIGN(const int64_t doubled, Double(first[1].get(), 4));
  EXPECT_EQ(doubled, 8);
  const pid_t given = first[1]->pid();
  pool->GiveBack(std::move(first[1]));
  first.pop_back();
  // Another caller gets the one given back, and a new one for the dead.
  std::vector<std::unique_ptr<PythonProcess>> third;
  SLUICE_ASSERT_OK(pool->Acquire(8, &third));
  ASSERT_EQ(third.size(), 2u);
  std::set<pid_t> pids = {third[0]->pid(), third[1]->pid()};
  EXPECT_TRUE(pids.count(given));
  EXPECT_FALSE(pids.count(killed));
  pool->Release(std::move(third));
  pool->Release(std::move(first));
}

TEST_F(PythonPoolTest, WaitingOnSeveralProcessesReturnsTheOneThatAnswered) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PythonPool> pool, Pool("sleeps_on_0", 2, 2));
  std::vector<std::unique_ptr<PythonProcess>> got;
  SLUICE_ASSERT_OK(pool->Acquire(2, &got));
  ASSERT_EQ(got.size(), 2u);
  for (int i = 0; i < 2; ++i) {  // the first sleeps; the second answers
    ASSERT_OK_AND_ASSIGN(uint8_t* memory, got[i]->Memory(kCallBytes));
    *reinterpret_cast<int64_t*>(memory + kInputAt) = i;
    SLUICE_ASSERT_OK(got[i]->Send(1));
  }
  std::atomic<bool> cancelled{false};
  EXPECT_EQ(PythonProcess::WaitAny({got[0].get(), got[1].get()}, &cancelled), 1u);
  PythonFailure failure;
  SLUICE_ASSERT_OK(got[1]->Receive(&failure, &cancelled));
  EXPECT_EQ(failure.message, "");
  cancelled = true;  // ends the wait on the sleeper, killing it
  EXPECT_EQ(PythonProcess::WaitAny({got[0].get()}, &cancelled), 0u);
  EXPECT_THAT(got[0]->Receive(&failure, &cancelled), StatusIs(absl::StatusCode::kCancelled, HasSubstr("was killed")));
  pool->Release(std::move(got));
}

// A caller whose process is stuck in the user's code, with rows left to
// run, wakes when another caller gives a process back, and takes it.
TEST_F(PythonPoolTest, AProcessGivenBackWakesACallerWaitingWithRowsLeft) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PythonPool> pool, Pool("sleeps_on_0", 2, 2));
  std::vector<std::unique_ptr<PythonProcess>> mine, other;
  SLUICE_ASSERT_OK(pool->Acquire(1, &mine));
  SLUICE_ASSERT_OK(pool->Acquire(1, &other));
  EXPECT_FALSE(Readable(pool->free_signal()));
  ASSERT_OK_AND_ASSIGN(uint8_t* memory, mine[0]->Memory(kCallBytes));
  *reinterpret_cast<int64_t*>(memory + kInputAt) = 0;
  SLUICE_ASSERT_OK(mine[0]->Send(1));  // sleeps
  std::thread giver([&] {
    pool->GiveBack(std::move(other[0]));
    pool->Release({});
  });
  std::atomic<bool> cancelled{false};
  EXPECT_EQ(PythonProcess::WaitAny({mine[0].get()}, &cancelled, pool->free_signal()), 1u);
  giver.join();
  pool->TakeFree(1, &mine);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_FALSE(Readable(pool->free_signal()));  // nothing free: a wait on it would not end
  ASSERT_OK_AND_ASSIGN(const int64_t doubled_not, Double(mine[1].get(), 3));
  EXPECT_EQ(doubled_not, 3);  // sleeps_on_0 passes other samples through
  // A process that dies while free is no wake-up: it is left for Acquire.
  const pid_t killed = mine[1]->pid();
  KillAndWait(killed);
  pool->GiveBack(std::move(mine[1]));
  mine.pop_back();
  EXPECT_TRUE(Readable(pool->free_signal()));
  pool->TakeFree(1, &mine);
  EXPECT_EQ(mine.size(), 1u);
  EXPECT_FALSE(Readable(pool->free_signal()));
  cancelled = true;  // ends the sleeper
  PythonFailure failure;
  EXPECT_THAT(mine[0]->Receive(&failure, &cancelled), StatusIs(absl::StatusCode::kCancelled, HasSubstr("was killed")));
  pool->Release(std::move(mine));
  std::vector<std::unique_ptr<PythonProcess>> again;
  SLUICE_ASSERT_OK(pool->Acquire(2, &again));  // the killed one's place is filled anew
  ASSERT_EQ(again.size(), 2u);
  for (const std::unique_ptr<PythonProcess>& p : again) EXPECT_NE(p->pid(), killed);
  pool->Release(std::move(again));
}

TEST_F(PythonPoolTest, ADeadProcessIsReplacedWhenTaken) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PythonPool> pool, Pool("double", 1, 1));
  std::vector<std::unique_ptr<PythonProcess>> got;
  SLUICE_ASSERT_OK(pool->Acquire(1, &got));
  const pid_t killed = got[0]->pid();
  KillAndWait(killed);
  pool->Release(std::move(got));
  got.clear();
  SLUICE_ASSERT_OK(pool->Acquire(1, &got));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_NE(got[0]->pid(), killed);
  ASSERT_OK_AND_ASSIGN(const int64_t doubled, Double(got[0].get(), 5));
  EXPECT_EQ(doubled, 10);
  pool->Release(std::move(got));
}

TEST_F(PythonPoolTest, ProcessesThatCannotStartFailNamingThePoolAndWhy) {
  const absl::StatusOr<std::unique_ptr<PythonPool>> nowhere =
      PythonPool::Start("/no/such/python", Spec("double"), 1, 2, "pool 'x'");
  ASSERT_FALSE(nowhere.ok());
  EXPECT_THAT(std::string(nowhere.status().message()), HasSubstr("pool 'x'"));
  EXPECT_THAT(Pool("missing", 2, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("pool 'missing'"), HasSubstr("cannot load pool_test_code:missing"),
                             HasSubstr("AttributeError"))));
}

TEST_F(PythonPoolTest, ACancelledWaitKillsTheProcessStuckInTheUsersCode) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<PythonPool> pool, Pool("sleeps", 1, 1));
  std::vector<std::unique_ptr<PythonProcess>> got;
  SLUICE_ASSERT_OK(pool->Acquire(1, &got));
  PythonProcess* process = got[0].get();
  SLUICE_ASSERT_OK(process->Memory(kCallBytes).status());
  SLUICE_ASSERT_OK(process->Send(1));
  std::atomic<bool> cancelled{false};
  absl::Status waited;
  std::thread waiter([&] {
    PythonFailure failure;
    waited = process->Receive(&failure, &cancelled);
  });
  cancelled = true;
  waiter.join();
  EXPECT_THAT(waited, StatusIs(absl::StatusCode::kCancelled, HasSubstr("the process was killed")));
  EXPECT_FALSE(process->Alive());
  EXPECT_EQ(waitpid(process->pid(), nullptr, WNOHANG), -1);  // reaped: no zombie left
  pool->Release(std::move(got));
}

}  // namespace
}  // namespace sluice
