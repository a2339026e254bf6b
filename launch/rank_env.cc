#include "launch/rank_env.h"

#include <utility>

namespace pilot::launch {
namespace {

void Set(std::vector<std::string>* env, std::string_view name, const std::string& value) {
  std::string entry = std::string(name) + "=" + value;
  for (std::string& e : *env) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
      e = std::move(entry);
      return;
    }
  }
  env->push_back(std::move(entry));
}

}  // namespace

std::vector<std::string_view> RankEnvNames(RankVars vars) {
  if (vars == RankVars::kPilot) {
    return {"PILOT_RANK", "PILOT_WORLD_SIZE", "PILOT_LOCAL_RANK", "PILOT_MASTER_ADDR",
            "PILOT_MASTER_PORT"};
  }
  return {"RANK",       "LOCAL_RANK", "WORLD_SIZE",  "LOCAL_WORLD_SIZE",
          "GROUP_RANK", "NODE_RANK",  "MASTER_ADDR", "MASTER_PORT"};
}

void SetRankEnv(std::vector<std::string>* env, const RankPlace& p, RankVars vars) {
  const std::vector<std::string_view> names = RankEnvNames(vars);
  const std::vector<std::string> values =
      vars == RankVars::kPilot
          ? std::vector<std::string>{std::to_string(p.rank), std::to_string(p.world_size),
                                     std::to_string(p.local_rank), p.master_addr,
                                     std::to_string(p.master_port)}
          : std::vector<std::string>{std::to_string(p.rank),
                                     std::to_string(p.local_rank),
                                     std::to_string(p.world_size),
                                     std::to_string(p.local_world_size),
                                     std::to_string(p.node_rank),
                                     std::to_string(p.node_rank),
                                     p.master_addr,
                                     std::to_string(p.master_port)};
  for (size_t i = 0; i < names.size(); ++i) Set(env, names[i], values[i]);
}

}  // namespace pilot::launch
