#include "sluice/exec/thread_start.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "test_data.h"

namespace sluice::exec {
namespace {

constexpr int kRows = 3000;

// A user no process of the host runs as: its count of tasks (which the
// limit counts, host-wide) starts at the child's.
constexpr uid_t kUnusedUid = 61234;

// Runs `body` in a child process of that user allowed `tasks` tasks,
// itself included: past them the system refuses a thread, as `ulimit -u`
// or a container's pids limit do. Returns the child's wait status. Only
// root can become another user.
int RunWithTasks(int tasks, const std::function<int()>& body) {
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit limit{static_cast<rlim_t>(tasks), static_cast<rlim_t>(tasks)};
    alarm(120);  // a hang ends the child (SIGALRM), not the test
    if (setrlimit(RLIMIT_NPROC, &limit) != 0 || setgid(kUnusedUid) != 0 || setuid(kUnusedUid) != 0) _exit(99);
    try {
      _exit(body());
    } catch (...) {  // never back into the test's own frames
      _exit(3);
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// A pipeline of every kind of thread the engine starts on the way (a
// map's runners, a prefetch, reads ahead, the autotuner) that reads
// ids 0..kRows-1 in order: exit 0 with every row in order, 1 with the
// system's refusal said (naming the node, the limit), 2 otherwise.
int ReadAll() {
  std::vector<int64_t> ids(kRows);
  for (int i = 0; i < kRows; ++i) ids[i] = i;
  absl::StatusOr<std::unique_ptr<Pipeline>> pipeline =
      Pipeline::Create(PipelineBuilder::Arrays({MakeArrayColumn("id", {}, ids)})
                           .SplitRecords(500)
                           .ParallelReads(2)
                           .Map({Op("cast", {{"field", "id"}, {"dtype", "float32"}})})
                           .Prefetch(2)
                           .Batch(100)
                           .Threads(3)
                           .Build());
  if (!pipeline.ok()) return 2;
  std::unique_ptr<PipelineIterator> it = (*pipeline)->Iterate(0);
  int64_t next = 0;
  while (true) {
    Batch batch;
    bool end = false;
    const absl::Status s = it->Next(&batch, &end);
    if (!s.ok()) {
      const std::string m(s.message());
      const bool said = s.code() == absl::StatusCode::kResourceExhausted && m.find("node") != std::string::npos &&
                        m.find("ulimit -u") != std::string::npos;
      if (!said) fprintf(stderr, "%s\n", s.ToString().c_str());
      return said ? 1 : 2;
    }
    if (end) break;
    const float* v = batch.columns[0].values.data<float>();
    for (int64_t r = 0; r < batch.rows; ++r, ++next) {
      if (v[r] != static_cast<float>(next)) return 2;
    }
  }
  return next == kRows ? 0 : 2;
}

// A thread the system refused ended the process (std::terminate: thrown
// out of a map's constructor with its first runners started). Under any
// limit a pipeline now reads every row or says what it could not start.
TEST(ThreadStartTest, UnderAnyLimitOnTasksAPipelineReadsEveryRowOrSaysWhatItCouldNotStart) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run as another user under a limit on tasks";
  std::vector<int> outcomes;
  for (int tasks = 1; tasks <= 8; ++tasks) {
    const int status = RunWithTasks(tasks, ReadAll);
    SCOPED_TRACE("tasks " + std::to_string(tasks));
    ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
    ASSERT_NE(WEXITSTATUS(status), 99) << "could not become the unused user under the limit";
    ASSERT_LT(WEXITSTATUS(status), 2) << "2: rows wrong or another error; 3: an exception thrown";
    outcomes.push_back(WEXITSTATUS(status));
  }
  EXPECT_EQ(outcomes.front(), 1);  // no thread at all: said
  EXPECT_EQ(outcomes[5], 0);       // 5 threads of the 7 it asks for: read, on fewer
  EXPECT_EQ(outcomes.back(), 0);   // room for every thread: read
}

TEST(ThreadStartTest, StartThreadsStartsEachIndexOnce) {
  std::vector<int> seen(5, 0);
  std::vector<std::thread> threads;
  EXPECT_EQ(StartThreads(5, [&seen](int i) { ++seen[i]; }, &threads), 5);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(seen, std::vector<int>(5, 1));
}

}  // namespace
}  // namespace sluice::exec
