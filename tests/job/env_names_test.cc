// The environment variable names shared by the plugin, the prolog, the
// epilog and `pilot`: how Slurm derives one from another, and that the
// header stays includable by the plugin's libc-only front part.
#include "job/env_names.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace pilot::job {
namespace {

TEST(EnvNames, JobControlNamesAreThePluginsWithSlurmsPrefix) {
  // slurmd hands the prolog and epilog each name the plugin recorded in the
  // job control environment with "SPANK_" in front.
  EXPECT_STREQ(kJobControlPrefix, "SPANK_");
  EXPECT_EQ(std::string(kJobControlPrefix) + kEnvConfig, kJobControlConfig);
  EXPECT_EQ(std::string(kJobControlPrefix) + kEnvConfigSha, kJobControlConfigSha);
  EXPECT_EQ(std::string(kJobControlPrefix) + kEnvStage, kJobControlStage);
  EXPECT_EQ(std::string(kJobControlPrefix) + kEnvOut, kJobControlOut);
  EXPECT_EQ(std::string(kJobControlPrefix) + kEnvPins, kJobControlPins);
  EXPECT_EQ(std::string(kJobControlPrefix) + kEnvHubCache, kJobControlHubCache);
  EXPECT_EQ(std::string(kJobControlPrefix) + kEnvPilotRun, kJobControlPilotRun);
}

TEST(EnvNames, ForwardedOptions) {
  // Slurm forwards --OPTION of plugin NAME as _SLURM_SPANK_OPTION_NAME_OPTION,
  // prefixed like the job control environment. Our plugin is "pilot"
  // (SPANK_PLUGIN(pilot, 1)) and the option --pilot; pyxis' is
  // --container-image, with '-' turned into '_'.
  EXPECT_EQ(std::string(kJobControlPrefix) + "_SLURM_SPANK_OPTION_" + "pilot" + "_" + "pilot",
            kOptionPilot);
  EXPECT_EQ(
      std::string(kJobControlPrefix) + "_SLURM_SPANK_OPTION_" + "pyxis" + "_" + "container_image",
      kOptionPyxisImage);
}

TEST(EnvNames, DistinctAndWellFormed) {
  const std::vector<std::string> names = {
      kEnvConfig,        kEnvConfigSha,        kEnvStage,        kEnvOut,        kEnvActive,
      kJobControlConfig, kJobControlConfigSha, kJobControlStage, kJobControlOut, kOptionPilot,
      kOptionPyxisImage, kUserConfig,          kUserStage,       kUserOut,       kUserPolicy,
      kEnvPilotRun,      kJobControlPilotRun,  kUserPilotRun};
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const std::string& n : names) {
    ASSERT_FALSE(n.empty());
    EXPECT_FALSE(n[0] >= '0' && n[0] <= '9') << n;
    for (char c : n) {
      const bool ok =
          (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      EXPECT_TRUE(ok) << n;
    }
  }
  // What a user sets stays apart from what the plugin records.
  for (const char* user : {kUserConfig, kUserStage, kUserOut, kUserPolicy, kUserPilotRun}) {
    EXPECT_EQ(std::string(user).rfind("PILOT_", 0), 0u) << user;
  }
  for (const char* recorded : {kEnvConfig, kEnvConfigSha, kEnvStage, kEnvOut, kEnvActive, kEnvPilotRun}) {
    EXPECT_EQ(std::string(recorded).rfind("SLURM_PILOT_", 0), 0u) << recorded;
  }
}

TEST(EnvNames, HeaderIncludesNothing) {
  // spank_pilot.so includes this header and needs libc only: a header that
  // includes nothing can pull in neither the C++ library nor Slurm's.
  std::ifstream in(std::string(PILOT_SOURCE_DIR) + "/job/env_names.h");
  ASSERT_TRUE(in) << "cannot read job/env_names.h";
  std::string line;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] != '#') continue;
    std::istringstream words(line.substr(first + 1));
    std::string directive;
    words >> directive;
    EXPECT_NE(directive, "include") << line;
  }
}

}  // namespace
}  // namespace pilot::job
