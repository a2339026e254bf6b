// The table of launchers: the names parallel.launcher accepts, what "auto"
// picks, and how each launcher names the rank that failed.
#include "launch/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/config/config_schema.h"

namespace pilot::launch {
namespace {

TEST(Launchers, TheirNamesAreParallelLaunchersChoices) {
  const config_internal::KeySpec* k = config_internal::FindKey("parallel", "launcher");
  ASSERT_NE(k, nullptr);
  std::vector<std::string> choices = k->choices;
  choices.erase(std::remove(choices.begin(), choices.end(), "auto"), choices.end());
  std::vector<std::string> names = LauncherNames();
  std::sort(choices.begin(), choices.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, choices);
  EXPECT_EQ(LauncherNames(), (std::vector<std::string>{kSrun, kLocal}));
}

TEST(Launchers, AutoIsSrunInASlurmJobUnlessNprocAsks) {
  const char* had = std::getenv("SLURM_JOB_ID");
  const std::string saved = had ? had : "";
  setenv("SLURM_JOB_ID", "42", 1);
  EXPECT_EQ(ChooseLauncher("auto", 0)->Name(), kSrun);
  EXPECT_EQ(ChooseLauncher("auto", 2)->Name(), kLocal);
  unsetenv("SLURM_JOB_ID");
  EXPECT_EQ(ChooseLauncher("auto", 0)->Name(), kLocal);
  EXPECT_EQ(ChooseLauncher("srun", 2)->Name(), kSrun);
  EXPECT_EQ(ChooseLauncher("local", 0)->Name(), kLocal);
  EXPECT_EQ(ChooseLauncher("something else", 0)->Name(), kLocal);
  if (had) setenv("SLURM_JOB_ID", saved.c_str(), 1);
}

RankReport Report(int rank, const std::string& status, const std::string& message = "",
                  const std::string& host = "") {
  RankReport r;
  r.rank = rank;
  r.status = status;
  r.host = host;
  if (!message.empty()) r.message = message;
  return r;
}

TEST(LocalLauncher, TheProcessIsTheRank) {
  const auto l = ChooseLauncher("local", 2);
  std::vector<std::optional<RankReport>> reports = {Report(0, "ok"),
                                                    Report(1, "error", "out of memory")};
  RankBlame b = l->Blame(1, 3 << 8, false, reports);
  EXPECT_EQ(b.rank, 1);
  EXPECT_EQ(b.message, "rank 1 failed (exit 3): out of memory");
  reports[1].reset();
  b = l->Blame(1, SIGKILL, true, reports);
  EXPECT_EQ(b.message,
            "rank 1 failed (killed by signal 9 (Killed): it stopped responding and the launcher "
            "ended it)");
}

TEST(SrunLauncher, WithoutSrunsLinesTheRankWithoutAReportOrItsOwnError) {
  const auto l = ChooseLauncher("srun", 0);
  std::vector<std::optional<RankReport>> reports = {
      Report(0, "error", "communication failed: peer gone", "pn1"), Report(1, "ok"), std::nullopt};
  RankBlame b = l->Blame(0, 1 << 8, false, reports);
  EXPECT_EQ(b.rank, 2);
  EXPECT_EQ(b.message, "rank 2 failed (no report; srun exit 1)");
  reports[2] = Report(2, "ok");
  b = l->Blame(0, 1 << 8, false, reports);
  EXPECT_EQ(b.rank, 0);
  EXPECT_EQ(b.message, "rank 0 on pn1 failed: communication failed: peer gone");
  reports[0] = Report(0, "ok");
  b = l->Blame(0, 1 << 8, false, reports);
  EXPECT_FALSE(b.rank.has_value());
  EXPECT_EQ(b.message, "srun exit 1");
}

}  // namespace
}  // namespace pilot::launch
