// The noise rule of a restore where kernels are not deterministic
// (core/decide/restore_check.h): the first step after the resume is a
// forward, later steps past the floor are judged against a second resumed
// process's spread.
#include "core/decide/restore_check.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace pilot {
namespace {

NoiseRule Rule() { return NoiseRule{1e-3, 1e-4, 10}; }

// Kernels' noise as a chaotic run shows it: nothing for three steps, then
// 1e-5 growing threefold a step. The resumed process is the reference plus
// that noise; the repeat is the resumed process plus the same noise `lag`
// steps later (its own divergence starts later).
double Noise(int i) { return i < 3 ? 0 : 1e-5 * std::pow(3.0, i - 3); }
struct Drift {
  std::vector<double> reference, resumed, repeat;
};
Drift Chaotic(int lag) {
  Drift d;
  for (int i = 0; i < 10; ++i) {
    const double base = 3.0 - 0.1 * i;
    d.reference.push_back(base);
    d.resumed.push_back(base + Noise(i));
    d.repeat.push_back(base + Noise(i) + Noise(i - lag));
  }
  return d;
}

TEST(JudgeNoise, WithinTheFloorNeedsNoRepeat) {
  const Drift d = Chaotic(0);
  std::vector<double> ref(d.reference.begin(), d.reference.begin() + 8);
  std::vector<double> res(d.resumed.begin(), d.resumed.begin() + 8);
  const NoiseJudgement j = JudgeNoise(ref, res, {}, Rule());
  EXPECT_TRUE(j.pass);
  EXPECT_FALSE(j.needs_repeat);
  EXPECT_EQ(j.beyond_floor, 0);
  EXPECT_EQ(j.first_rel, 0);
}

TEST(JudgeNoise, PastTheFloorWaitsForTheRepeatThenJudgesBySpread) {
  const Drift d = Chaotic(0);
  NoiseJudgement j = JudgeNoise(d.reference, d.resumed, {}, Rule());
  EXPECT_FALSE(j.pass);
  EXPECT_TRUE(j.needs_repeat);
  EXPECT_EQ(j.bad_index, -1);  // undecided, not failed
  EXPECT_EQ(j.beyond_floor, 2);  // relative 1.1e-3 and 3.5e-3 at the last two

  j = JudgeNoise(d.reference, d.resumed, d.repeat, Rule());
  EXPECT_TRUE(j.pass);
  EXPECT_EQ(j.beyond_floor, 2);
  EXPECT_NEAR(j.max_ratio, 1, 1e-9);

  // A repeat whose divergence starts a step or three later still shows as
  // much noise within the lookahead and the margin.
  j = JudgeNoise(d.reference, d.resumed, Chaotic(1).repeat, Rule());
  EXPECT_TRUE(j.pass);
  EXPECT_NEAR(j.max_ratio, 3, 1e-9);
  j = JudgeNoise(d.reference, d.resumed, Chaotic(3).repeat, Rule());
  EXPECT_FALSE(j.pass);  // 9 times at index 8, 27 at the last, where no step comes after
  EXPECT_EQ(j.bad_index, 9);
  j = JudgeNoise(d.reference, d.resumed, Chaotic(4).repeat, Rule());
  EXPECT_FALSE(j.pass);
  EXPECT_EQ(j.bad_index, 8);
}

TEST(JudgeNoise, AStateNotRestoredMovesBothResumedProcessesAlike) {
  Drift d = Chaotic(0);
  for (size_t i = 1; i < d.resumed.size(); ++i) {
    d.resumed[i] += 0.05;  // an optimizer restarted: from the second step on
    d.repeat[i] += 0.05;
  }
  const NoiseJudgement j = JudgeNoise(d.reference, d.resumed, d.repeat, Rule());
  EXPECT_FALSE(j.pass);
  EXPECT_EQ(j.bad_index, 1);
  EXPECT_NEAR(j.bad_spread, 1e-5, 1e-12);  // what the repeat saw up to two steps on
}

TEST(JudgeNoise, TheFirstStepIsAForward) {
  Drift d = Chaotic(0);
  d.resumed[0] *= 1 + 5e-4;  // within the floor, not within `first`
  NoiseJudgement j = JudgeNoise(d.reference, d.resumed, d.repeat, Rule());
  EXPECT_FALSE(j.pass);
  EXPECT_EQ(j.bad_index, 0);
  EXPECT_NEAR(j.first_rel, 5e-4, 1e-12);
  // A series of eval losses has no forward at index 0.
  j = JudgeNoise(d.reference, d.resumed, d.repeat, Rule(), /*first_is_forward=*/false);
  EXPECT_TRUE(j.pass);
}

TEST(JudgeNoise, NotFiniteOrMissingFails) {
  Drift d = Chaotic(0);
  d.resumed[5] = NAN;
  NoiseJudgement j = JudgeNoise(d.reference, d.resumed, d.repeat, Rule());
  EXPECT_FALSE(j.pass);
  EXPECT_EQ(j.bad_index, 5);
  const Drift e = Chaotic(0);
  std::vector<double> shorter(e.resumed.begin(), e.resumed.end() - 1);
  j = JudgeNoise(e.reference, shorter, e.repeat, Rule());
  EXPECT_FALSE(j.pass);
  EXPECT_EQ(j.bad_index, 9);
}

}  // namespace
}  // namespace pilot
