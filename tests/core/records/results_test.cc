// results.json: round trip, strictness, field paths in errors, limits.
#include "core/records/results.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/records/record.h"
#include "core/records/verify_report.h"

namespace pilot {
namespace {

using ::testing::HasSubstr;

Results SampleResults() {
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
  Results r = SampleResults();
  std::string text = ResultsToJson(r);
  Result<Results> back = ParseResults(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(ResultsToJson(*back), text);
}

TEST(Results, WritesTheDocumentedPaths) {
  nlohmann::json j = nlohmann::json::parse(ResultsToJson(SampleResults()));
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
  Results r = SampleResults();
  r.single->losses = {std::nan(""), INFINITY, -INFINITY};
  Result<Results> back = ParseResults(ResultsToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(std::isnan(back->single->losses[0]));
  EXPECT_EQ(back->single->losses[1], INFINITY);
  EXPECT_EQ(back->single->losses[2], -INFINITY);
}

TEST(Results, NoSingleStageIsNull) {
  Results r = SampleResults();
  r.single.reset();
  Result<Results> back = ParseResults(ResultsToJson(r));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->single.has_value());
}

// Edits the sample's JSON and returns the parse error message.
std::string ErrorAfter(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(ResultsToJson(SampleResults()));
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
  nlohmann::json j = nlohmann::json::parse(ResultsToJson(SampleResults()));
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
  Results r = SampleResults();
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
  nlohmann::json old = nlohmann::json::parse(ResultsToJson(SampleResults()));
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

// The deep listing names the members of optional records and of arrays of
// records; the plain one stops at them.
TEST(Results, KeysNameNestedMembers) {
  std::vector<std::string> names;
  for (const RecordKey& k : ResultsKeys()) names.push_back(k.name);
  auto has = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  for (const char* n : {"schema", "workload", "stages.single.restore.equal",
                        "stages.node.restore[].world_size", "supervisor.processes[].role",
                        "supervisor.device_memory[].uuid", "program.checkpoint_files",
                        "program.processes[].stderr_tail"}) {
    EXPECT_TRUE(has(n)) << n;
  }
  EXPECT_FALSE(has("program"));
  EXPECT_FALSE(has("program.processes"));
  bool files = false;
  for (const RecordKey& k : VerifyReportKeys()) files = files || k.name == "files";
  EXPECT_TRUE(files);
}

// Whether `name` is set in bold in roff `text` (\fBname\fR, or the tag of
// a .B line).
bool NamedInBold(const std::string& text, const std::string& name) {
  for (const std::string& form : {"\\fB" + name + "\\fR", "\\fB" + name + "\n", ".B " + name + "\n",
                                  ".B " + name + "\\fR", "\\fB" + name + "\\fI"}) {
    if (text.find(form) != std::string::npos) return true;
  }
  return false;
}

// Every member is named in pilot-files(5)'s RESULTS.JSON section, and each
// member of supervisor and program (every part of its path) in that
// member's own paragraph.
TEST(Results, EveryKeyIsDocumented) {
  std::ifstream in(std::string(PILOT_SOURCE_DIR) + "/man/pilot-files.5");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string page = ss.str();
  const size_t begin = page.find(".SH RESULTS.JSON");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = page.find("\n.SH ", begin + 1);
  const std::string section = page.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  // From ".B top" to the next paragraph that is not a tagged one of its own.
  auto paragraph = [&](const std::string& top) {
    const size_t at = section.find(".TP\n.B " + top + "\n");
    if (at == std::string::npos) return std::string();
    const size_t stop = section.find("\n.PP", at);
    return section.substr(at, stop == std::string::npos ? std::string::npos : stop - at);
  };
  const std::string supervisor = paragraph("supervisor"), program = paragraph("program");
  ASSERT_FALSE(supervisor.empty());
  ASSERT_FALSE(program.empty()) << "pilot-files(5), RESULTS.JSON: no paragraph for program";
  size_t checked = 0;
  for (const RecordKey& k : ResultsKeys()) {
    std::vector<std::string> parts;
    std::stringstream path(k.name);
    for (std::string p; std::getline(path, p, '.');) {
      if (p.size() > 2 && p.ends_with("[]")) p.resize(p.size() - 2);
      parts.push_back(p);
    }
    const std::string* where = &section;
    if (parts.size() > 1 && parts[0] == "supervisor") where = &supervisor;
    if (parts.size() > 1 && parts[0] == "program") where = &program;
    const size_t from = where == &section ? 0 : 1;
    for (size_t i = from; i < parts.size(); ++i) {
      EXPECT_TRUE(NamedInBold(*where, parts[i]))
          << "pilot-files(5), RESULTS.JSON: " << parts[i] << " of " << k.name << " is not documented"
          << (where == &section ? "" : " in the " + parts[0] + " paragraph");
    }
    ++checked;
  }
  EXPECT_GT(checked, 200u);
}

}  // namespace
}  // namespace pilot
