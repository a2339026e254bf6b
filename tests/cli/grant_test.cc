// `pilot grant` against a temporary verdict store, with a fake scontrol that
// records its argv, and `pilot plan` / `pilot report` on a pilot's results.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/models/memory_replay.h"
#include "core/records/results.h"
#include "core/base/rfc3339.h"
#include "core/records/verdict.h"
#include "tests/core/toy_requests.h"
#include "tests/cli/run_pilot.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

using testutil::Ran;
using testutil::RunPilot;

std::string SlurpGrant(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path) << text;
  chmod(path.c_str(), mode);
}

class GrantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-grant-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/state/verdicts");
    Result<std::string> key = NewKeyFileContents();
    ASSERT_TRUE(key.ok());
    Write(dir_ + "/key", *key, 0600);
    Result<std::string> raw = ReadKeyFile(dir_ + "/key");
    ASSERT_TRUE(raw.ok()) << raw.status().ToString();
    key_ = *raw;
    // The fake scontrol records its arguments, one per line.
    Write(dir_ + "/scontrol",
          "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > " + dir_ +
              "/argv\nexit ${FAKE_RC:-0}\n",
          0755);
    Write(dir_ + "/pilot.conf", "state_dir = \"" + dir_ + "/state\"\nkey_file = \"" + dir_ +
                                    "/key\"\nhardware_catalog = \"" + PILOT_SOURCE_DIR +
                                    "/etc/hardware.toml\"\nscontrol_path = \"" + dir_ +
                                    "/scontrol\"\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The report fixture's results as if measured on a GPU.
  static Results OnAGpu() {
    Result<Results> r = ReadResultsFile(std::string(PILOT_SOURCE_DIR) + "/tests/report/fixtures/results.json");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    SingleStage& s = *r->single;
    s.device = "cuda";
    s.memory.peak_allocated_bytes = 400 << 20;
    s.memory.peak_reserved_bytes = 420 << 20;
    s.memory.device_used_bytes = 900 << 20;
    return *std::move(r);
  }
  // pilot report of `results` (written to DIR/gpu.json) with `cfg`: its
  // HTML from the "Projected against measured" heading on.
  std::string Projected(const Results& results, const std::string& cfg) {
    Write(dir_ + "/gpu.json", ResultsToJson(results));
    Ran h = RunPilot("report --policy " + dir_ + "/pilot.conf --config " + cfg + " -o " + dir_ +
                     "/gpu.html " + dir_ + "/gpu.json");
    EXPECT_EQ(h.rc, 0) << h.output;
    const std::string html = SlurpGrant(dir_ + "/gpu.html");
    const size_t at = html.find("<h2>Projected against measured</h2>");
    EXPECT_NE(at, std::string::npos);
    return at == std::string::npos ? "" : html.substr(at);
  }

  Verdict Good(int64_t id) {
    Verdict v;
    v.job = {id, "alice", "gpt-1b", std::string(64, 'a')};
    v.decision = Decision::kGo;
    v.binding = true;
    v.checks = {{"restore", CheckStatus::kPass, "equal", "equal", "", VerifiedBy::kEpilog}};
    v.budget.term = "30-day";
    v.budget.days = 19.4;
    const int64_t now = static_cast<int64_t>(std::time(nullptr));
    v.issued = FormatRfc3339(now - 3600);
    v.expires = FormatRfc3339(now + 86400 * 13);
    return v;
  }
  void Store(Verdict v, bool sign = true) {
    if (sign) SignVerdict(&v, key_);
    Write(dir_ + "/state/verdicts/" + std::to_string(v.job.id) + ".json", VerdictToJson(v));
  }
  Ran Grant(const std::string& args) {
    return RunPilot("grant --policy " + dir_ + "/pilot.conf " + args);
  }

  // Refusals are checked the same with --dry-run, which needs no root.
  static std::string Dry() { return getuid() == 0 ? "" : " --dry-run"; }

  std::string dir_;
  std::string key_;
};

