#include "sluice/exec/delivery_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice::exec {

bool DoneRows::RecordDone(int32_t file, int64_t record) const {
  const auto it = records.find(file);
  if (it == records.end()) return false;
  const auto& ranges = it->second;
  const auto r =
      std::upper_bound(ranges.begin(), ranges.end(), record,
                       [](int64_t rec, const std::pair<int64_t, int64_t>& range) { return rec < range.first; });
  return r != ranges.begin() && record < std::prev(r)->second;
}

int64_t DoneRows::DonePrefixEnd(const io::Split& split) const {
  const auto file = records.find(split.file);
  if (file == records.end()) return split.begin_record;
  const auto& ranges = file->second;
  auto r =
      std::upper_bound(ranges.begin(), ranges.end(), split.begin_record,
                       [](int64_t record, const std::pair<int64_t, int64_t>& range) { return record < range.first; });
  if (r == ranges.begin() || std::prev(r)->second <= split.begin_record) return split.begin_record;
  const int64_t end = std::prev(r)->second;
  return split.end_record >= 0 ? std::min(end, split.end_record) : end;
}

DeliveryLedger::DeliveryLedger(std::shared_ptr<const std::vector<io::Split>> order, DoneRows start)
    : order_(std::move(order)), complete_(order_->size(), false) {
  by_file_.reserve(order_->size());
  for (size_t s = 0; s < order_->size(); ++s) {
    by_file_.push_back(Entry{(*order_)[s].file, (*order_)[s].begin_record, static_cast<int64_t>(s)});
  }
  std::sort(by_file_.begin(), by_file_.end(),
            [](const Entry& a, const Entry& b) { return a.file != b.file ? a.file < b.file : a.begin < b.begin; });
  absl::MutexLock lock(&mu_);
  for (int64_t s = 0; s < static_cast<int64_t>(complete_.size()); ++s) complete_[s] = start.SplitDone(s);
  while (below_ < static_cast<int64_t>(complete_.size()) && complete_[below_]) ++below_;
  for (const auto& [file, ranges] : start.records) {
    for (const auto& [begin, end] : ranges) {
      for (int64_t record = begin; record < end; ++record) {
        const int64_t split = SplitOf(file, record);
        if (split < 0) continue;  // ParseState checked the ranges against the splits
        Partial& p = partial_[split];
        ++p.done;
        p.records.push_back(record);
      }
    }
  }
}

int64_t DeliveryLedger::SplitOf(int32_t file, int64_t record) const {
  auto it = std::upper_bound(by_file_.begin(), by_file_.end(), std::make_pair(file, record),
                             [](const std::pair<int32_t, int64_t>& key, const Entry& e) {
                               return key.first != e.file ? key.first < e.file : key.second < e.begin;
                             });
  if (it == by_file_.begin()) return -1;
  --it;
  if (it->file != file) return -1;
  const io::Split& split = (*order_)[it->split];
  return split.end_record < 0 || record < split.end_record ? it->split : -1;
}

absl::Status DeliveryLedger::Done(const Provenance& provenance, int64_t begin, int64_t end) {
  absl::MutexLock lock(&mu_);
  for (int64_t row = begin; row < end; ++row) {
    const RowOrigin o = provenance.Origin(row);
    const int64_t split = o.file < 0 || o.record < 0 ? -1 : SplitOf(o.file, o.record);
    if (split < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("a row (", provenance.Describe(row), ") lies in none of the epoch's splits"));
    }
    Partial& p = partial_[split];
    ++p.done;
    p.records.push_back(o.record);
    CompleteIfDone(split, p);
  }
  return absl::OkStatus();
}

void DeliveryLedger::SplitEnded(int64_t split, int64_t rows) {
  absl::MutexLock lock(&mu_);
  Partial& p = partial_[split];
  p.rows = rows;
  CompleteIfDone(split, p);
}

void DeliveryLedger::CompleteIfDone(int64_t split, Partial& partial) {
  if (partial.rows < 0 || partial.done < partial.rows) return;
  partial_.erase(split);
  complete_[split] = true;
  while (below_ < static_cast<int64_t>(complete_.size()) && complete_[below_]) ++below_;
}

DoneRows DeliveryLedger::Snapshot() const {
  absl::MutexLock lock(&mu_);
  DoneRows done;
  done.splits_below = below_;
  for (int64_t s = below_; s < static_cast<int64_t>(complete_.size()); ++s) {
    if (complete_[s]) done.splits.push_back(s);
  }
  for (const auto& [split, partial] : partial_) {
    std::vector<int64_t> records = partial.records;
    std::sort(records.begin(), records.end());
    auto& ranges = done.records[(*order_)[split].file];
    for (int64_t record : records) {
      if (!ranges.empty() && ranges.back().second == record) {
        ++ranges.back().second;
      } else {
        ranges.emplace_back(record, record + 1);
      }
    }
  }
  for (auto& [file, ranges] : done.records) std::sort(ranges.begin(), ranges.end());
  return done;
}

}  // namespace sluice::exec
