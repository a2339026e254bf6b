// The variables that tell a rank where it sits, in the two spellings the
// launch layer's callers start ranks with:
//   kPilot     PILOT_RANK, PILOT_WORLD_SIZE, PILOT_LOCAL_RANK,
//              PILOT_MASTER_ADDR, PILOT_MASTER_PORT: pilot-runner's ranks
//              started locally, read back by RankFromEnv below;
//   kTorchrun  RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
//              NODE_RANK, MASTER_ADDR, MASTER_PORT: torchrun's, for a
//              user's program (pilot-program(7), ENVIRONMENT).
// Ranks of an srun step get theirs from srun's own variables: SLURM_* for
// pilot-runner (RankFromEnv), torchrun's set in each task by
// TorchrunTaskCommand (launch/srun.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/env_lookup.h"
#include "core/base/status.h"
#include "core/records/hostlist.h"

namespace pilot::launch {

enum class RankVars { kPilot, kTorchrun };

// Where one rank sits.
struct RankPlace {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;  // kTorchrun only
  int node_rank = 0;         // kTorchrun only (GROUP_RANK, NODE_RANK)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
};

// Sets the rank's variables in `env` ("NAME=value" entries): an entry of
// the same name is replaced (its first), else one is appended, in the
// order listed above.
void SetRankEnv(std::vector<std::string>* env, const RankPlace& place, RankVars vars);

// The names SetRankEnv sets for `vars`, in its order.
std::vector<std::string_view> RankEnvNames(RankVars vars);

// Where this process sits in the node stage: rank, world size, local rank,
// node, and the rendezvous address, read back from its environment (no
// torch). Sources, in order:
//   PILOT_RANK, PILOT_WORLD_SIZE, PILOT_LOCAL_RANK, PILOT_MASTER_ADDR,
//   PILOT_MASTER_PORT (and optional PILOT_NODE_ID): set by pilot-runner
//   itself for the processes it spawns (`--nproc N`, parallel.launcher =
//   "local");
//   SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID,
//   SLURM_JOB_NODELIST (or SLURM_STEP_NODELIST), SLURM_JOB_ID: inside an
//   srun step. The master is the first host of the node list; the port is
//   MasterPortForJob(job id) (core/records/hostlist.h) unless
//   PILOT_MASTER_PORT is set.
//   SLURM_LAUNCH_NODE_IPADDR (the address srun was started from, which is
//   rank 0's node: the launcher runs there) is kept as launch_addr, the
//   rendezvous address when the first host's name does not resolve
//   (runner/node/comm.cc).
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

// The rank of this process from the variables above, or nullopt-like
// kNotFound when none is set (this process is not a rank: it may launch).
// Errors: kNotFound (no rank variables), kInvalid (a variable that is not a
// number, rank outside [0, world), a node list that does not expand).
Result<RankInfo> RankFromEnv(const EnvLookup& env);

// True when the environment says this process runs inside an srun step
// with more than one task (SLURM_STEP_ID and SLURM_NTASKS set).
bool InSlurmStep(const EnvLookup& env);

}  // namespace pilot::launch
