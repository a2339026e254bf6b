// The probe's lines beyond the step records (supervisor/program/metrics.h's
// ParseProbeLine) and what the supervisor makes of them
// (supervisor/program/observe.h): the restore's diagnosis by component,
// the precision and environment the program ran with. What no other test
// proves: that a wrong restore names the component that was not restored,
// and that a program whose whole state was restored but whose losses still
// differ is told so.
#include <gtest/gtest.h>

#include <string>

#include "supervisor/program/metrics.h"
#include "supervisor/program/observe.h"

namespace pilot::supervisor {
namespace {

StateLine State(const std::string& line) {
  Result<ProbeLine> p = ParseProbeLine(line);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p.ok() && p->state.has_value());
  return p.ok() && p->state ? *p->state : StateLine{};
}

const char kSaved[] =
    R"({"kind":"state","when":"saved","step":10,"rank":0,"components":{)"
    R"("model":{"digest":"aa11","tensors":4},"optimizer":{"digest":"bb22","tensors":8},)"
    R"("scheduler":{"digest":"cc33","last_epoch":10},"rng.torch":{"digest":"dd44"},)"
    R"("data":{"digest":"ee55","value":"40"}}})";

TEST(ProbeLine, StepRecordsEnvAndStateLines) {
  Result<ProbeLine> r = ParseProbeLine(
      R"({"step":3,"loss":2.5,"autocast":"bfloat16","autocast_device":"cuda","param_dtype":"float32","grad_scaler":false})");
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->record);
  EXPECT_EQ(r->record->autocast, "bfloat16");
  EXPECT_EQ(r->record->autocast_device, "cuda");
  EXPECT_EQ(r->record->param_dtype, "float32");
  EXPECT_EQ(r->record->grad_scaler, false);

  Result<ProbeLine> e = ParseProbeLine(
      R"({"kind":"env","rank":1,"python":"3.11.2","torch":"2.11.0","cuda":"13.0","hip":null,)"
      R"("nccl":"2.27.3","cudnn":"91000","gpu":"NVIDIA H200","gpu_capability":"9.0","gpu_count":8})");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE(e->env);
  EXPECT_EQ(e->env->rank, 1);
  EXPECT_EQ(e->env->env.gpu, "NVIDIA H200");
  EXPECT_EQ(e->env->env.hip, "");
  EXPECT_EQ(e->env->env.gpu_count, 8);

  const StateLine s = State(kSaved);
  EXPECT_EQ(s.when, "saved");
  EXPECT_EQ(s.step, 10);
  EXPECT_EQ(s.components.at("scheduler").digest, "cc33");
  EXPECT_EQ(s.components.at("scheduler").detail, "last_epoch 10");
  EXPECT_EQ(s.components.at("data").detail, "value 40");

  // What is not a line of the protocol is refused as a bad record is.
  for (const char* bad : {R"({"kind":"telemetry"})", R"({"kind":3})",
                          R"({"kind":"state","when":"later","step":1,"components":{}})",
                          R"({"kind":"state","when":"saved","step":1})",
                          R"({"kind":"env","rank":-1})"}) {
    EXPECT_FALSE(ParseProbeLine(bad).ok()) << bad;
  }
}

// The packages lines: entries that do not read as a name and a version are
// left out (never a terminal escape or a path into the verdict), and the
// environment gathers rank 0's lines only, every line of them.
TEST(ProbeLine, PackagesLinesGatherIntoTheEnvironment) {
  Result<ProbeLine> p = ParseProbeLine(
      R"({"kind":"packages","rank":0,"extensions":{"flash_attn":"flash-attn 2.7.4","my_kernels":"",)"
      R"("bad\u001b[2J":"x","ok":"a/b 1"},"distributions":{"torch":"2.11.0","numpy":"2.3.1",)"
      R"("evil name":"1","x":"1\n2","y":3}})");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->packages);
  EXPECT_EQ(p->packages->distributions,
            (std::map<std::string, std::string>{{"numpy", "2.3.1"}, {"torch", "2.11.0"}}));
  EXPECT_EQ(p->packages->extensions,
            (std::map<std::string, std::string>{{"flash_attn", "flash-attn 2.7.4"}, {"my_kernels", ""}}));

  GroupResult g;
  EnvLine e0, e1;
  e0.rank = 0;
  e0.env.torch = "2.11.0";
  e1.rank = 1;
  g.envs = {e1, e0};
  PackagesLine a, b, other;
  a.rank = 0;
  a.distributions = {{"torch", "2.11.0"}};
  a.extensions = {{"flash_attn", "flash-attn 2.7.4"}};
  b.rank = 0;
  b.distributions = {{"numpy", "2.3.1"}};
  other.rank = 1;
  other.distributions = {{"scipy", "1.16.0"}};
  g.packages = {a, other, b};
  const std::optional<ProgramEnvironment> env = EnvironmentOf(g);
  ASSERT_TRUE(env);
  EXPECT_EQ(env->torch, "2.11.0");
  EXPECT_EQ(env->distributions,
            (std::map<std::string, std::string>{{"numpy", "2.3.1"}, {"torch", "2.11.0"}}));
  EXPECT_EQ(env->extensions.size(), 1u);
}

