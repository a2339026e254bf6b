#include "supervisor/program/record_intake.h"

#include <algorithm>

#include "core/base/utf8.h"

namespace pilot::supervisor {

RecordIntake::RecordIntake(const GroupSpec& spec, Clock::time_point t0, GroupResult* out)
    : spec_(spec), t0_(t0), g_(*out), last_record_(t0) {}

void RecordIntake::Break(const std::string& why) {
  if (g_.protocol_breaks++ < 5) g_.protocol_break_examples.push_back(why);
}

void RecordIntake::DefaultRank(std::optional<int> process_rank, std::optional<int>* rank) const {
  if (!*rank && process_rank && (spec_.process_per_rank || spec_.expected_ranks <= 1)) *rank = process_rank;
}

bool RecordIntake::Record(std::optional<int> process_rank, MetricRecord rec) {
  DefaultRank(process_rank, &rec.rank);
  const std::string step = "step " + std::to_string(rec.step);
  if (!rec.rank) {
    Break(step + " without a rank, from a process outside every rank's tree");
    return false;
  }
  const int rank = *rec.rank;
  const std::string who = "rank " + std::to_string(rank);
  if (rank < 0 || rank >= std::max(1, spec_.expected_ranks)) {
    Break(who + " reported " + step + ": ranks are 0.." + std::to_string(std::max(1, spec_.expected_ranks) - 1));
    return false;
  }
  if (spec_.process_per_rank && process_rank && *process_rank != rank) {
    Break("the process of rank " + std::to_string(*process_rank) + " reported " + step + " as " + who);
    return false;
  }
  // A step before first_step is kept: the resumed process that reports
  // step 1 did not restore, which CheckPhase says in those words.
  if (spec_.last_step > 0 && rec.step > spec_.last_step) {
    // A loss pattern's extra matches (an eval line) past step N are not records.
    if (!spec_.loss_pattern) {
      Break(who + " reported " + step + ", past the last step " + std::to_string(spec_.last_step));
    }
    return false;
  }
  auto last = rank_last_step_.find(rank);
  if (last != rank_last_step_.end() && rec.step <= last->second) {
    Break(who + " reported " + step +
          (rec.step == last->second ? " twice: the first record of a step stands"
                                    : " after step " + std::to_string(last->second) + ": steps only go forward"));
    return false;
  }
  if (static_cast<int64_t>(g_.records.size()) >= spec_.max_records) {
    ++g_.dropped_records;
    return false;
  }
  const Clock::time_point now = Clock::now();
  rec.arrived = std::chrono::duration<double>(now - t0_).count();
  last_record_ = now;
  last_step_seen_ = std::max(last_step_seen_, rec.step);
  rank_last_step_[rank] = rec.step;
  g_.records.push_back(std::move(rec));
  return true;
}

bool RecordIntake::Line(std::optional<int> process_rank, const std::string& line, std::optional<int> task) {
  if (spec_.loss_pattern || line.find_first_not_of(" \t\r") == std::string::npos) return false;
  if (line.size() > kMaxRecordLine) {
    Break("a record of " + std::to_string(line.size() + 1) + " bytes (the protocol's limit is " +
          std::to_string(kMaxRecordLine + 1) + ")");
    return false;
  }
  Result<ProbeLine> r = ParseProbeLine(line);
  if (!r.ok()) {
    if (g_.bad_records++ == 0) g_.first_bad_record = r.status().detail() + ": " + std::string(Utf8Head(line, 120));
    return false;
  }
  if (r->record) {
    if (task) r->record->rank = *task;
    return Record(process_rank, std::move(*r->record));
  }
  std::optional<int>& rank = r->env ? r->env->rank : r->state ? r->state->rank : r->packages->rank;
  if (task) rank = *task;
  DefaultRank(process_rank, &rank);
  // Another rank's line from a one-rank process, or no rank: not kept
  // (the step records' protocol names such a writer).
  if (!rank || *rank < 0 || *rank >= std::max(1, spec_.expected_ranks)) return false;
  if (spec_.process_per_rank && process_rank && *process_rank != *rank) return false;
  const size_t cap = 4 * static_cast<size_t>(std::max(1, spec_.expected_ranks)) + 16;
  if (r->env && g_.envs.size() < cap) g_.envs.push_back(std::move(*r->env));
  if (r->state && g_.states.size() < cap) g_.states.push_back(std::move(*r->state));
  // A process's distributions take a few lines; rank 0's are what is kept.
  if (r->packages && g_.packages.size() < 4 * cap) g_.packages.push_back(std::move(*r->packages));
  return false;
}

bool RecordIntake::EveryRankReached(int64_t step) const {
  bool all_done = spec_.expected_ranks > 0;
  for (int r = 0; r < spec_.expected_ranks; ++r) {
    auto it = rank_last_step_.find(r);
    all_done = all_done && it != rank_last_step_.end() && it->second >= step;
  }
  return all_done;
}

}  // namespace pilot::supervisor
