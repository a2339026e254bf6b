#include "core/records/lock.h"

#include <gtest/gtest.h>

#include <string>

#include "core/base/json_util.h"
#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

Lock SampleLock() {
  Lock l;
  l.job = {4242, "alice", 1001, 1001, 4, "gpu[01-04]", "gpu01", "/home/alice/proj"};
  l.config = {"/home/alice/proj/configs/gpt-1b.toml", "/var/lib/slurm-pilot/jobs/4242/pilot.toml",
              std::string(64, 'a'), std::string(64, 'a')};
  l.seeds = {1234, "config"};
  l.container = {"ghcr.io/org/train:1.2", "sha256:" + std::string(64, 'b'),
                 "ghcr.io/org/train@sha256:" + std::string(64, 'b'), "registry"};
  l.files = {
      {"train", "/data/train.u16", "", std::string(64, 'c'), 123456789012},
      {"init_weights", "/data/init.safetensors", std::string(64, 'd'), std::string(64, 'd'), 42}};
  l.versions = {
      {"runner", "0.1.0"}, {"libtorch", "2.11.0"}, {"slurm", "22.05.8"}, {"custom_ext", "7"}};
  l.gpus = {{0, "NVIDIA H200", "GPU-1234", 150754820096},
            {1, "NVIDIA H200", "GPU-5678", 150754820096}};
  l.problems = {{"file_hash_mismatch", "init weights changed"}};
  l.created = "2026-11-30T04:05:06Z";
  return l;
}

bool Same(const Lock& a, const Lock& b) { return LockToJson(a) == LockToJson(b); }

TEST(Lock, RoundTrip) {
  Lock l = SampleLock();
  std::string text = LockToJson(l);
  auto back = ParseLock(text);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, l));
  EXPECT_EQ(back->gpus[1].memory_bytes, 150754820096);
  EXPECT_EQ(back->job.node_list, "gpu[01-04]");
  EXPECT_EQ(LockToJson(*back), text);
  EXPECT_NE(text.find("\"schema\": \"slurm-pilot/lock/1\""), std::string::npos);
}

// Proves: job.gpus, the prolog's SLURM_JOB_GPUS, is written and read back
// ("" too), and a lock written before it existed reads as nullopt, which
// the supervisor tells apart from "no GPUs".
TEST(Lock, JobGpusRoundTripAndOlderLocksHaveNone) {
  Lock l = SampleLock();
  l.job.gpus = "0,3";
  Result<Lock> back = ParseLock(LockToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->job.gpus, std::optional<std::string>("0,3"));
  l.job.gpus = "";
  EXPECT_EQ(ParseLock(LockToJson(l))->job.gpus, std::optional<std::string>(""));
  l.job.gpus.reset();
  const std::string older = LockToJson(l);
  EXPECT_EQ(older.find("\"gpus\": \"\""), std::string::npos) << "not written when unset";
  EXPECT_FALSE(ParseLock(older)->job.gpus.has_value());
}

// Proves: a program's pins, what was recorded at submit and the run
// identity are written and read back; a lock written before them reads
// with none; the identity's lines list every part in their order.
TEST(Lock, PinsAndIdentityRoundTrip) {
  Lock l = SampleLock();
  LockPin p;
  p.kind = "hub_model";
  p.name = "org/m@main";
  p.path = "/h/models--org--m/snapshots/" + std::string(40, 'e');
  p.sha256 = std::string(64, 'f');
  p.commit = std::string(40, 'e');
  p.files = 2;
  l.pins = {p};
  l.pins_submitted = PinSummary(l.pins);
  l.identity = RunIdentity(l);
  Result<Lock> back = ParseLock(LockToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Same(*back, l));
  ASSERT_TRUE(back->identity.has_value());
  EXPECT_EQ(back->identity->lines,
            (std::vector<std::string>{
                "config sha256:" + std::string(64, 'a'), "container sha256:" + std::string(64, 'b'),
                "file train /data/train.u16 sha256:" + std::string(64, 'c'),
                "file init_weights /data/init.safetensors sha256:" + std::string(64, 'd'),
                "hub_model org/m@main commit " + std::string(40, 'e') + " sha256:" +
                    std::string(64, 'f'),
                "nodes 4"}));
  // Any part that differs is another identity.
  Lock other = l;
  other.pins[0].commit = std::string(40, '0');
  EXPECT_NE(RunIdentity(other).sha256, l.identity->sha256);
  Lock older = SampleLock();
  Result<Lock> old = ParseLock(LockToJson(older));
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->pins.empty());
  EXPECT_FALSE(old->pins_submitted.has_value());
  EXPECT_FALSE(old->identity.has_value());
  p.kind = "elsewhere";
  l.pins = {p};
  EXPECT_FALSE(ParseLock(LockToJson(l)).ok());
}