TEST_F(GrantTest, GrantsAGoVerdictAndRecordsIt) {
  if (getuid() != 0) GTEST_SKIP() << "pilot grant needs root";
  Store(Good(4242));
  Ran r = Grant("4242 --nodes 4 --partition gpu --duration 20-0");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(SlurpGrant(dir_ + "/argv"),
            "create\nreservation\nReservationName=pilot_4242\nStartTime=now\nDuration=28800\n"
            "NodeCnt=4\nUsers=alice\nPartitionName=gpu\n");
  std::string record = SlurpGrant(dir_ + "/state/grants/4242.json");
  EXPECT_NE(record.find("\"reservation\": \"pilot_4242\""), std::string::npos) << record;
  EXPECT_NE(record.find("\"user\": \"alice\""), std::string::npos);
  EXPECT_NE(record.find("\"duration_minutes\": 28800"), std::string::npos);
  // A second grant of the same job is refused.
  Ran again = Grant("4242 --nodes 4");
  EXPECT_EQ(again.rc, 1);
  EXPECT_NE(again.output.find("already granted"), std::string::npos) << again.output;
}

TEST_F(GrantTest, DefaultDurationIsTheTerm) {
  Store(Good(7));
  Ran r = Grant("7 --nodes 2 --dry-run");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("Duration=43200 NodeCnt=2 Users=alice"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/argv"));  // dry run: nothing ran
}

TEST_F(GrantTest, Refusals) {
  struct Case {
    const char* name;
    std::function<void(Verdict&)> edit;
    bool sign;
    std::string args;
    std::string reason;
  };
  const Case cases[] = {
      {"no-go",
       [](Verdict& v) {
         v.decision = Decision::kNoGo;
         v.checks[0].status = CheckStatus::kFail;
       },
       true, "", "NO-GO (failed: restore)"},
      {"expired", [](Verdict& v) { v.expires = "2020-01-01T00:00:00Z"; }, true, "",
       "expired at 2020-01-01T00:00:00Z"},
      {"unsigned", [](Verdict&) {}, false, "", "signature: "},
      {"other user", [](Verdict&) {}, true, "--user bob", "belongs to user alice, not bob"},
      {"too long", [](Verdict& v) { v.budget.term = "7-day"; }, true, "--duration 8d",
       "exceeds the 7-day term"},
      {"no term", [](Verdict& v) { v.budget.term = "none"; }, true, "",
       "does not fit a 30-day reservation"},
      {"no budget",
       [](Verdict& v) {
         v.budget = Budget{};
         v.checks.push_back({"budget", CheckStatus::kSkip, "no budget", "", "no parameter count",
                             VerifiedBy::kWorkload});
       },
       true, "", "the verdict has no budget (no parameter count): a grant needs one"},
      {"not binding", [](Verdict& v) { v.binding = false; }, true, "", "not binding"},
  };
  int64_t id = 100;
  for (const Case& c : cases) {
    Verdict v = Good(++id);
    c.edit(v);
    Store(v, c.sign);
    Ran r = Grant(std::to_string(id) + " --nodes 2 " + c.args + Dry());
    EXPECT_EQ(r.rc, 1) << c.name << ": " << r.output;
    EXPECT_NE(r.output.find(c.reason), std::string::npos) << c.name << ": " << r.output;
    EXPECT_FALSE(fs::exists(dir_ + "/argv")) << c.name << ": scontrol ran";
    EXPECT_FALSE(fs::exists(dir_ + "/state/grants/" + std::to_string(id) + ".json")) << c.name;
  }
}

TEST_F(GrantTest, EditedVerdictIsRefused) {
  Verdict v = Good(55);
  SignVerdict(&v, key_);
  v.budget.term = "30-day";
  v.job.user = "mallory";  // changed after signing
  Store(v, /*sign=*/false);
  Ran r = Grant("55 --nodes 1" + Dry());
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("signature mismatch"), std::string::npos) << r.output;
}

