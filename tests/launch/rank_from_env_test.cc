// RankFromEnv: where a rank sits, read back from the variables its
// launcher or srun set (label unit: pure, no torch).
#include <gtest/gtest.h>

#include <map>

#include "core/records/hostlist.h"
#include "launch/rank_env.h"

namespace pilot::launch {
namespace {

EnvLookup EnvRankFromEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(RankEnv, NoRankVariables) {
  Result<RankInfo> r = RankFromEnv(EnvRankFromEnv({{"SLURM_JOB_ID", "5"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

TEST(RankEnv, LocalSpawn) {
  Result<RankInfo> r = RankFromEnv(EnvRankFromEnv({{"PILOT_RANK", "1"}, {"PILOT_WORLD_SIZE", "2"}, {"PILOT_LOCAL_RANK", "1"},
                                        {"PILOT_MASTER_ADDR", "127.0.0.1"}, {"PILOT_MASTER_PORT", "40001"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->world_size, 2);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->master_port, 40001);
  EXPECT_EQ(r->launcher, "local");
}

TEST(RankEnv, LocalSpawnRejectsRankOutsideWorld) {
  Result<RankInfo> r = RankFromEnv(EnvRankFromEnv({{"PILOT_RANK", "2"}, {"PILOT_WORLD_SIZE", "2"}, {"PILOT_LOCAL_RANK", "0"},
                                        {"PILOT_MASTER_PORT", "40001"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  EXPECT_NE(r.status().ToString().find("PILOT_RANK"), std::string::npos);
}

TEST(RankEnv, SrunStepTwoNodes) {
  std::map<std::string, std::string> v = {{"SLURM_STEP_ID", "0"},       {"SLURM_NTASKS", "4"},
                                          {"SLURM_PROCID", "3"},        {"SLURM_LOCALID", "1"},
                                          {"SLURM_NODEID", "1"},        {"SLURM_JOB_ID", "4242"},
                                          {"SLURM_JOB_NODELIST", "gpu[07-08]"}};
  Result<RankInfo> r = RankFromEnv(EnvRankFromEnv(v));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->local_rank, 1);
  EXPECT_EQ(r->node_id, 1);
  EXPECT_EQ(r->master_addr, "gpu07");
  EXPECT_EQ(r->master_port, MasterPortForJob(4242));
  EXPECT_EQ(r->launcher, "srun");
  EXPECT_EQ(r->launch_addr, "");
  v["SLURM_LAUNCH_NODE_IPADDR"] = "10.1.2.7";
  r = RankFromEnv(EnvRankFromEnv(v));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->master_addr, "gpu07") << "the first host's name comes first";
  EXPECT_EQ(r->launch_addr, "10.1.2.7");
  v["SLURM_STEP_NODELIST"] = "gpu08";
  v["PILOT_MASTER_PORT"] = "31000";
  r = RankFromEnv(EnvRankFromEnv(v));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->master_addr, "gpu08");
  EXPECT_EQ(r->master_port, 31000);
}

TEST(RankEnv, SrunStepBadNodelist) {
  Result<RankInfo> r = RankFromEnv(EnvRankFromEnv({{"SLURM_STEP_ID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "0"},
                                        {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "1"},
                                        {"SLURM_JOB_NODELIST", "gpu[1-"}}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalid);
}

}  // namespace
}  // namespace pilot::launch
