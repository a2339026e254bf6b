// Slurm host lists (core/records/hostlist.h ExpandHostlist), and the rank
// variables of an srun step with that list (launch/rank_env.h RankFromEnv).
#include <optional>

#include "core/records/hostlist.h"
#include "launch/rank_env.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string list(pilot::fuzz::Text(data, size));
  auto hosts = pilot::ExpandHostlist(list);
  if (hosts.ok()) {
    pilot::fuzz::Require(!hosts->empty() && hosts->size() <= 100000, "host count out of range");
  }
  auto env = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "SLURM_JOB_NODELIST") return list;
    if (name == "SLURM_PROCID" || name == "SLURM_LOCALID" || name == "SLURM_NODEID") return "0";
    if (name == "SLURM_NTASKS") return "2";
    if (name == "SLURM_JOB_ID") return "4242";
    return std::nullopt;
  };
  (void)pilot::launch::RankFromEnv(env);
  return 0;
}
