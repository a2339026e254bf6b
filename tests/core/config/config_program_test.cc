// pilot.toml's [program] section (the user's own program as the pilot):
// what it accepts, and the one message for each key that cannot go with it.
#include <gtest/gtest.h>

#include <map>

#include "core/config/config.h"
#include "core/config/load.h"

namespace pilot {
namespace {

const std::string kRun =
    "[run]\nname = \"t\"\nseq_len = 128\nmicro_batch = 2\ntarget_steps = 100\n";

LoadOptions Options() {
  LoadOptions o;
  o.env = [](const std::string& name) -> std::optional<std::string> {
    static const std::map<std::string, std::string> vars = {
        {"USER", "alice"}, {"HOME", "/home/alice"}, {"SLURM_SUBMIT_DIR", "/home/alice/run"}};
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  o.base_dir = "/cfg";
  return o;
}

Result<Config> Parse(const std::string& text) { return ParseConfig(text, "p.toml", Options()); }

TEST(ConfigProgram, AProgramWithItsKeysIsAccepted) {
  Result<Config> c = Parse(kRun +
                           "[program]\n"
                           "command = [\"python3\", \"train.py\", \"--x\", \"1\", \"--y\", \"1\"]\n"
                           "workdir = \"$SLURM_SUBMIT_DIR\"\n"
                           "env = { WANDB_MODE = \"offline\", OMP_NUM_THREADS = \"4\" }\n"
                           "launcher = \"none\"\n"
                           "step_timeout = 120\n"
                           "loss_pattern = \"loss=([0-9.]+)\"\n"
                           "[training]\nsteps = 10\ndevice = \"cpu\"\n"
                           "[checkpoint]\nat_step = 5\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->IsProgram());
  EXPECT_EQ(c->program.command.size(), 6u);  // repeats are kept: it is a command line
  EXPECT_EQ(c->program.workdir, "/home/alice/run");
  EXPECT_EQ(c->program.env.at("WANDB_MODE"), "offline");
  EXPECT_EQ(c->program.launcher, "none");
  EXPECT_EQ(c->program.step_timeout, 120);
  EXPECT_EQ(c->checkpoint.at_step, 5);
  EXPECT_NE(ConfigToJson(*c).find("WANDB_MODE"), std::string::npos);
  EXPECT_NE(ConfigToTable(*c).find("WANDB_MODE = \"offline\""), std::string::npos);
}

TEST(ConfigProgram, WithoutAProgramTheBuiltinRuns) {
  Result<Config> c = Parse(kRun);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->IsProgram());
}

struct Bad {
  const char* name;
  std::string text;
  std::string message;
};

class ConfigProgramBad : public ::testing::TestWithParam<Bad> {};

TEST_P(ConfigProgramBad, GivesOneMessage) {
  Result<Config> c = Parse(GetParam().text);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find(GetParam().message), std::string::npos)
      << c.status().ToString();
}

const std::string kProgram = "[program]\ncommand = [\"python3\", \"train.py\"]\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigProgramBad,
    ::testing::Values(
        Bad{"model_key", kRun + kProgram + "[model]\nlayers = 4\n",
            "p.toml:9: model.layers: applies to the builtin model and cannot be used with [program]"},
        Bad{"builtin_training_key", kRun + kProgram + "[training]\nlr = 0.1\n",
            "p.toml:9: training.lr: applies to the builtin model"},
        Bad{"data_key", kRun + kProgram + "[data]\nformat = \"u16\"\ntrain = \"x\"\n",
            "data."},
        Bad{"empty_command", kRun + "[program]\ncommand = []\n",
            "p.toml:7: program.command: must name the program to run"},
        Bad{"program_key_without_command", kRun + "[program]\nstep_timeout = 5\n",
            "p.toml:7: program.step_timeout: is set but program.command is not"},
        Bad{"env_name", kRun + kProgram + "env = { \"1BAD\" = \"x\" }\n",
            "is not an environment variable name"},
        Bad{"env_reserved", kRun + kProgram + "env = { RANK = \"3\" }\n",
            "RANK is set by the pilot or by Slurm"},
        Bad{"env_not_string", kRun + kProgram + "env = { A = 1 }\n", "A must be a string"},
        Bad{"pattern_groups", kRun + kProgram + "loss_pattern = \"loss=[0-9.]+\"\n",
            "program.loss_pattern: must have exactly one group"},
        Bad{"pattern_syntax", kRun + kProgram + "loss_pattern = \"loss=([0-9.]+\"\n",
            "program.loss_pattern: is not a regular expression"},
        Bad{"launcher", kRun + kProgram + "launcher = \"torchrun\"\n",
            "program.launcher: must be one of \"pilot\", \"none\""},
        Bad{"srun", kRun + kProgram + "[parallel]\nlauncher = \"srun\"\n",
            "\"srun\" is not available with [program]"},
        Bad{"timeout", kRun + kProgram + "step_timeout = 0\n",
            "program.step_timeout: must be between 1 and 86400"}),
    [](const ::testing::TestParamInfo<Bad>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace pilot
