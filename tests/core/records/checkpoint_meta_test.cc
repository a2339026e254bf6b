#include "core/records/checkpoint_meta.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace pilot {
namespace {

using ::testing::HasSubstr;

CheckpointState SampleState() {
  CheckpointState s;
  s.step = 10;
  s.seed = 18446744073709551557ull;  // above INT64_MAX: written unsigned
  s.data = {"u16", 40};
  s.scheduler = {"cosine", 20, 2.5e-4};
  s.scaler = {"fp16", 65536.0, 3, 1};
  s.rng = {"0a0b", ""};
  s.config_sha256 = std::string(64, 'a');
  s.device = "cpu";
  s.model = {"gpt", 12345, std::nullopt};
  s.optimizer = "adamw";
  s.eval = {4, 3.25};
  return s;
}

// The bytes pilot-runner's checkpoint writer produces for `s`, built the way
// it builds them (insertion-ordered JSON, NaN as a string).
std::string RunnerStateText(const CheckpointState& s) {
  using J = nlohmann::ordered_json;
  auto num = [](double v) -> J {
    if (std::isfinite(v)) return v;
    return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
  };
  J j;
  j["schema"] = "slurm-pilot/checkpoint/1";
  j["step"] = s.step;
  j["seed"] = s.seed;
  j["data"] = {{"format", s.data.format}, {"next_index", s.data.next_index}};
  j["scheduler"] = {{"kind", s.scheduler.kind},
                    {"horizon", s.scheduler.horizon},
                    {"lr_last", num(s.scheduler.lr_last)}};
  j["scaler"] = {{"precision", s.scaler.precision},
                 {"scale", num(s.scaler.scale)},
                 {"growth_tracker", s.scaler.growth_tracker},
                 {"skipped", s.scaler.skipped}};
  j["rng"] = {{"cpu", s.rng.cpu}, {"cuda", s.rng.cuda}};
  j["config_sha256"] = s.config_sha256;
  j["device"] = s.device;
  j["model"] = {{"kind", s.model.kind}, {"params", s.model.params}};
  j["optimizer"] = s.optimizer;
  j["eval"] = {{"batches", s.eval.batches}, {"loss", num(s.eval.loss)}};
  return j.dump(2) + "\n";
}

TEST(CheckpointState, WritesTheRunnersBytesAndReadsThemBack) {
  CheckpointState s = SampleState();
  const std::string text = CheckpointStateToJson(s);
  EXPECT_EQ(text, RunnerStateText(s));
  auto back = ParseCheckpointState(text, "state.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
}

TEST(CheckpointState, DivergedValuesSurvive) {
  CheckpointState s = SampleState();
  s.eval.loss = std::nan("");
  s.scheduler.lr_last = INFINITY;
  const std::string text = CheckpointStateToJson(s);
  EXPECT_EQ(text, RunnerStateText(s));
  EXPECT_THAT(text, HasSubstr("\"loss\": \"nan\""));
  auto back = ParseCheckpointState(text, "state.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(back->eval.loss));
  EXPECT_EQ(back->scheduler.lr_last, INFINITY);
}

TEST(CheckpointState, Strict) {
  auto j = nlohmann::json::parse(CheckpointStateToJson(SampleState()));
  auto error = [](const nlohmann::json& x) {
    return ParseCheckpointState(x.dump(), "state.json").status().ToString();
  };
  auto bad = j;
  bad["scaler"].erase("skipped");
  EXPECT_EQ(error(bad), "pilot: state.json: scaler.skipped: missing");
  bad = j;
  bad["rng"]["mt"] = "x";
  EXPECT_EQ(error(bad), "pilot: state.json: rng.mt: unknown field");
  bad = j;
  bad["step"] = 1.5;
  EXPECT_EQ(error(bad), "pilot: state.json: step: expected integer, got number");
  bad = j;
  bad["schema"] = "slurm-pilot/checkpoint/2";
  EXPECT_THAT(error(bad), HasSubstr("state.json: schema: unsupported version"));
  EXPECT_EQ(ParseCheckpointState("[]", "state.json").status().code(), Code::kCorrupt);
}

TEST(CheckpointManifest, WritesTheRunnersBytesAndRefusesPaths) {
  CheckpointManifest m;
  m.step = 10;
  m.files = {{"model.safetensors", 1000, std::string(64, 'b')}, {"state.json", 42, std::string(64, 'c')}};
  nlohmann::ordered_json mj;
  mj["schema"] = "slurm-pilot/checkpoint/1";
  mj["step"] = m.step;
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& f : m.files) files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  mj["files"] = files;
  const std::string text = CheckpointManifestToJson(m);
  EXPECT_EQ(text, mj.dump(2) + "\n");
  auto back = ParseCheckpointManifest(text, "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);

  for (const char* name : {"../etc/passwd", ".hidden", ""}) {
    CheckpointManifest bad = m;
    bad.files[1].name = name;
    EXPECT_EQ(ParseCheckpointManifest(CheckpointManifestToJson(bad), "manifest.json").status().ToString(),
              "pilot: manifest.json: files[1].name: not a plain file name")
        << name;
  }
}

TEST(NodeCheckpointManifest, WritesTheRunnersBytes) {
  NodeCheckpointManifest m;
  m.step = 4;
  m.world_size = 2;
  m.data_ranks = 2;
  m.mode = "fsdp";
  m.seed = 7;
  m.optimizer = "adamw";
  m.optimizer_step = 4;
  m.states = {"exp_avg", "exp_avg_sq"};
  m.params = {{"wte.weight", {256, 64}, 16384, 8192}, {"ln_f.bias", {64}, 64, 32}};
  m.files = {{"model-00000-of-00002.safetensors", 0, 100, std::string(64, 'd')},
             {"model-00001-of-00002.safetensors", 1, 100, std::string(64, 'e')}};
  // As the node checkpoint writer builds it: sorted keys.
  using J = nlohmann::json;
  J params = J::array();
  for (const auto& p : m.params) {
    params.push_back({{"name", p.name}, {"shape", p.shape}, {"numel", p.numel}, {"chunk", p.chunk}});
  }
  J all = J::array();
  for (const auto& f : m.files) {
    all.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}, {"sha256", f.sha256}});
  }
  J mj = {{"schema", "slurm-pilot/node-checkpoint/1"}, {"step", m.step}, {"world_size", m.world_size},
          {"data_ranks", m.data_ranks}, {"mode", m.mode}, {"seed", m.seed},
          {"optimizer", m.optimizer}, {"optimizer_step", m.optimizer_step},
          {"states", m.states}, {"params", params}, {"files", all}};
  const std::string text = NodeCheckpointManifestToJson(m);
  EXPECT_EQ(text, mj.dump(2) + "\n");
  auto back = ParseNodeCheckpointManifest(text, "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, m);

  J bad = mj;
  bad["params"][0]["shape"][1] = "64";
  EXPECT_EQ(ParseNodeCheckpointManifest(bad.dump(), "manifest.json").status().ToString(),
            "pilot: manifest.json: params[0].shape[1]: expected integer, got string");
  bad = mj;
  bad["schema"] = "slurm-pilot/checkpoint/1";
  EXPECT_EQ(ParseNodeCheckpointManifest(bad.dump(), "manifest.json").status().ToString(),
            "pilot: manifest.json: schema: expected \"slurm-pilot/node-checkpoint/1\", got "
            "\"slurm-pilot/checkpoint/1\"");
}

}  // namespace
}  // namespace pilot
