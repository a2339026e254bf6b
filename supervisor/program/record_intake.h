// The records of one phase of a user's program as they arrive, from its
// socket (metrics_socket.h), an srun step's labelled stdout, or the loss
// pattern's matches (group.h): the protocol each must keep
// (pilot-program(7), METRICS RECORDS). The first record of a step and rank
// stands: a second one, a step before the rank's last, a step or rank out
// of range, a record from a process that speaks for another rank, or a line
// past the protocol's 4095 bytes is a protocol break, counted and named,
// never kept. Every kept record is timed on the supervisor's clock as it
// arrives.
//
// Thread-safety: one phase's, from the supervisor's single thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "supervisor/program/group.h"
#include "supervisor/program/metrics.h"

namespace pilot::supervisor {

class RecordIntake {
 public:
  using Clock = std::chrono::steady_clock;

  // Records go into out->records (and envs, states, packages; the counts
  // of bad, dropped and breaking ones); `t0` is the phase's start.
  RecordIntake(const GroupSpec& spec, Clock::time_point t0, GroupResult* out);

  // `process_rank`: the rank of the phase's process the record came from
  // (RankLaunch::rank; nullopt for an orphan the supervisor inherited). A
  // record that names no rank speaks for its process's rank when that
  // process is one rank's, or the phase has only one. Each returns
  // whether a step record was kept.
  //
  // A probe line; `task`: the srun task whose line it is (its rank,
  // whatever the line says). Nothing with a loss pattern.
  bool Line(std::optional<int> process_rank, const std::string& line, std::optional<int> task);
  // A step record (a loss pattern's match, the probe's step line).
  bool Record(std::optional<int> process_rank, MetricRecord rec);
  // A protocol break found by the caller (a line too long for its buffer).
  void Break(const std::string& why);

  // Counts the time without records from now (the processes started).
  void StartIdleClock() { last_record_ = Clock::now(); }
  // When the last record was kept (StartIdleClock's time before the first).
  Clock::time_point last_record() const { return last_record_; }
  // The highest step any rank reported.
  int64_t last_step_seen() const { return last_step_seen_; }
  // Every expected rank reported `step`.
  bool EveryRankReached(int64_t step) const;

 private:
  void DefaultRank(std::optional<int> process_rank, std::optional<int>* rank) const;

  const GroupSpec& spec_;
  const Clock::time_point t0_;
  GroupResult& g_;
  Clock::time_point last_record_;
  int64_t last_step_seen_ = 0;
  std::map<int, int64_t> rank_last_step_;
};

}  // namespace pilot::supervisor
