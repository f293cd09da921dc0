#include "sluice/service/journal.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::service {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

JournalEntry JobEntry(int64_t id, size_t name_bytes = 0) {
  JournalEntry e;
  e.mutable_create_job()->set_job_id(id);
  e.mutable_create_job()->set_job_name(std::string(name_bytes, 'n'));
  return e;
}

std::vector<int64_t> JobIds(const std::vector<JournalEntry>& entries) {
  std::vector<int64_t> out;
  for (const JournalEntry& e : entries) out.push_back(e.create_job().job_id());
  return out;
}

// Appends jobs `ids`, synced, to the journal in `work`.
void Write(const std::string& work, const std::vector<int64_t>& ids) {
  std::vector<JournalEntry> replay;
  std::string warning;
  auto journal = Journal::Open(work, {}, &replay, &warning);
  ASSERT_TRUE(journal.ok()) << journal.status();
  for (int64_t id : ids) {
    ASSERT_OK_AND_ASSIGN(uint64_t seq, (*journal)->Append(JobEntry(id)));
    SLUICE_ASSERT_OK((*journal)->Sync(seq));
  }
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class JournalTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  const std::string work_ = dir_.Join("work");
  const std::string path_ = work_ + "/journal.tfrecord";
  std::vector<JournalEntry> replay_;
  std::string warning_;
};

TEST_F(JournalTest, ReplaysWhatWasAppendedAndCutsATornTail) {
  Write(work_, {1, 2, 3});
  const std::string whole = Read(path_);
  // A crash mid-append leaves part of the last frame, or its bytes unwritten
  // (zeros where its data CRC should be): either is a torn tail.
  for (const std::string& torn :
       {whole.substr(0, whole.size() - 3), whole.substr(0, whole.size() - 4) + std::string(4, '\0')}) {
    Overwrite(path_, torn);
    replay_.clear();
    warning_.clear();
    {
      ASSERT_OK_AND_ASSIGN(auto journal, Journal::Open(work_, {}, &replay_, &warning_));
      EXPECT_EQ(JobIds(replay_), (std::vector<int64_t>{1, 2}));
      EXPECT_THAT(warning_, HasSubstr("cut a torn tail of "));
      EXPECT_THAT(warning_, HasSubstr(" bytes off " + path_ + " at offset "));
      ASSERT_OK_AND_ASSIGN(uint64_t seq, journal->Append(JobEntry(4)));
      SLUICE_ASSERT_OK(journal->Sync(seq));
    }
    replay_.clear();
    warning_.clear();
    ASSERT_OK_AND_ASSIGN(auto journal, Journal::Open(work_, {}, &replay_, &warning_));
    EXPECT_EQ(JobIds(replay_), (std::vector<int64_t>{1, 2, 4}));
    EXPECT_THAT(warning_, IsEmpty());
    Overwrite(path_, whole);
  }
}

// Two dispatchers on one work dir interleaved their entries and handed out
// the same ids: the second is refused while the first holds it.
TEST_F(JournalTest, AWorkDirInUseIsRefusedNamingTheHoldersPid) {
  ASSERT_OK_AND_ASSIGN(auto first, Journal::Open(work_, {}, &replay_, &warning_));
  EXPECT_THAT(Journal::Open(work_, {}, &replay_, &warning_),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("work dir " + work_ + " is in use by another dispatcher (pid " +
                                 std::to_string(::getpid()) + "): give each dispatcher a --work-dir of its own")));
  first.reset();
  SLUICE_EXPECT_OK(Journal::Open(work_, {}, &replay_, &warning_).status());
}

