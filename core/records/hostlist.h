// Where this process sits in the node stage: rank, world size, local rank,
// node, and the rendezvous address. Pure functions of the environment (no
// torch), shared by pilot-runner and its unit tests.
//
// Sources, in order:
//   PILOT_RANK, PILOT_WORLD_SIZE, PILOT_LOCAL_RANK, PILOT_MASTER_ADDR,
//   PILOT_MASTER_PORT (and optional PILOT_NODE_ID): set by pilot-runner
//   itself for the processes it spawns (`--nproc N`, parallel.launcher =
//   "local");
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//   SLURM_JOB_NODELIST (or SLURM_STEP_NODELIST), SLURM_JOB_ID: inside an
//   srun step. The master is the first host of the node list; the port is
//   MasterPortForJob(job id) unless PILOT_MASTER_PORT is set.
//   SLURM_LAUNCH_NODE_IPADDR (the address srun was started from, which is
//   rank 0's node: the launcher runs there) is kept as launch_addr, the
//   rendezvous address when the first host's name does not resolve
//   (runner/node/comm.cc).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/env_lookup.h"
#include "core/base/status.h"

namespace pilot {

// The documented port range of the rendezvous: [kPortBase, kPortBase + kPortSpan).
inline constexpr int kPortBase = 29500;
inline constexpr int kPortSpan = 10000;

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int node_id = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = kPortBase;
  std::string launcher;  // "local" or "srun"
  std::string launch_addr;  // SLURM_LAUNCH_NODE_IPADDR, srun only
};

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

// The rank of this process from the variables above, or nullopt-like
// kNotFound when none is set (this process is not a rank: it may launch).
// Errors: kNotFound (no rank variables), kInvalid (a variable that is not a
// number, rank outside [0, world), a node list that does not expand).
Result<RankInfo> RankFromEnv(const EnvLookup& env);

// True when the environment says this process runs inside an srun step
// with more than one task (SLURM_STEP_ID and SLURM_NTASKS set).
bool InSlurmStep(const EnvLookup& env);

}  // namespace pilot