TEST(Lock, ReadFromFile) {
  testutil::TempDir dir;
  testutil::WriteText(dir / "lock.json", LockToJson(SampleLock()));
  auto l = ReadLock(dir / "lock.json");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->job.user, "alice");
  auto bad = ReadLock(dir / "none.json");
  EXPECT_EQ(bad.status().code(), Code::kNotFound);
}

struct BadCaseLock {
  const char* name;
  std::function<void(Json&)> edit;
  std::string message;
};

TEST(Lock, StrictParsingNamesTheField) {
  const BadCaseLock cases[] = {
      {"wrong type in array", [](Json& j) { j["gpus"][0]["memory_bytes"] = "80G"; },
       "pilot: lock.json: gpus[0].memory_bytes: expected integer, got string"},
      {"missing", [](Json& j) { j["job"].erase("user"); }, "pilot: lock.json: job.user: missing"},
      {"unknown field", [](Json& j) { j["job"]["shell"] = "bash"; },
       "pilot: lock.json: job.shell: unknown field"},
      {"unknown top-level", [](Json& j) { j["extra"] = 1; },
       "pilot: lock.json: extra: unknown field"},
      {"newer schema", [](Json& j) { j["schema"] = "slurm-pilot/lock/2"; },
       "pilot: lock.json: schema: unsupported version \"slurm-pilot/lock/2\" (this build reads "
       "\"slurm-pilot/lock/1\")\nHINT: read it with the slurm-pilot version that wrote it"},
      {"other schema", [](Json& j) { j["schema"] = "slurm-pilot/verdict/1"; },
       "pilot: lock.json: schema: expected \"slurm-pilot/lock/1\", got \"slurm-pilot/verdict/1\""},
      {"foreign schema", [](Json& j) { j["schema"] = "x"; },
       "pilot: lock.json: schema: expected \"slurm-pilot/lock/1\", got \"x\""},
      {"bad enum", [](Json& j) { j["container"]["method"] = "magic"; },
       "pilot: lock.json: container.method: expected one of \"registry\", \"file\", \"none\", "
       "got \"magic\""},
      {"object expected", [](Json& j) { j["job"] = Json::array(); },
       "pilot: lock.json: job: expected object, got array"},
      {"array element not object", [](Json& j) { j["problems"] = Json::array({1}); },
       "pilot: lock.json: problems[0]: expected object, got number"},
      {"negative uid", [](Json& j) { j["job"]["uid"] = -1; },
       "pilot: lock.json: job.uid: integer out of range"},
      {"float for integer", [](Json& j) { j["job"]["nodes"] = 1.5; },
       "pilot: lock.json: job.nodes: expected integer, got number"},
      {"job id", [](Json& j) { j["job"]["id"] = 0; }, "pilot: lock.json: job.id: must be > 0"},
      {"map value", [](Json& j) { j["versions"]["nccl"] = 2; },
       "pilot: lock.json: versions.nccl: expected string, got number"},
      {"time", [](Json& j) { j["created"] = "yesterday"; },
       "pilot: lock.json: created: expected RFC 3339 time"},
  };
  for (const auto& c : cases) {
    Json j = Json::parse(LockToJson(SampleLock()));
    c.edit(j);
    auto r = ParseLock(j.dump());
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << c.name;
    EXPECT_EQ(r.status().ToString(), c.message) << c.name;
  }
}

TEST(Lock, RejectsNonJsonAndHugeInput) {
  auto r = ParseLock("{\"schema\": ");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ToString().rfind("pilot: lock.json: not valid JSON: ", 0), 0u)
      << r.status().ToString();
  auto arr = ParseLock("[]");
  EXPECT_EQ(arr.status().ToString(), "pilot: lock.json: expected object, got array");
  std::string huge(kMaxLockBytes + 1, ' ');
  EXPECT_EQ(ParseLock(huge).status().ToString(),
            "pilot: lock.json: larger than " + std::to_string(kMaxLockBytes) + " bytes");
  EXPECT_FALSE(ParseLock(std::string("\xff\xfe\x00", 3)).ok());
}

TEST(JsonUtil, DumpIsSortedCompactAndSurvivesBadUtf8) {
  Json j = {{"b", 1}, {"a", {true, "x\n"}}, {"c", 0.5}};
  EXPECT_EQ(DumpJson(j), R"({"a":[true,"x\n"],"b":1,"c":0.5})");
  Json bad = {{"s", std::string("\xff")}};
  EXPECT_EQ(DumpJson(bad), "{\"s\":\"\xEF\xBF\xBD\"}");
}

}  // namespace
}  // namespace pilot