// Damage with good entries after it is no torn tail: replaying around the
// hole would rebuild a state that never was.
TEST_F(JournalTest, DamageBeforeTheEndIsDataLossNamingTheOffsets) {
  Write(work_, {1, 2, 3});
  std::string bytes = Read(path_);
  const size_t frame = bytes.size() / 3;
  bytes[frame + 14] ^= 0x20;  // in the second entry's data
  Overwrite(path_, bytes);
  EXPECT_THAT(Journal::Open(work_, {}, &replay_, &warning_),
              StatusIs(absl::StatusCode::kDataLoss,
                       HasSubstr("the journal " + path_ + " is damaged at offset " + std::to_string(frame) +
                                 " and holds good entries after it (from offset " + std::to_string(2 * frame) + ")")));
  EXPECT_EQ(Read(path_), bytes) << "a refused journal is left as it was";
}

// A write the disk refuses (here: over RLIMIT_FSIZE, EFBIG, as ENOSPC
// would be) leaves no partial entry and stops the journal for good.
TEST_F(JournalTest, AFailedWriteLeavesNoPartialEntryAndStopsTheJournal) {
  Write(work_, {1});
  const std::string before = Read(path_);
  {
    ASSERT_OK_AND_ASSIGN(auto journal, Journal::Open(work_, {}, &replay_, &warning_));
    struct rlimit saved;
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = saved;
    small.rlim_cur = before.size() + 100;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    const absl::StatusOr<uint64_t> big = journal->Append(JobEntry(2, 1000));
    const absl::StatusOr<uint64_t> small_after = journal->Append(JobEntry(3));
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_THAT(big, StatusIs(absl::StatusCode::kUnavailable,
                              HasSubstr("cannot write the journal " + path_ + ": File too large")));
    EXPECT_THAT(big.status().message(), HasSubstr("the dispatcher accepts no work it cannot journal"));
    EXPECT_THAT(small_after, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("File too large")))
        << "a stopped journal takes nothing more";
    EXPECT_THAT(journal->Sync(1), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("File too large")));
    EXPECT_FALSE(journal->wants_compaction());
  }
  EXPECT_EQ(Read(path_), before);
  ASSERT_OK_AND_ASSIGN(auto journal, Journal::Open(work_, {}, &replay_, &warning_));
  EXPECT_THAT(warning_, IsEmpty());
}

TEST_F(JournalTest, ConcurrentSyncsEachReturnOnceTheirEntryIsWritten) {
  ASSERT_OK_AND_ASSIGN(auto journal, Journal::Open(work_, {}, &replay_, &warning_));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        absl::StatusOr<uint64_t> seq = journal->Append(JobEntry(t * 100 + i));
        ASSERT_TRUE(seq.ok());
        SLUICE_ASSERT_OK(journal->Sync(*seq));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(journal->appended(), 200u);
  journal.reset();
  ASSERT_OK_AND_ASSIGN(journal, Journal::Open(work_, {}, &replay_, &warning_));
  EXPECT_EQ(replay_.size(), 200u);
}

TEST_F(JournalTest, CompactionReplacesTheFileWithTheSnapshotAndAppendsGoOn) {
  Journal::Options options;
  options.compact_bytes = 1000;
  ASSERT_OK_AND_ASSIGN(auto journal, Journal::Open(work_, options, &replay_, &warning_));
  uint64_t seq = 0;
  while (!journal->wants_compaction()) {
    ASSERT_OK_AND_ASSIGN(seq, journal->Append(JobEntry(static_cast<int64_t>(seq) + 1)));
  }
  SLUICE_ASSERT_OK(journal->Compact({JobEntry(100), JobEntry(101)}));
  EXPECT_FALSE(journal->wants_compaction());
  SLUICE_ASSERT_OK(journal->Sync(seq));  // the snapshot made every earlier entry durable
  ASSERT_OK_AND_ASSIGN(seq, journal->Append(JobEntry(102)));
  SLUICE_ASSERT_OK(journal->Sync(seq));
  struct stat st;
  ASSERT_EQ(::stat((path_ + ".compacting").c_str(), &st), -1) << "no leftover";
  journal.reset();
  ASSERT_OK_AND_ASSIGN(journal, Journal::Open(work_, options, &replay_, &warning_));
  EXPECT_EQ(JobIds(replay_), (std::vector<int64_t>{100, 101, 102}));
}

}  // namespace
}  // namespace sluice::service
