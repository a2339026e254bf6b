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

Result<Config> ParseConfigProgram(const std::string& text) { return ParseConfig(text, "p.toml", Options()); }

TEST(ConfigProgram, AProgramWithItsKeysIsAccepted) {
  Result<Config> c = ParseConfigProgram(kRun +
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

// pilot check on a program's config shows what the pilot does with it and
// only the keys it reads; the builtin's training keys are listed apart,
// never shown as if they applied.
TEST(ConfigProgram, PinsAndHubRevisionsAreAccepted) {
  Result<Config> c = ParseConfigProgram(kRun + "[program]\ncommand = [\"python3\", \"train.py\"]\n"
                                  "pin = [\"train.py\", \"configs/\"]\n"
                                  "hub_models = [\"gpt2\", \"org/m@v1.0\"]\n"
                                  "hub_datasets = [\"org/d@" + std::string(40, 'a') + "\"]\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->program.pin, (std::vector<std::string>{"train.py", "configs/"}));
  EXPECT_EQ(c->program.hub_models.size(), 2u);
  Result<HubRef> r = ParseHubRef("org/m");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->revision, "main");
  EXPECT_FALSE(ParseHubRef("org/..").ok());
  EXPECT_FALSE(ParseHubRef("a--b").ok());
}

TEST(ConfigProgram, TheTableShowsWhatAppliesToAProgram) {
  Result<Config> c = ParseConfigProgram(kRun +
                           "[program]\ncommand = [\"python3\", \"train.py\"]\n"
                           "[training]\nsteps = 10\ndevice = \"cpu\"\n"
                           "[checkpoint]\nat_step = 5\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string t = ConfigToTable(*c);
  EXPECT_NE(t.find("pilot    reference process: steps 1..10, saving after step 5; a fresh process "
                   "resumes 6..10, losses compared within eval.restore_tolerance 0.001; node stage: "
                   "one process per GPU on each node (parallel.nproc = 0)"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("\nsteps "), std::string::npos) << t;
  EXPECT_EQ(t.find("\noptimizer "), std::string::npos) << t;
  EXPECT_EQ(t.find("\nprecision "), std::string::npos) << t;
  const size_t unused = t.find("not used for a program");
  ASSERT_NE(unused, std::string::npos) << t;
  EXPECT_NE(t.find("training.optimizer", unused), std::string::npos);
  EXPECT_NE(t.find("training.lr", unused), std::string::npos) << t;
  EXPECT_NE(t.find("training.precision", unused), std::string::npos);
}

TEST(ConfigProgram, WithoutAProgramTheBuiltinRuns) {
  Result<Config> c = ParseConfigProgram(kRun);
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
  Result<Config> c = ParseConfigProgram(GetParam().text);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find(GetParam().message), std::string::npos)
      << c.status().ToString();
}

const std::string kProgramConfigProgram = "[program]\ncommand = [\"python3\", \"train.py\"]\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigProgramBad,
    ::testing::Values(
        Bad{"model_key", kRun + kProgramConfigProgram + "[model]\nlayers = 4\n",
            "p.toml:9: model.layers: applies to the builtin model and cannot be used with [program]"},
        Bad{"builtin_training_key", kRun + kProgramConfigProgram + "[training]\nlr = 0.1\n",
            "p.toml:9: training.lr: applies to the builtin model"},
        Bad{"data_key", kRun + kProgramConfigProgram + "[data]\nformat = \"u16\"\ntrain = \"x\"\n",
            "data."},
        Bad{"empty_command", kRun + "[program]\ncommand = []\n",
            "p.toml:7: program.command: must name the program to run"},
        Bad{"program_key_without_command", kRun + "[program]\nstep_timeout = 5\n",
            "p.toml:7: program.step_timeout: is set but program.command is not"},
        Bad{"env_name", kRun + kProgramConfigProgram + "env = { \"1BAD\" = \"x\" }\n",
            "is not an environment variable name"},
        Bad{"env_reserved", kRun + kProgramConfigProgram + "env = { RANK = \"3\" }\n",
            "RANK is set by the pilot or by Slurm"},
        Bad{"env_not_string", kRun + kProgramConfigProgram + "env = { A = 1 }\n", "A must be a string"},
        Bad{"pattern_groups", kRun + kProgramConfigProgram + "loss_pattern = \"loss=[0-9.]+\"\n",
            "program.loss_pattern: must have exactly one group"},
        Bad{"pattern_syntax", kRun + kProgramConfigProgram + "loss_pattern = \"loss=([0-9.]+\"\n",
            "p.toml:8: program.loss_pattern: is not a regular expression: missing ): "
            "loss=([0-9.]+\nHINT: loss_pattern is RE2's syntax"},
        Bad{"pattern_too_large", kRun + kProgramConfigProgram + "loss_pattern = \"((((x{1000}){1000}){1000}))\"\n",
            "p.toml:8: program.loss_pattern: is not a regular expression: "},
        Bad{"launcher", kRun + kProgramConfigProgram + "launcher = \"torchrun\"\n",
            "program.launcher: must be one of \"pilot\", \"none\""},
        Bad{"srun", kRun + kProgramConfigProgram + "[parallel]\nlauncher = \"srun\"\n",
            "\"srun\" is not available with [program]"},
        Bad{"timeout", kRun + kProgramConfigProgram + "step_timeout = 0\n",
            "program.step_timeout: must be between 1 and 86400"},
        Bad{"pin_escapes", kRun + kProgramConfigProgram + "pin = [\"train.py\", \"../x\"]\n",
            "p.toml:8: program.pin: element 2 \"../x\" leaves program.workdir (\"..\")\n"
            "HINT: name files and folders below program.workdir"},
        Bad{"pin_absolute", kRun + kProgramConfigProgram + "pin = [\"/etc/passwd\"]\n",
            "program.pin: element 1 \"/etc/passwd\" is absolute"},
        Bad{"pin_empty_list", kRun + kProgramConfigProgram + "pin = []\n",
            "program.pin: must list at least one entry"},
        Bad{"hub_bad_repo", kRun + kProgramConfigProgram + "hub_models = [\"a/b/c\"]\n",
            "p.toml:8: program.hub_models: element 1: \"a/b/c\" is not a hub repository"},
        Bad{"hub_bad_revision", kRun + kProgramConfigProgram + "hub_datasets = [\"org/d@../x\"]\n",
            "program.hub_datasets: element 1: \"../x\": not a revision"}),
    [](const ::testing::TestParamInfo<Bad>& i) { return std::string(i.param.name); });

// A pattern std::regex (ECMAScript) accepted and RE2 does not: refused at
// submission with RE2's words, the place, and a hint that says why (RE2
// has no backreferences or lookaround) and what to write instead.
TEST(ConfigProgram, APatternOnlyABacktrackingEngineAcceptsIsRefusedWithAHint) {
  for (const char* pattern : {R"(loss=(\S+) \1)", R"(loss=(?=\d)([0-9.]+))",
                              R"((?<=loss=)([0-9.]+))", R"(loss=(?!x)([0-9.]+))"}) {
    Result<Config> c = ParseConfigProgram(kRun + kProgramConfigProgram + "loss_pattern = '" + pattern + "'\n");
    ASSERT_FALSE(c.ok()) << pattern;
    const std::string m = c.status().ToString();
    EXPECT_EQ(m.rfind("pilot: p.toml:8: program.loss_pattern: is not a regular expression: ", 0), 0u)
        << m;
    EXPECT_NE(m.find("HINT: loss_pattern is RE2's syntax, which matches in time linear in the line "
                     "and so has no backreferences"),
              std::string::npos)
        << m;
  }
  Result<Config> c = ParseConfigProgram(kRun + kProgramConfigProgram + "loss_pattern = '(\\S+) \\1'\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("invalid escape sequence: \\1"), std::string::npos)
      << c.status().ToString();
}

// The pattern of the attack on the supervisor's thread compiles: RE2 runs
// it in linear time, so nothing refuses it (tests/supervisor times it).
TEST(ConfigProgram, AnyPatternRe2AcceptsWithOneGroupIsAccepted) {
  for (const char* pattern : {R"((?:a|aa)*c(\S+))", R"(loss[=:] *([0-9.eE+-]+))",
                              R"((?P<loss>[0-9.]+) nats)", R"(^step \d+: (\S+)$)"}) {
    Result<Config> c = ParseConfigProgram(kRun + kProgramConfigProgram + "loss_pattern = '" + pattern + "'\n");
    EXPECT_TRUE(c.ok()) << pattern << ": " << c.status().ToString();
  }
}

}  // namespace
}  // namespace pilot
