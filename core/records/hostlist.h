// Slurm's host list syntax and the rendezvous port of a job's ranks. Where
// a rank sits, read from the variables srun or pilot-runner set, is
// launch/rank_env.h's RankFromEnv.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace pilot {

// The documented port range of the rendezvous: [kPortBase, kPortBase + kPortSpan).
inline constexpr int kPortBase = 29500;
inline constexpr int kPortSpan = 10000;

// Expands Slurm's host list syntax: "node[01-03,7],gpu-a1,x[2-3]-ib" ->
// node01 node02 node03 node7 gpu-a1 x2-ib x3-ib. Zero padding of a range's
// lower bound is kept; several bracket groups in one name multiply out.
// Errors: kInvalid (unbalanced brackets, empty names or ranges, a range
// whose end is before its start, more than 100000 hosts).
Result<std::vector<std::string>> ExpandHostlist(const std::string& list);

// kPortBase + job_id % kPortSpan: every job of the cluster gets a port in
// the range, and two jobs sharing a node collide only when their ids are
// kPortSpan apart.
int MasterPortForJob(uint64_t job_id);

}  // namespace pilot