TEST_F(GrantTest, AValidEd25519SignatureIsEnough) {
  Result<Ed25519KeyFiles> pair = NewEd25519KeyFiles();
  ASSERT_TRUE(pair.ok());
  Write(dir_ + "/ed.key", pair->private_pem, 0600);
  Write(dir_ + "/ed.pub", pair->public_pem, 0644);
  const std::string seed = ReadEd25519PrivateKeyFile(dir_ + "/ed.key").value();
  std::string conf = SlurpGrant(dir_ + "/pilot.conf");
  Write(dir_ + "/pilot.conf", conf + "public_key_file = \"" + dir_ + "/ed.pub\"\n");

  Verdict ed_only = Good(61);
  ASSERT_TRUE(SignVerdict(&ed_only, "", seed).ok());
  Store(ed_only, /*sign=*/false);
  Ran r = Grant("61 --nodes 1 --dry-run");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("signature valid (ed25519, key " + KeyId(pair->public_key) + ")"),
            std::string::npos)
      << r.output;

  // HMAC only (the public key knows no signature): still accepted, and said.
  Store(Good(62));
  Ran h = Grant("62 --nodes 1 --dry-run");
  EXPECT_EQ(h.rc, 0) << h.output;
  EXPECT_NE(h.output.find("signature valid (hmac-sha256, key " + KeyId(key_) +
                          "; ed25519: no ed25519 signature)"),
            std::string::npos)
      << h.output;

  // An Ed25519 signature that fails and no HMAC: refused, naming both.
  Verdict edited = Good(63);
  ASSERT_TRUE(SignVerdict(&edited, "", seed).ok());
  edited.budget.term = "7-day";
  Store(edited, /*sign=*/false);
  Ran bad = Grant("63 --nodes 1 --dry-run");
  EXPECT_EQ(bad.rc, 1) << bad.output;
  EXPECT_NE(bad.output.find("signature: no valid signature: ed25519: verdict for job 63: "
                            "ed25519 signature mismatch"),
            std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("; hmac-sha256: verdict for job 63: not signed"), std::string::npos)
      << bad.output;
}

TEST_F(GrantTest, ScontrolFailureIsExit4) {
  if (getuid() != 0) GTEST_SKIP() << "pilot grant needs root";
  Store(Good(9));
  setenv("FAKE_RC", "1", 1);
  Ran r = Grant("9 --nodes 1");
  unsetenv("FAKE_RC");
  EXPECT_EQ(r.rc, 4) << r.output;
  EXPECT_FALSE(fs::exists(dir_ + "/state/grants/9.json"));
}

TEST_F(GrantTest, UsageErrors) {
  EXPECT_EQ(Grant("9").rc, 2);                          // no --nodes
  EXPECT_EQ(Grant("x --nodes 1").rc, 2);                // not a job id
  EXPECT_EQ(Grant("9 --nodes 1 --duration 3w").rc, 2);  // bad duration
  EXPECT_EQ(Grant("9 --nodes 1 --partition 'a b'").rc, 2);
}

