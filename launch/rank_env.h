// The variables that tell a rank where it sits, in the two spellings the
// launch layer's callers start ranks with:
//   kPilot     PILOT_RANK, PILOT_WORLD_SIZE, PILOT_LOCAL_RANK,
//              PILOT_MASTER_ADDR, PILOT_MASTER_PORT: pilot-runner's ranks
//              started locally, read back by core/records/hostlist.h
//              (RankFromEnv);
//   kTorchrun  RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
//              NODE_RANK, MASTER_ADDR, MASTER_PORT: torchrun's, for a
//              user's program (pilot-program(7), ENVIRONMENT).
// Ranks of an srun step get theirs from srun's own variables: SLURM_* for
// pilot-runner (core/records/hostlist.h), torchrun's set in each task by
// TorchrunTaskCommand (launch/srun.h).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

}  // namespace pilot::launch
