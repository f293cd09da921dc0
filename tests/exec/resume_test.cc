// Saving an iterator's position and resuming in a new pipeline object (as
// a restarted process would compile it): the elements before the save and
// the resumed rest concatenate to the uninterrupted epoch byte for byte,
// with another thread count, through filters, shuffled splits, random ops,
// shuffle buffers, takes, batches with a remainder and unbatched samples;
// bad states are named.
#include <functional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline.pb.h"
#include "sluice/exec/pipeline.h"
#include "sluice/io/tfrecord_index.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::exec {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// Each element's bytes (every column).
using Elements = std::vector<std::string>;

absl::Status Drain(PipelineIterator* it, int64_t limit, Elements* out) {
  for (int64_t n = 0; limit < 0 || n < limit; ++n) {
    Batch b;
    bool end = false;
    absl::Status s = it->Next(&b, &end);
    if (!s.ok() || end) return s;
    std::string bytes;
    for (const Column& c : b.columns) {
      bytes.append(reinterpret_cast<const char*>(c.values.raw_data()), c.values.byte_size());
    }
    out->push_back(std::move(bytes));
  }
  return absl::OkStatus();
}

// Names the first element that differs instead of printing the bytes.
::testing::AssertionResult Same(const Elements& got, const Elements& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " elements, want " << want.size();
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return ::testing::AssertionFailure() << "element " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

std::unique_ptr<Pipeline> Make(const PipelineBuilder& b) {
  absl::StatusOr<std::unique_ptr<Pipeline>> p = Pipeline::Create(b.Build());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override { files_ = sluice::testing::WriteCifarTfRecords(dir_.path(), 230, 4); }

  // CIFAR-like records through a random flip, a filter that drops a tenth
  // of them, batches of 16 with a remainder; with `shuffle` > 0, shuffled
  // in a buffer of that many rows before the flip.
  PipelineBuilder Augmented(int threads, bool batched = true, int64_t shuffle = 0) const {
    PipelineBuilder b =
        PipelineBuilder::TfRecord({dir_.path() + "/*.tfrecord"}, {BytesFeature("image", 3072), Int64Feature("label")});
    b.ShuffleSplits().SplitRecords(0).Seed(7).Threads(threads);
    if (shuffle > 0) b.Shuffle(shuffle);
    b.Map({Op("decode_raw", {{"dtype", "uint8"}}), Op("reshape", {{"shape", std::vector<int64_t>{32, 32, 3}}}),
           Op("random_flip", {{"mode", "horizontal"}})});
    b.Filter(Op("keep_if", {{"field", "label"}, {"cmp", "!="}, {"value", 3.0}}));
    if (batched) b.Batch(16).Prefetch(2);
    return b;
  }

  // The epoch cut after `cut` elements, saved, resumed by a new pipeline
  // object with `resume_threads`: the two parts, concatenated.
  Elements CutAndResume(const PipelineBuilder& saving, const PipelineBuilder& resuming, uint64_t epoch, int64_t cut,
                        std::string* state_out = nullptr) {
    Elements got;
    std::unique_ptr<Pipeline> first = Make(saving);
    std::unique_ptr<PipelineIterator> it = first->Iterate(epoch);
    EXPECT_TRUE(Drain(it.get(), cut, &got).ok());
    absl::StatusOr<std::string> state = it->SaveState();
    EXPECT_TRUE(state.ok()) << state.status();
    if (!state.ok()) return got;
    EXPECT_LE(state->size(), 256u);  // a position, not samples
    if (state_out != nullptr) *state_out = *state;
    it.reset();
    first.reset();
    std::unique_ptr<Pipeline> second = Make(resuming);
    absl::StatusOr<std::unique_ptr<PipelineIterator>> rest = second->Resume(*state);
    EXPECT_TRUE(rest.ok()) << rest.status();
    if (rest.ok()) {
      const absl::Status drained = Drain(rest->get(), -1, &got);
      EXPECT_TRUE(drained.ok()) << drained;
    }
    return got;
  }

  // Epoch `epoch` of make(2 threads), uninterrupted.
  Elements Whole(const std::function<PipelineBuilder(int)>& make, uint64_t epoch) {
    Elements whole;
    std::unique_ptr<Pipeline> p = Make(make(2));
    EXPECT_TRUE(Drain(p->Iterate(epoch).get(), -1, &whole).ok());
    return whole;
  }

  // Each cut saved with 2 threads and resumed with 1 concatenates to `whole`.
  void ExpectResumes(const std::function<PipelineBuilder(int)>& make, uint64_t epoch, const Elements& whole,
                     const std::vector<int64_t>& cuts) {
    for (int64_t cut : cuts) {
      SCOPED_TRACE(cut);
      EXPECT_TRUE(Same(CutAndResume(make(2), make(1), epoch, cut), whole));
    }
  }

  sluice::testing::TempDir dir_;
  std::vector<std::string> files_;
};

TEST_F(ResumeTest, TheResumedRestEqualsTheUninterruptedEpochByteForByte) {
  Elements whole;
  std::unique_ptr<Pipeline> p = Make(Augmented(2));
  ASSERT_TRUE(Drain(p->Iterate(1).get(), -1, &whole).ok());
  ASSERT_GT(whole.size(), 10u);
  for (int64_t cut : {int64_t{0}, int64_t{1}, int64_t{4}, static_cast<int64_t>(whole.size()) - 1,
                      static_cast<int64_t>(whole.size())}) {
    SCOPED_TRACE(cut);
    // Saved with 2 threads, resumed with 1, and the reverse.
    EXPECT_TRUE(Same(CutAndResume(Augmented(2), Augmented(1), 1, cut), whole));
    EXPECT_TRUE(Same(CutAndResume(Augmented(1), Augmented(3), 1, cut), whole));
  }
}

TEST_F(ResumeTest, IndexedFilesSeekToTheRecordInsteadOfReadingUpToIt) {
  // Indexed TFRecords in splits of 25 records: the resumed split starts at
  // its record (SeeksRecords), mid-split and at a split's end alike.
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  auto indexed = [&](int threads) {
    PipelineBuilder b = Augmented(threads);
    b.SplitRecords(25);  // a source option: it sets node 0 whatever was added last
    return b;
  };
  ExpectResumes(indexed, 3, Whole(indexed, 3), {1, 2, 7});
}

TEST_F(ResumeTest, UnbatchedSamplesResumeAtTheNextSample) {
  Elements whole;
  std::unique_ptr<Pipeline> p = Make(Augmented(2, false));
  ASSERT_TRUE(Drain(p->Iterate(0).get(), -1, &whole).ok());
  ASSERT_EQ(whole.size(), 230u - 23u);  // labels i % 10: a tenth are 3
  for (int64_t cut : {int64_t{1}, int64_t{57}, int64_t{58}, int64_t{150}}) {
    SCOPED_TRACE(cut);
    EXPECT_TRUE(Same(CutAndResume(Augmented(2, false), Augmented(1, false), 0, cut), whole));
  }
}

TEST_F(ResumeTest, AStateSavedAfterResumingResumesToo) {
  Elements whole;
  std::unique_ptr<Pipeline> uninterrupted = Make(Augmented(2));
  ASSERT_TRUE(Drain(uninterrupted->Iterate(2).get(), -1, &whole).ok());
  std::string state;
  Elements got = CutAndResume(Augmented(2), Augmented(2), 2, 3, &state);
  ASSERT_TRUE(Same(got, whole));
  // Resume, take 2 more, save again, resume again.
  std::unique_ptr<Pipeline> p = Make(Augmented(1));
  std::unique_ptr<PipelineIterator> it = *p->Resume(state);
  Elements twice(whole.begin(), whole.begin() + 3);
  ASSERT_TRUE(Drain(it.get(), 2, &twice).ok());
  const std::string again = *it->SaveState();
  std::unique_ptr<Pipeline> third = Make(Augmented(2));  // outlives its iterator
  std::unique_ptr<PipelineIterator> rest = *third->Resume(again);
  ASSERT_TRUE(Drain(rest.get(), -1, &twice).ok());
  EXPECT_TRUE(Same(twice, whole));
}

TEST_F(ResumeTest, BadStatesAreNamedNeverASilentlyWrongEpoch) {
  std::unique_ptr<Pipeline> p = Make(Augmented(2));
  std::unique_ptr<PipelineIterator> it = p->Iterate(0);
  Elements got;
  ASSERT_TRUE(Drain(it.get(), 2, &got).ok());
  const std::string state = *it->SaveState();
  // Another pipeline: another seed.
  PipelineBuilder other = Augmented(2);
  other.Seed(8);
  EXPECT_THAT(Make(other)->Resume(state).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pipeline_fingerprint")));
  EXPECT_THAT(p->Resume(state.substr(0, state.size() / 2)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a sluice iterator state")));
  EXPECT_THAT(p->Resume("some other bytes").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a sluice iterator state")));
  IteratorState edited;
  ASSERT_TRUE(edited.ParseFromString(state));
  // A field changed under the state's checksum: damaged, whichever field.
  edited.set_split(edited.split() + 1);
  EXPECT_THAT(p->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("its checksum does not match its contents")));
  edited.set_split(edited.split() - 1);
  // Its version changed under the checksum: damaged too, not "another version".
  edited.set_format_version(3);
  EXPECT_THAT(p->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("its checksum does not match its contents")));
  edited.set_format_version(2);
  // Cut short, a state lacks its checksum, serialized last.
  const std::string whole = edited.SerializeAsString();
  for (size_t cut : {whole.size() - 1, whole.size() - 6, whole.size() / 2, size_t{40}}) {
    EXPECT_THAT(p->Resume(whole.substr(0, cut)).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a sluice iterator state")))
        << cut << " of " << whole.size() << " bytes";
  }
  // The checks below read fields as a state without a checksum (saved
  // before states had one: format 1) brings them.
  edited.clear_checksum();
  EXPECT_THAT(p->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("truncated: it lacks the checksum")));
  edited.set_format_version(1);
  EXPECT_TRUE(p->Resume(edited.SerializeAsString()).ok());
  edited.set_format_version(99);
  EXPECT_THAT(p->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("format_version is 99")));
  edited.set_format_version(1);
  edited.set_split(1000);
  EXPECT_THAT(p->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("split is 1000")));
  edited.set_split(0);
  edited.set_repeat(2);
  EXPECT_THAT(p->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no repeat")));
}

// Shuffled in a buffer of `buffer` rows: the state holds the draws made and
// the oldest row still buffered, not the buffer, and the resumed buffer is
// read again from there.
class ShuffleResumeTest : public ResumeTest, public ::testing::WithParamInterface<int64_t> {};

TEST_P(ShuffleResumeTest, TheResumedRestEqualsTheUninterruptedEpochByteForByte) {
  const int64_t buffer = GetParam();
  for (bool batched : {true, false}) {
    SCOPED_TRACE(batched);
    Elements whole;
    std::unique_ptr<Pipeline> p = Make(Augmented(2, batched, buffer));
    ASSERT_TRUE(Drain(p->Iterate(5).get(), -1, &whole).ok());
    Elements unshuffled;
    ASSERT_TRUE(Drain(Make(Augmented(2, batched))->Iterate(5).get(), -1, &unshuffled).ok());
    ASSERT_EQ(whole.size(), unshuffled.size());
    ASSERT_NE(whole, unshuffled);
    const int64_t n = static_cast<int64_t>(whole.size());
    for (int64_t cut : {int64_t{0}, int64_t{1}, int64_t{3}, n / 2, n - 2, n - 1, n}) {
      SCOPED_TRACE(cut);
      EXPECT_TRUE(Same(CutAndResume(Augmented(2, batched, buffer), Augmented(1, batched, buffer), 5, cut), whole));
      EXPECT_TRUE(Same(CutAndResume(Augmented(1, batched, buffer), Augmented(3, batched, buffer), 5, cut), whole));
    }
  }
}

// Smaller than a source chunk, a few chunks, and more than the epoch's rows.
INSTANTIATE_TEST_SUITE_P(Buffers, ShuffleResumeTest, ::testing::Values(5, 64, 1000));

TEST_F(ResumeTest, AResumedShuffleSeeksIndexedFilesToTheOldestBufferedRecord) {
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  auto indexed = [&](int threads) {
    PipelineBuilder b = Augmented(threads, true, 40);
    b.SplitRecords(25);
    return b;
  };
  ExpectResumes(indexed, 1, Whole(indexed, 1), {2, 6, 11});
}

TEST_F(ResumeTest, AShuffleAfterAFilterReadsItsInputAgainFromTheOldestBufferedRow) {
  // The filter keeps the source from selecting the buffered rows: the
  // shuffle passes over the others itself.
  auto filtered = [&](int threads) {
    PipelineBuilder b = Augmented(threads, false);
    b.Shuffle(40).Batch(16);
    return b;
  };
  ExpectResumes(filtered, 4, Whole(filtered, 4), {1, 5, 11});
}

TEST_F(ResumeTest, TakesCountWhatWasDeliveredBeforeTheSave) {
  // Rows before the batch, and batches after it.
  for (bool rows : {true, false}) {
    SCOPED_TRACE(rows);
    auto taking = [&](int threads) {
      PipelineBuilder b = Augmented(threads, false, 30);
      if (rows) {
        b.Take(100).Batch(16).Prefetch(2);
      } else {
        b.Batch(16).Take(5);
      }
      return b;
    };
    const Elements whole = Whole(taking, 0);
    ASSERT_EQ(whole.size(), rows ? 7u : 5u);  // 100 rows in batches of 16
    ExpectResumes(taking, 0, whole, {1, 4, 5});
  }
}

TEST_F(ResumeTest, ARepeatResumesInTheEpochItWasSavedIn) {
  // Each of the repeat's epochs reads its splits in another order, shuffles
  // and flips anew; batches after the repeat straddle its seams.
  for (bool batch_after : {true, false}) {
    SCOPED_TRACE(batch_after);
    auto repeating = [&](int threads) {
      PipelineBuilder b = Augmented(threads, false, 50);
      if (batch_after) {
        b.Repeat(3).Batch(16).Prefetch(2);
      } else {
        b.Batch(16).Repeat(3);
      }
      return b;
    };
    const Elements whole = Whole(repeating, 2);
    const int64_t n = static_cast<int64_t>(whole.size());
    ASSERT_EQ(n, batch_after ? (3 * 207 + 15) / 16 : 3 * 13);
    ExpectResumes(repeating, 2, whole, {1, n / 3 - 1, n / 3, n / 3 + 1, 2 * n / 3, n - 1, n});
  }
}

TEST_F(ResumeTest, AnEndlessRepeatResumesAndATakeAfterItCounts) {
  auto endless = [&](int threads) {
    PipelineBuilder b = Augmented(threads, false, 20);
    b.Repeat().Batch(32).Take(25);
    return b;
  };
  const Elements whole = Whole(endless, 0);
  ASSERT_EQ(whole.size(), 25u);  // four of the repeat's epochs, and some
  ExpectResumes(endless, 0, whole, {6, 13, 24});
}

// Each row's bytes (every column), in the order delivered.
absl::Status DrainRows(PipelineIterator* it, int64_t limit, std::vector<std::string>* out) {
  for (int64_t n = 0; limit < 0 || n < limit; ++n) {
    Batch b;
    bool end = false;
    absl::Status s = it->Next(&b, &end);
    if (!s.ok() || end) return s;
    for (int64_t r = 0; r < b.rows; ++r) {
      std::string bytes;
      for (const Column& c : b.columns) {
        const size_t row_bytes = c.values.byte_size() / static_cast<size_t>(b.rows);
        bytes.append(reinterpret_cast<const char*>(c.values.raw_data()) + r * row_bytes, row_bytes);
      }
      out->push_back(std::move(bytes));
    }
  }
  return absl::OkStatus();
}

// Unordered, rows arrive as they complete: the resumed rest holds exactly
// the rows not delivered before the save (the same multiset, each row with
// its own random draws), with whole and partly delivered splits, read in
// order or several splits at once.
TEST_F(ResumeTest, AnUnorderedEpochResumesWithExactlyTheRowsNotDelivered) {
  for (const std::string& f : files_) ASSERT_TRUE(io::WriteTfRecordIndex(f).ok());
  for (int reads : {1, 3}) {
    auto unordered = [&](int threads) {
      PipelineBuilder b = Augmented(threads, false, 30);
      b.Batch(16).Prefetch(2).Unordered().SplitRecords(25).ParallelReads(reads);
      return b;
    };
    std::vector<std::string> whole;
    ASSERT_TRUE(DrainRows(Make(unordered(2))->Iterate(6).get(), -1, &whole).ok());
    ASSERT_EQ(whole.size(), 207u);
    std::sort(whole.begin(), whole.end());
    for (int64_t cut : {int64_t{1}, int64_t{6}, int64_t{12}}) {
      SCOPED_TRACE(::testing::Message() << "reads " << reads << ", cut " << cut);
      std::unique_ptr<Pipeline> first = Make(unordered(2));
      std::unique_ptr<PipelineIterator> it = first->Iterate(6);
      std::vector<std::string> got;
      ASSERT_TRUE(DrainRows(it.get(), cut, &got).ok());
      const std::string state = *it->SaveState();
      EXPECT_LE(state.size(), 2048u);
      it.reset();
      // Resumed, cut again, saved again (what was done before counts), and
      // resumed again.
      std::unique_ptr<Pipeline> second = Make(unordered(1));  // outlives its iterator
      absl::StatusOr<std::unique_ptr<PipelineIterator>> more = second->Resume(state);
      ASSERT_TRUE(more.ok()) << more.status();
      ASSERT_TRUE(DrainRows(more->get(), 2, &got).ok());
      const std::string again = *(*more)->SaveState();
      more->reset();
      std::unique_ptr<Pipeline> third = Make(unordered(2));
      absl::StatusOr<std::unique_ptr<PipelineIterator>> rest = third->Resume(again);
      ASSERT_TRUE(rest.ok()) << rest.status();
      ASSERT_TRUE(DrainRows(rest->get(), -1, &got).ok());
      std::sort(got.begin(), got.end());
      EXPECT_TRUE(Same(got, whole));
    }
  }
  // An ordered state does not resume unordered (the order is part of the
  // fingerprint), nor one edited to hold done rows ordered.
  std::unique_ptr<Pipeline> ordering = Make(Augmented(2));
  std::unique_ptr<PipelineIterator> ordered = ordering->Iterate(0);
  std::vector<std::string> rows;
  ASSERT_TRUE(DrainRows(ordered.get(), 1, &rows).ok());
  PipelineBuilder unordered = Augmented(2);
  unordered.Unordered();
  // The same output in another order: the fingerprint matches, the kind of position does not.
  EXPECT_THAT(Make(unordered)->Resume(*ordered->SaveState()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("saved ordered")));
  IteratorState edited;
  ASSERT_TRUE(edited.ParseFromString(*ordered->SaveState()));
  edited.clear_checksum();  // edited by hand below: read as a state of before checksums
  edited.set_format_version(1);
  edited.mutable_done()->set_splits_below(1);
  EXPECT_THAT(ordering->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("saved unordered")));
  edited.mutable_done()->add_splits(0);
  EXPECT_THAT(ordering->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not ascending")));
}

TEST_F(ResumeTest, PositionsNoStateCanHoldAreRefusedNamingTheNode) {
  Elements got;
  auto refused = [&](const PipelineBuilder& b, const std::string& why) {
    std::unique_ptr<Pipeline> p = Make(b);
    std::unique_ptr<PipelineIterator> it = p->Iterate(0);
    ASSERT_TRUE(Drain(it.get(), 1, &got).ok());
    EXPECT_THAT(it->SaveState().status(), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr(why)));
  };
  PipelineBuilder two_shuffles = Augmented(2, false, 10);
  two_shuffles.Shuffle(10);
  refused(two_shuffles, "two shuffles");
  PipelineBuilder take_then_shuffle = Augmented(2, false);
  take_then_shuffle.Take(50).Shuffle(4);
  refused(take_then_shuffle, "shuffle after a batch, a take or a repeat");
  PipelineBuilder repeat_then_filter = Augmented(2, false);
  repeat_then_filter.Repeat(2).Filter(Op("keep_if", {{"field", "label"}, {"cmp", "!="}, {"value", 4.0}}));
  refused(repeat_then_filter, "repeat followed by a filter");
  PipelineBuilder unordered_repeat = Augmented(2);
  unordered_repeat.Repeat(2).Unordered();
  refused(unordered_repeat, "unordered pipeline's repeat");
  PipelineBuilder take_in_repeat = Augmented(2, false);
  take_in_repeat.Take(50).Repeat(2);
  refused(take_in_repeat, "take inside a repeat");
  PipelineBuilder take_then_filter = Augmented(2, false);
  take_then_filter.Take(50).Filter(Op("keep_if", {{"field", "label"}, {"cmp", "!="}, {"value", 4.0}}));
  refused(take_then_filter, "take followed by a filter");
}

TEST_F(ResumeTest, BadShuffleStatesAreNamed) {
  std::unique_ptr<Pipeline> p = Make(Augmented(2, true, 64));
  std::unique_ptr<PipelineIterator> it = p->Iterate(0);
  Elements got;
  ASSERT_TRUE(Drain(it.get(), 3, &got).ok());
  IteratorState edited;
  ASSERT_TRUE(edited.ParseFromString(*it->SaveState()));
  edited.clear_checksum();  // edited by hand below: read as a state of before checksums
  edited.set_format_version(1);
  ASSERT_TRUE(edited.has_shuffle());
  ASSERT_GT(edited.shuffle().emitted(), 0);
  edited.mutable_shuffle()->set_oldest(edited.shuffle().oldest() + 1);
  absl::StatusOr<std::unique_ptr<PipelineIterator>> rest = p->Resume(edited.SerializeAsString());
  ASSERT_TRUE(rest.ok());  // the buffer is restored as the first element is asked for
  EXPECT_THAT(Drain(rest->get(), 1, &got), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("oldest buffered")));
  edited.clear_shuffle();
  EXPECT_THAT(p->Resume(edited.SerializeAsString()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no shuffle position")));
}

}  // namespace
}  // namespace sluice::exec
