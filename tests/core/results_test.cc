// results.json: round trip, strictness, field paths in errors, limits.
#include "core/results.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace pilot {
namespace {

using ::testing::HasSubstr;

Results Sample() {
  Results r;
  r.config_path = "/home/alice/gpt.toml";
  r.config_sha256 = std::string(64, 'a');
  r.seed = 1234;
  r.started_at = "2026-11-30T04:00:00Z";
  r.finished_at = "2026-11-30T04:01:00Z";
  r.versions.runner = "0.1.0";
  r.versions.torch = "2.11.0";
  r.versions.devices = {"NVIDIA H200"};
  SingleStage s;
  s.status = "ok";
  s.device = "cuda";
  s.shape.model_kind = "gpt";
  s.shape.params = 1315819520;
  s.shape.seq_len = 2048;
  s.shape.micro_batch = 8;
  s.steps = 20;
  s.losses = {11.2, 11.1, 0.1 + 0.2};
  s.memory.device = "cuda";
  s.memory.step = 6;
  s.memory.peak_allocated_bytes = 57597668352;
  s.memory.device_used_bytes = 61210427392;
  s.memory_resumed = s.memory;
  s.memory_resumed->step = 11;
  s.checkpoint.path = "/tmp/ck/step-000010";
  s.checkpoint.bytes = 15790000000;
  s.checkpoint.save_seconds = 7.0;
  s.restore.ran = true;
  s.restore.equal = true;
  s.restore.resumed_losses = {1.5, 1.25};
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = 4;
  c.seq_len = 2048;
  c.steps = 2;
  c.step = 12;
  c.peak_allocated_bytes = 38040000000;
  c.peak_reserved_bytes = 40230000000;
  c.device_used_bytes = 41100000000;
  c.process_peak_rss_bytes = 1060966400;
  s.memory_calibration = c;
  FailureInfo f;
  f.kind = "oom";
  f.phase = "forward";
  f.memory.device = "cuda";
  s.failure = f;
  r.single = s;
  return r;
}

TEST(Results, RoundTripsExactly) {
  Results r = Sample();
  std::string text = ResultsToJson(r);
  Result<Results> back = ParseResults(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(ResultsToJson(*back), text);
}

TEST(Results, WritesTheDocumentedPaths) {
  nlohmann::json j = nlohmann::json::parse(ResultsToJson(Sample()));
  EXPECT_EQ(j["schema"], "slurm-pilot/results/1");
  const auto& s = j["stages"]["single"];
  EXPECT_TRUE(s["restore"]["equal"].get<bool>());
  EXPECT_TRUE(s["restore"].contains("max_abs_loss_diff"));
  EXPECT_EQ(s["memory"]["peak_allocated_bytes"], 57597668352);
  EXPECT_TRUE(s["memory"]["peak_reserved_bytes"].is_null());  // not measured
  EXPECT_EQ(s["memory_resumed"]["step"], 11);
  EXPECT_EQ(s["checkpoint"]["path"], "/tmp/ck/step-000010");
  EXPECT_TRUE(s["checkpoint"].contains("load_seconds"));
  EXPECT_TRUE(s["timings"].contains("data_wait_ms"));
}

TEST(Results, NonFiniteNumbersSurvive) {
  Results r = Sample();
  r.single->losses = {std::nan(""), INFINITY, -INFINITY};
  Result<Results> back = ParseResults(ResultsToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(back->single->losses[0]));
  EXPECT_EQ(back->single->losses[1], INFINITY);
  EXPECT_EQ(back->single->losses[2], -INFINITY);
}

TEST(Results, NoSingleStageIsNull) {
  Results r = Sample();
  r.single.reset();
  Result<Results> back = ParseResults(ResultsToJson(r));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->single.has_value());
}

// Edits the sample's JSON and returns the parse error message.
std::string ErrorAfter(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(ResultsToJson(Sample()));
  edit(j);
  Result<Results> r = ParseResults(j.dump(), "results.json");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().ToString();
}

TEST(Results, WrongTypeNamesTheFieldPath) {
  std::string e = ErrorAfter([](nlohmann::json& j) { j["stages"]["single"]["restore"]["equal"] = "yes"; });
  EXPECT_THAT(e, HasSubstr("results.json: stages.single.restore.equal: expected a boolean, got a string"));
  e = ErrorAfter([](nlohmann::json& j) { j["stages"]["single"]["losses"][1] = true; });
  EXPECT_THAT(e, HasSubstr("stages.single.losses[1]: expected a number"));
  e = ErrorAfter([](nlohmann::json& j) { j["stages"]["single"]["memory"]["step"] = 1.5; });
  EXPECT_THAT(e, HasSubstr("stages.single.memory.step: expected an integer"));
}

TEST(Results, UnknownAndMissingKeysAreErrors) {
  EXPECT_THAT(ErrorAfter([](nlohmann::json& j) { j["stages"]["single"]["checkpoint"]["extra"] = 1; }),
              HasSubstr("stages.single.checkpoint.extra: unknown key"));
  EXPECT_THAT(ErrorAfter([](nlohmann::json& j) { j["stages"]["cluster"] = nullptr; }),
              HasSubstr("stages.cluster: unknown key"));
  EXPECT_THAT(ErrorAfter([](nlohmann::json& j) { j["stages"]["single"]["memory"].erase("device_used_bytes"); }),
              HasSubstr("stages.single.memory.device_used_bytes: missing"));
  EXPECT_THAT(ErrorAfter([](nlohmann::json& j) { j.erase("stages"); }), HasSubstr("stages: missing"));
}

TEST(Results, MemoryCalibration) {
  nlohmann::json j = nlohmann::json::parse(ResultsToJson(Sample()));
  const auto& c = j["stages"]["single"]["memory_calibration"];
  EXPECT_EQ(c["status"], "ok");
  EXPECT_EQ(c["micro_batch"], 4);
  EXPECT_EQ(c["seq_len"], 2048);
  EXPECT_EQ(c["activation_checkpointing"], false);
  EXPECT_EQ(c["steps"], 2);
  EXPECT_EQ(c["step"], 12);
  EXPECT_EQ(c["peak_allocated_bytes"], 38040000000);
  EXPECT_EQ(c["peak_reserved_bytes"], 40230000000);
  EXPECT_EQ(c["device_used_bytes"], 41100000000);
  EXPECT_EQ(c["process_peak_rss_bytes"], 1060966400);
  EXPECT_EQ(c["detail"], "");
  // A CPU figure only, and the member null: both round-trip.
  Results r = Sample();
  r.single->memory_calibration->peak_allocated_bytes.reset();
  r.single->memory_calibration->detail = "no allocator peaks on a CPU";
  std::string text = ResultsToJson(r);
  Result<Results> back = ParseResults(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(ResultsToJson(*back), text);
  r.single->memory_calibration.reset();
  back = ParseResults(ResultsToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->single->memory_calibration);
  // A file written before the member existed reads as null; inside it the
  // reader is as strict as everywhere.
  nlohmann::json old = nlohmann::json::parse(ResultsToJson(Sample()));
  old["stages"]["single"].erase("memory_calibration");
  back = ParseResults(old.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->single->memory_calibration);
  EXPECT_THAT(ErrorAfter([](nlohmann::json& x) {
                x["stages"]["single"]["memory_calibration"].erase("steps");
              }),
              HasSubstr("stages.single.memory_calibration.steps: missing"));
  EXPECT_THAT(
      ErrorAfter([](nlohmann::json& x) {
        x["stages"]["single"]["memory_calibration"]["peak_allocated_bytes"] = "1";
      }),
      HasSubstr("stages.single.memory_calibration.peak_allocated_bytes: expected an integer"));
}

TEST(Results, SchemaIsChecked) {
  EXPECT_THAT(ErrorAfter([](nlohmann::json& j) { j["schema"] = "slurm-pilot/results/2"; }),
              HasSubstr("schema: unsupported"));
  EXPECT_THAT(ErrorAfter([](nlohmann::json& j) { j.erase("schema"); }), HasSubstr("schema: missing"));
}

TEST(Results, RefusesGarbageAndHugeInput) {
  Result<Results> r = ParseResults("{not json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().ToString(), HasSubstr("not valid JSON"));
  r = ParseResults("[1, 2]");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().ToString(), HasSubstr("expected an object"));
  r = ParseResults(std::string(kResultsMaxBytes + 1, ' '));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().ToString(), HasSubstr("larger than"));
}

TEST(Results, ReadsFiles) {
  Result<Results> r = ReadResultsFile("/nonexistent/results.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace pilot