GroupResult WithStates(std::vector<StateLine> states) {
  GroupResult g;
  g.states = std::move(states);
  return g;
}

std::string Restored(std::string saved, const std::string& from, const std::string& to) {
  saved.replace(saved.find(R"("when":"saved")"), 14, R"("when":"restored")");
  if (!from.empty()) saved.replace(saved.find(from), from.size(), to);
  return saved;
}

TEST(StateDiagnosis, NamesWhatWasNotRestored) {
  const GroupResult ref = WithStates({State(kSaved)});
  // The torch RNG left as seeded, the scheduler stepped once more.
  std::string line = Restored(kSaved, R"("rng.torch":{"digest":"dd44"})", R"("rng.torch":{"digest":"0000"})");
  const std::string sched = R"({"digest":"cc33","last_epoch":10})";
  line.replace(line.find(sched), sched.size(), R"({"digest":"cc34","last_epoch":11})");
  const GroupResult res = WithStates({State(line)});
  const auto diffs = CompareState(ref, res, 10);
  ASSERT_EQ(diffs.size(), 5u);
  EXPECT_EQ(StateDiagnosis(diffs),
            "not restored: torch CPU RNG state (rank 0), LR scheduler (rank 0: last_epoch 11, saved "
            "last_epoch 10); restored: data position, model, optimizer state");
}

TEST(StateDiagnosis, EverythingRestoredButTheLossesDiffer) {
  const GroupResult ref = WithStates({State(kSaved)});
  const GroupResult res = WithStates({State(Restored(kSaved, "", ""))});
  const auto diffs = CompareState(ref, res, 10);
  for (const StateComponentDiff& d : diffs) EXPECT_TRUE(d.equal) << d.component;
  EXPECT_EQ(StateDiagnosis(diffs),
            "data position, model, optimizer state, torch CPU RNG state and LR scheduler restored; "
            "the losses still differ: state outside them (what slurm_pilot.saved and "
            "slurm_pilot.restored were not given)");
}

TEST(StateDiagnosis, OneSideOnlyIsNotCompared) {
  // The scheduler given to saved() only; a later save at step 20 is not
  // the one compared.
  std::string later = kSaved;
  const std::string at10 = R"("step":10)";
  later.replace(later.find(at10), at10.size(), R"("step":20)");
  const GroupResult ref = WithStates({State(kSaved), State(later)});
  std::string line = Restored(kSaved, R"("scheduler":{"digest":"cc33","last_epoch":10},)", "");
  const GroupResult res = WithStates({State(line)});
  const auto diffs = CompareState(ref, res, 10);
  EXPECT_EQ(StateDiagnosis(diffs),
            "data position, model, optimizer state and torch CPU RNG state restored; the losses still "
            "differ: state outside them (what slurm_pilot.saved and slurm_pilot.restored were not "
            "given); not compared (fingerprinted on one side only): LR scheduler");
  // Nothing to compare when the resumed process sent nothing.
  EXPECT_TRUE(CompareState(ref, GroupResult{}, 10).empty());
  EXPECT_EQ(StateDiagnosis({}), "");
}

TEST(StateDiagnosis, EveryRankOrSome) {
  StateLine a = State(kSaved), b = State(kSaved);
  b.rank = 1;
  StateLine ra = State(Restored(kSaved, R"({"digest":"bb22")", R"({"digest":"ffff")"));
  StateLine rb = ra;
  rb.rank = 1;
  const auto both = CompareState(WithStates({a, b}), WithStates({ra, rb}), 10);
  EXPECT_NE(StateDiagnosis(both).find("optimizer state (every rank)"), std::string::npos);
  StateLine rb_ok = State(Restored(kSaved, "", ""));
  rb_ok.rank = 1;
  const auto one = CompareState(WithStates({a, b}), WithStates({ra, rb_ok}), 10);
  EXPECT_NE(StateDiagnosis(one).find("optimizer state (rank 0)"), std::string::npos) << StateDiagnosis(one);
}

TEST(Observe, PrecisionAsTheProbeSawIt) {
  GroupResult g;
  for (int s = 1; s <= 4; ++s) {
    MetricRecord r;
    r.step = s;
    r.rank = 0;
    if (s > 1) r.autocast = "bfloat16";  // the first step's record came before any autocast was seen
    r.autocast_device = s > 1 ? "cuda" : "";
    r.param_dtype = "float32";
    g.records.push_back(r);
  }
  const ProgramPrecision p = PrecisionOf(g, 0);
  EXPECT_TRUE(p.reported);
  EXPECT_EQ(p.autocast, "bfloat16");
  EXPECT_EQ(p.autocast_steps, 3);
  EXPECT_EQ(p.steps, 4);
  EXPECT_EQ(PrecisionWord(p), "bf16");
  ProgramPrecision pure;
  pure.reported = true;
  pure.param_dtype = "float32";
  EXPECT_EQ(PrecisionWord(pure), "fp32");
  EXPECT_EQ(PrecisionWord(ProgramPrecision{}), "");
}

}  // namespace
}  // namespace pilot::supervisor