// plan and report on the CPU pilot fixture.
TEST_F(GrantTest, PlanAndReportFromResults) {
  const std::string fx = std::string(PILOT_SOURCE_DIR) + "/tests/report/fixtures";
  const std::string cfg = std::string(PILOT_SOURCE_DIR) + "/configs/tiny-cpu.toml";
  Ran p = RunPilot("plan --policy " + dir_ + "/pilot.conf --config " + cfg + " " + fx +
                   "/results.json");
  ASSERT_EQ(p.rc, 0) << p.output;
  EXPECT_NE(p.output.find("memory split (analytic)"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("memory calibration: none (no memory calibration in the results)"),
            std::string::npos)
      << p.output;
  EXPECT_NE(p.output.find("H100-80"), std::string::npos);
  EXPECT_NE(p.output.find("assumed MFU of 0.40"), std::string::npos);
  EXPECT_NE(p.output.find("7-day reservation"), std::string::npos) << p.output;
  Ran q =
      RunPilot("plan --policy " + dir_ + "/pilot.conf --config " + cfg +
               " --gpu H200-141 --nodes 2 --mode sharded --micro-batch 8 " + fx + "/results.json");
  ASSERT_EQ(q.rc, 0) << q.output;
  EXPECT_NE(q.output.find("sharded on 2 node(s)"), std::string::npos) << q.output;
  EXPECT_NE(q.output.find("budget on H200-141"), std::string::npos) << q.output;
  // --json: the same plan as one object.
  Ran js = RunPilot("plan --json --policy " + dir_ + "/pilot.conf --config " + cfg +
                    " --gpu H200-141 --nodes 2 --mode sharded --micro-batch 8 --seq-len 256 " +
                    fx + "/results.json");
  ASSERT_EQ(js.rc, 0) << js.output;
  Json j = Json::parse(js.output);
  EXPECT_EQ(j["what_if"]["mode"], "sharded");
  EXPECT_EQ(j["what_if"]["nodes"], 2);
  EXPECT_EQ(j["what_if"]["micro_batch"], 8);
  EXPECT_EQ(j["what_if"]["seq_len"], 256);
  EXPECT_EQ(j["budget"]["gpu"], "H200-141");
  ASSERT_TRUE(j["step_time"].is_object()) << js.output;
  EXPECT_DOUBLE_EQ(j["step_time"]["tokens_per_step"].get<double>(), 256.0 * 8);
  bool budgeted = false;
  for (const Json& o : j["options"]) budgeted |= o["gpu"] == "H200-141" && o["budgeted"] == true;
  EXPECT_TRUE(budgeted) << js.output;
  bool step_note = false;
  for (const Json& a : j["assumptions"]) {
    step_note |= a.get<std::string>().find("throughput: pilot's step:") != std::string::npos;
  }
  EXPECT_TRUE(step_note) << js.output;
  EXPECT_EQ(RunPilot("plan --policy " + dir_ + "/pilot.conf --config " + cfg + " --gpu B1 " + fx +
                     "/results.json")
                .rc,
            2);
  Ran h = RunPilot("report --policy " + dir_ + "/pilot.conf --config " + cfg + " -o " + dir_ +
                   "/r.html " + fx + "/results.json");
  ASSERT_EQ(h.rc, 0) << h.output;
  std::string html = SlurpGrant(dir_ + "/r.html");
  for (const char* id : {"memory-steps", "memory-split", "loss-steps", "time-steps",
                         "time-breakdown", "hardware-fit", "budget"}) {
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  // Numbers for people: grouped digits, parameters in K/M/B.
  EXPECT_NE(html.find("<tr><th>parameters</th><td>137 K</td>"), std::string::npos);
  EXPECT_NE(html.find("<tr><th>throughput</th><td>4,541 tokens/s"), std::string::npos);
  // A CPU pilot has no device figure to hold a prediction against.
  EXPECT_EQ(html.find("Projected against measured"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  EXPECT_EQ(html.find("href=\"http"), std::string::npos);
}

// A GPU pilot's recorded allocator requests: plan replays them at the
// what-if's shape for one process per GPU and says why not for several;
// report holds the replay at the pilot's shape against its device bytes.
TEST_F(GrantTest, PlanAndReportReplayTheRecordedRequests) {
  const std::string cfg = std::string(PILOT_SOURCE_DIR) + "/configs/tiny-cpu.toml";
  Results r = OnAGpu();
  SingleStage& s = *r.single;
  r.alloc_conf = "expandable_segments:True";
  const int64_t tokens = int64_t{s.shape.seq_len} * s.shape.micro_batch;
  AllocRecording ref{"reference", s.shape.micro_batch, s.shape.seq_len, 1, false,
                     EncodeAllocOps(toy::Toy(tokens, 2))};
  AllocRecording half{"memory_calibration", s.shape.micro_batch / 2, s.shape.seq_len, 1, false,
                      EncodeAllocOps(TrimRecording(toy::Toy(tokens / 2, 3), false, false, 2))};
  s.allocator_requests = {ref, half};
  Write(dir_ + "/gpu.json", ResultsToJson(r));
  const std::string plan = "plan --policy " + dir_ + "/pilot.conf --config " + cfg + " ";

  Ran one = RunPilot(plan + "--gpus-per-node 1 --micro-batch 8 " + dir_ + "/gpu.json");
  ASSERT_EQ(one.rc, 0) << one.output;
  EXPECT_NE(one.output.find("predicted from: replayed 10 processes through the allocator's model: the "
                            "reference and memory_calibration steps (micro-batches 4 and 2, activation "
                            "checkpointing off) moved to 8 x 64 tokens"),
            std::string::npos)
      << one.output;
  EXPECT_NE(one.output.find("memory replay: "), std::string::npos) << one.output;
  EXPECT_NE(one.output.find("memory model (not the prediction): estimate"), std::string::npos) << one.output;
  Ran js = RunPilot(plan + "--json --gpus-per-node 1 --micro-batch 8 " + dir_ + "/gpu.json");
  ASSERT_EQ(js.rc, 0) << js.output;
  Json j = Json::parse(js.output);
  ASSERT_TRUE(j["memory_replay"].is_object()) << js.output;
  EXPECT_EQ(j["memory_replay"]["histories"], 10);
  EXPECT_EQ(j["memory_replay_why_not"], "");
  const int64_t most = j["memory_replay"]["full_speed_bytes"]["most"].get<int64_t>();
  EXPECT_LE(j["memory_replay"]["full_speed_bytes"]["least"].get<int64_t>(), most);
  EXPECT_EQ(j["options"][0]["predicted_bytes"].get<int64_t>(),
            most + j["memory_replay"]["runtime_bytes"].get<int64_t>());

  // The config's two GPUs per node: DDP, which the replay does not model.
  Ran two = RunPilot(plan + dir_ + "/gpu.json");
  ASSERT_EQ(two.rc, 0) << two.output;
  EXPECT_NE(two.output.find("memory replay: not applied: the replay models one process per GPU, not ddp "
                            "over 2 GPUs"),
            std::string::npos)
      << two.output;

  const std::string projected = Projected(r, cfg);
  EXPECT_NE(projected.find("device memory at the pilot&#39;s shape, 10 processes replayed with nothing "
                           "limiting them"),
            std::string::npos)
      << projected.substr(0, 800);
}

// plan uses the runner's memory calibration from results.json, and
// --calibrate overrides it; the output names the mode.
TEST_F(GrantTest, PlanUsesTheCalibrationInTheResults) {
  const std::string cfg = std::string(PILOT_SOURCE_DIR) + "/configs/tiny-cpu.toml";
  Results r = OnAGpu();
  SingleStage& s = *r.single;
  MemoryCalibrationCheck c;
  c.status = "ok";
  c.micro_batch = s.shape.micro_batch / 2;
  c.seq_len = s.shape.seq_len;
  c.steps = 2;
  c.peak_allocated_bytes = 300 << 20;
  s.memory_calibration = c;
  const std::string projected = Projected(r, cfg);
  EXPECT_NE(projected.find("device memory at the pilot&#39;s shape (calibrated)"), std::string::npos)
      << projected.substr(0, 400);
  EXPECT_NE(projected.find("<td>0.88 GiB</td>"), std::string::npos) << projected.substr(0, 400);
  const std::string plan = "plan --policy " + dir_ + "/pilot.conf --config " + cfg + " ";
  Ran p = RunPilot(plan + dir_ + "/gpu.json");
  ASSERT_EQ(p.rc, 0) << p.output;
  EXPECT_NE(p.output.find("memory split (calibrated)"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("memory calibration: the runner's micro_batch " +
                          std::to_string(c.micro_batch) + " steps"),
            std::string::npos)
      << p.output;
  EXPECT_NE(p.output.find("predicted from: calibrated memory model"), std::string::npos)
      << p.output;
  Ran on = RunPilot(plan + "--recompute on " + dir_ + "/gpu.json");
  ASSERT_EQ(on.rc, 0) << on.output;
  EXPECT_NE(on.output.find("predicted from: calibrated, activation checkpointing on by rule"),
            std::string::npos)
      << on.output;

  s.shape.micro_batch = 1;  // another pilot at micro-batch 1
  s.memory.peak_allocated_bytes = 250 << 20;
  s.memory_calibration.reset();
  Write(dir_ + "/other.json", ResultsToJson(r));
  Ran o = RunPilot(plan + "--calibrate " + dir_ + "/other.json " + dir_ + "/gpu.json");
  ASSERT_EQ(o.rc, 0) << o.output;
  EXPECT_NE(
      o.output.find("memory calibration: --calibrate " + dir_ + "/other.json (micro_batch 1)"),
      std::string::npos)
      << o.output;
}

}  // namespace
}  // namespace pilot
