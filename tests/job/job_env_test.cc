// ReadJobEnv: the job as slurmd describes it to the prolog and epilog.
#include "job/job_env.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

namespace pilot {
namespace {

job::Lookup MapLookup(std::map<std::string, std::string> m) {
  return [m](const std::string& k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

TEST(JobEnv, PilotAndPlainJobs) {
  std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", "17"},       {"SLURM_JOB_UID", "1001"},
      {"SLURM_JOB_GID", "1002"},    {"SLURM_JOB_USER", "alice"},
      {"SLURMD_NODENAME", "n1"},    {"SLURM_JOB_NUM_NODES", "2"},
      {"SLURM_JOB_EXIT_CODE2", "0:9"}};
  auto plain = job::ReadJobEnv(MapLookup(env));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->is_pilot);
  EXPECT_EQ(plain->job_id, 17);
  EXPECT_EQ(plain->uid, 1001u);
  EXPECT_EQ(plain->gid, 1002u);
  EXPECT_EQ(plain->nodes, 2);
  env["SPANK_SLURM_PILOT_CONFIG"] = "/c/x.toml";
  env["SPANK_SLURM_PILOT_CONFIG_SHA256"] = std::string(64, 'a');
  env["SPANK_SLURM_PILOT_STAGE"] = "node";
  auto pilot = job::ReadJobEnv(MapLookup(env));
  ASSERT_TRUE(pilot.ok());
  EXPECT_TRUE(pilot->is_pilot);
  EXPECT_EQ(pilot->config_path, "/c/x.toml");
  EXPECT_EQ(pilot->stage, "node");
  EXPECT_EQ(pilot->exit_code, "0:9");
  // The option alone (config not recorded) still marks a pilot job.
  env.erase("SPANK_SLURM_PILOT_CONFIG");
  env["SPANK__SLURM_SPANK_OPTION_pilot_pilot"] = "x.toml";
  EXPECT_TRUE(job::ReadJobEnv(MapLookup(env))->is_pilot);
}

// Proves: the prolog learns the job's GPUs from slurmd's SLURM_JOB_GPUS
// (recorded in the lock as job.gpus), "" when the job has none.
TEST(JobEnv, GpusFromSlurmd) {
  std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", "17"}, {"SLURM_JOB_UID", "1001"}, {"SLURM_JOB_GID", "1002"}};
  EXPECT_EQ(job::ReadJobEnv(MapLookup(env))->gpus, "");
  env["SLURM_JOB_GPUS"] = "0,3";
  EXPECT_EQ(job::ReadJobEnv(MapLookup(env))->gpus, "0,3");
}

// A long job's --pilot-run reaches the prolog as SPANK_SLURM_PILOT_RUN: a
// job id, or -1 when it names none the prolog could check (it refuses).
TEST(JobEnv, ThePilotRunALongJobNames) {
  std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", "17"}, {"SLURM_JOB_UID", "1001"}, {"SLURM_JOB_GID", "1002"}};
  EXPECT_EQ(job::ReadJobEnv(MapLookup(env))->pilot_run, 0);
  env["SPANK_SLURM_PILOT_RUN"] = "4242";
  EXPECT_EQ(job::ReadJobEnv(MapLookup(env))->pilot_run, 4242);
  EXPECT_FALSE(job::ReadJobEnv(MapLookup(env))->is_pilot);
  for (const char* bad : {"0", "12a", "-3", "99999999999999999999"}) {
    env["SPANK_SLURM_PILOT_RUN"] = bad;
    EXPECT_EQ(job::ReadJobEnv(MapLookup(env))->pilot_run, -1) << bad;
  }
}

TEST(JobEnv, MissingOrBadIds) {
  EXPECT_FALSE(job::ReadJobEnv(MapLookup({{"SLURM_JOB_UID", "1"}, {"SLURM_JOB_GID", "1"}}))
                   .ok());
  auto bad = job::ReadJobEnv(
      MapLookup({{"SLURM_JOB_ID", "12x"}, {"SLURM_JOB_UID", "1"}, {"SLURM_JOB_GID", "1"}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("SLURM_JOB_ID: not a number"), std::string::npos);
}

TEST(JobEnv, TheFirstNodeOfAJobOfSeveral) {
  job::JobEnv j;
  j.nodes = 3;
  j.node_list = "gpu[07-08],io1";
  j.host = "gpu07";
  EXPECT_EQ(job::FirstNode(j), "gpu07");
  EXPECT_EQ(job::FirstNodeIfOther(j), std::nullopt) << "the first node is not another";
  j.host = "io1";
  EXPECT_EQ(job::FirstNodeIfOther(j), "gpu07");
  // One node, or what cannot be known, is never "another node": the
  // prolog and epilog then do as for a job of one node.
  j.nodes = 1;
  EXPECT_EQ(job::FirstNodeIfOther(j), std::nullopt);
  j.nodes = 3;
  j.node_list = "gpu[07-";
  EXPECT_EQ(job::FirstNode(j), std::nullopt);
  EXPECT_EQ(job::FirstNodeIfOther(j), std::nullopt);
  j.node_list = "gpu[07-08]";
  j.host = "";
  EXPECT_EQ(job::FirstNodeIfOther(j), std::nullopt);
  // From the environment the prolog sees.
  auto env = job::ReadJobEnv(MapLookup({{"SLURM_JOB_ID", "9"}, {"SLURM_JOB_UID", "1"},
                                        {"SLURM_JOB_GID", "1"}, {"SLURM_JOB_NUM_NODES", "2"},
                                        {"SLURM_JOB_NODELIST", "pn[1-2]"}, {"SLURMD_NODENAME", "pn2"}}));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(job::FirstNodeIfOther(*env), "pn1");
}

}  // namespace
}  // namespace pilot
