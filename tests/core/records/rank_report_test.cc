#include "core/records/rank_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace pilot {
namespace {

using ::testing::HasSubstr;

// The keys of a finished train-phase rank 0 report as pilot-runner's node
// rank writes them today.
RankReport FullReport() {
  RankReport r;
  r.rank = 0;
  r.world_size = 2;
  r.local_rank = 0;
  r.node_id = 0;
  r.launcher = "local";
  r.phase = "train";
  r.host = "gpu01";
  r.backend = "gloo";
  r.mode = "ddp";
  r.data_ranks = 2;
  r.buckets = 3;
  r.units = 5;
  r.memory = RankMemory{"cpu", 2, 100, 200, std::nullopt, std::nullopt, 300, 250, 90};
  r.checkpoint = RankCheckpoint{"/ckpt/node/checkpoints/step-000002", 2, 4096, 0.25};
  r.first_step = 1;
  r.losses = std::vector<double>{5.5, 5.25, 5.0};
  r.grad_norms = std::vector<double>{1.5, 1.25, 1.0};
  r.timed_steps = 1;
  r.step_ms = 12.5;
  r.tokens_per_second = 1000;
  r.data_wait_ms = 0.5;
  r.compute_ms = 10;
  r.comm_total_ms = 2;
  r.comm_exposed_ms = 1;
  r.optimizer_ms = 0.75;
  r.collectives_per_step = 3;
  r.comm_probe = RankCommProbe{4 << 20, 2, 2, 0.75, std::nullopt, std::nullopt};
  r.status = "ok";
  r.exit_code = 0;
  return r;
}

std::set<std::string> KeysOf(const std::string& text) {
  std::set<std::string> keys;
  const nlohmann::json j = nlohmann::json::parse(text);
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

TEST(RankReport, RoundTripWithTheRunnersKeys) {
  const RankReport r = FullReport();
  const std::string text = RankReportToJson(r);
  EXPECT_EQ(KeysOf(text),
            (std::set<std::string>{"rank", "world_size", "local_rank", "node_id", "launcher", "phase", "host",
                                   "backend", "mode", "data_ranks", "buckets", "units", "memory", "checkpoint",
                                   "first_step", "losses", "grad_norms", "timed_steps", "step_ms",
                                   "tokens_per_second", "data_wait_ms", "compute_ms", "comm_total_ms",
                                   "comm_exposed_ms", "optimizer_ms", "collectives_per_step", "comm_probe", "status",
                                   "exit_code"}));
  auto memory = nlohmann::json::parse(text)["memory"];
  EXPECT_EQ(memory.size(), 7u);  // unset figures are left out, not null
  EXPECT_FALSE(memory.contains("device_used_bytes"));
  EXPECT_EQ(memory["forward_peak_allocated_bytes"], 90);
  auto probe = nlohmann::json::parse(text)["comm_probe"];
  EXPECT_EQ(probe.size(), 4u) << "a level of one rank is left out: " << probe.dump();
  auto back = ParseRankReport(text, "rank-00000.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

TEST(RankReport, ResumedAndFailedRanks) {
  RankReport r;
  r.rank = 1;
  r.world_size = 2;
  r.local_rank = 1;
  r.node_id = 0;
  r.launcher = "srun";
  r.phase = "resume";
  r.host = "gpu02";
  r.skipped = "optimizer";
  r.load = RankLoad{"/ckpt/step-000002", 2048, 0.5, 2};
  r.max_abs_param_diff = 0;
  r.max_rel_param_diff = 0;
  r.params_compared = 150;
  r.failure = RankFailure{"communication", 3, false};
  r.status = "error";
  r.exit_code = 1;
  r.message = "communication failed (a peer rank died or timed out) at step 3";
  r.losses = std::vector<double>{std::nan("")};
  const std::string text = RankReportToJson(r);
  EXPECT_EQ(KeysOf(text), (std::set<std::string>{"rank", "world_size", "local_rank", "node_id", "launcher",
                                                 "phase", "host", "skipped", "load", "losses",
                                                 "max_abs_param_diff", "max_rel_param_diff",
                                                 "params_compared", "failure", "status", "exit_code",
                                                 "message"}));
  auto back = ParseRankReport(text, "rank-00001.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->losses && back->losses->size() == 1);
  EXPECT_TRUE(std::isnan((*back->losses)[0]));
  back->losses.reset();
  r.losses.reset();
  EXPECT_EQ(*back, r);
}

TEST(RankReport, Strict) {
  auto j = nlohmann::ordered_json::parse(RankReportToJson(FullReport()));
  auto error = [](const nlohmann::ordered_json& x) {
    return ParseRankReport(x.dump(), "rank-00000.json").status().ToString();
  };
  auto bad = j;
  bad.erase("host");
  EXPECT_EQ(error(bad), "pilot: rank-00000.json: host: missing");
  bad = j;
  bad["memory"]["extra"] = 1;
  EXPECT_EQ(error(bad), "pilot: rank-00000.json: memory.extra: unknown key");
  bad = j;
  bad["status"] = "done";
  EXPECT_EQ(error(bad), "pilot: rank-00000.json: status: expected one of \"ok\", \"error\", got \"done\"");
  bad = j;
  bad["losses"][1] = true;
  EXPECT_EQ(error(bad), "pilot: rank-00000.json: losses[1]: expected a number, got a boolean");
  EXPECT_EQ(ParseRankReport("{", "r.json").status().ToString().rfind("pilot: r.json: not valid JSON: ", 0),
            0u);
}

TEST(RankReport, ReadFromFile) {
  const auto path = std::filesystem::temp_directory_path() / "pilot-rank-report-test.json";
  std::ofstream(path) << RankReportToJson(FullReport());
  auto r = ReadRankReport(path.string());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, FullReport());
  std::filesystem::remove(path);
  EXPECT_EQ(ReadRankReport(path.string()).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace pilot
