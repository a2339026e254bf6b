// pilot.toml loading: every rejected config gives exactly one message, with
// the file, the line and the key; accepted configs have their defaults filled
// and their sources recorded.
#include "core/config/config.h"
#include "core/config/config_schema.h"
#include "core/config/load.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

namespace pilot {
namespace {

// Five lines of a valid [run]; cases append from line 6 on.
const std::string kRunConfig =
    "[run]\n"
    "name = \"t\"\n"
    "seq_len = 128\n"
    "micro_batch = 2\n"
    "target_steps = 100\n";

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

LoadOptions TestOptions(std::vector<std::string> overrides = {}) {
  LoadOptions o;
  o.overrides = std::move(overrides);
  o.env = FakeEnv({{"USER", "alice"}, {"HOME", "/home/alice"}});
  o.base_dir = "/cfg";
  return o;
}

Result<Config> ParseText(const std::string& text, std::vector<std::string> overrides = {}) {
  return ParseConfig(text, "t.toml", TestOptions(std::move(overrides)));
}

// ---- Rejected configs: one exact message each -------------------------------

struct BadCase {
  const char* name;
  std::string text;
  std::vector<std::string> overrides;
  std::string message;  // Status::ToString(), hint included
};

std::ostream& operator<<(std::ostream& os, const BadCase& c) { return os << c.name; }

const std::vector<BadCase>& BadCases() {
  static const std::vector<BadCase> kCases = {
      // Syntax and structure.
      {"syntax_unclosed_header",
       kRunConfig + "[model\nlayers = 2\n",
       {},
       "pilot: t.toml:6: syntax error: Error while parsing table header: expected ']', saw '\\n'"},
      {"syntax_bare_word_value",
       kRunConfig + "[model]\nkind = gpt\n",
       {},
       "pilot: t.toml:7: syntax error: Error while parsing value: could not determine value type\n"
       "HINT: strings are written in quotes (kind = \"gpt\"); see pilot.toml(5)"},
      {"duplicate_key",
       kRunConfig + "seq_len = 256\n",
       {},
       "pilot: t.toml:6: syntax error: Error while parsing key-value pair: cannot redefine "
       "existing "
       "integer 'seq_len'\nHINT: each key and each [section] may appear only once"},
      {"duplicate_section",
       kRunConfig + "[model]\nlayers = 2\n[model]\nheads = 2\n",
       {},
       "pilot: t.toml:8: syntax error: Error while parsing table header: cannot redefine existing "
       "table 'model'\nHINT: each key and each [section] may appear only once"},
      {"unknown_section_typo",
       kRunConfig + "[modle]\nlayers = 2\n",
       {},
       "pilot: t.toml:6: [modle]: unknown section\nHINT: did you mean [model]?"},
      {"unknown_section_far",
       kRunConfig + "[optimizer]\nlr = 1\n",
       {},
       "pilot: t.toml:6: [optimizer]: unknown section\nHINT: sections are [run], [model], [data], "
       "[training], [checkpoint], [eval], [parallel], [container], [program], [hardware]"},
      {"key_outside_section",
       "layers = 2\n" + kRunConfig,
       {},
       "pilot: t.toml:1: layers: keys must be inside a section such as [run]\nHINT: did you mean "
       "model.layers (under [model])?"},
      {"section_not_a_table",
       "model = 3\n" + kRunConfig,
       {},
       "pilot: t.toml:1: model: must be a table ([model]), got integer 3"},
      {"unknown_key_typo",
       kRunConfig + "[model]\nlayerz = 2\n",
       {},
       "pilot: t.toml:7: model.layerz: unknown key\nHINT: did you mean model.layers?"},
      {"unknown_key_far",
       kRunConfig + "[eval]\nfrequency = 2\n",
       {},
       "pilot: t.toml:7: eval.frequency: unknown key\nHINT: keys of [eval]: batches, "
       "restore_tolerance"},
      {"earliest_problem_wins",
       kRunConfig + "[training]\nsteps = 0\n[model]\nlayers = 0\n",
       {},
       "pilot: t.toml:7: training.steps: must be between 2 and 1000000, got 0"},
      // Types.
      {"int_given_string",
       kRunConfig + "[model]\nlayers = \"12\"\n",
       {},
       "pilot: t.toml:7: model.layers: must be an integer, got string \"12\""},
      {"int_given_float",
       kRunConfig + "[model]\nlayers = 2.5\n",
       {},
       "pilot: t.toml:7: model.layers: must be an integer, got float 2.5"},
      {"string_given_int",
       kRunConfig + "[model]\nkind = 5\n",
       {},
       "pilot: t.toml:7: model.kind: must be a string, got integer 5"},
      {"bool_given_string",
       kRunConfig + "[training]\ndeterministic = \"yes\"\n",
       {},
       "pilot: t.toml:7: training.deterministic: must be true or false, got string \"yes\""},
      {"number_given_string",
       kRunConfig + "[training]\nlr = \"fast\"\n",
       {},
       "pilot: t.toml:7: training.lr: must be a number, got string \"fast\""},
      {"list_given_string",
       kRunConfig + "[hardware]\ncandidates = \"H100-80\"\n",
       {},
       "pilot: t.toml:7: hardware.candidates: must be an array of strings, got string "
       "\"H100-80\""},
      {"list_element_type",
       kRunConfig + "[hardware]\ncandidates = [\n  \"H100-80\",\n  3,\n]\n",
       {},
       "pilot: t.toml:9: hardware.candidates: element 2 must be a non-empty string, got "
       "integer 3"},
      {"list_element_repeated",
       kRunConfig + "[hardware]\ncandidates = [\"A100-80\", \"A100-80\"]\n",
       {},
       "pilot: t.toml:7: hardware.candidates: element 2 repeats \"A100-80\""},
      {"list_empty",
       kRunConfig + "[hardware]\ncandidates = []\n",
       {},
       "pilot: t.toml:7: hardware.candidates: must list at least one GPU type"},
      {"int_given_date",
       kRunConfig + "[training]\nseed = 1979-05-27\n",
       {},
       "pilot: t.toml:7: training.seed: must be an integer, got a date"},
      // Ranges and enumerations.
      {"int_below_range",
       kRunConfig + "[model]\nlayers = 0\n",
       {},
       "pilot: t.toml:7: model.layers: must be between 1 and 1024, got 0"},
      {"int_above_range",
       kRunConfig,
       {"run.nodes=200000"},
       "pilot: --set run.nodes=200000: must be between 1 and 100000, got 200000"},
      {"double_open_lower_bound",
       kRunConfig + "[training]\nlr = 0\n",
       {},
       "pilot: t.toml:7: training.lr: must be > 0 and <= 10, got 0"},
      {"double_open_upper_bound",
       kRunConfig + "[training]\nbeta2 = 1.0\n",
       {},
       "pilot: t.toml:7: training.beta2: must be >= 0 and < 1, got 1"},
      {"double_nan",
       kRunConfig + "[training]\nlr = nan\n",
       {},
       "pilot: t.toml:7: training.lr: must be > 0 and <= 10, got nan"},
      {"whole_float_not_whole",
       "[run]\nname = \"t\"\nseq_len = 128\nmicro_batch = 2\ntarget_tokens = 2.5\n",
       {},
       "pilot: t.toml:5: run.target_tokens: must be between 0 and 1000000000000000 (a whole "
       "number), got 2.5"},
      {"choice_typo",
       kRunConfig + "[model]\nkind = \"gtp\"\n",
       {},
       "pilot: t.toml:7: model.kind: must be one of \"gpt\", \"llama\"; got \"gtp\"\nHINT: did "
       "you mean \"gpt\"?"},
      {"choice_unknown",
       kRunConfig + "[training]\nprecision = \"fp8\"\n",
       {},
       "pilot: t.toml:7: training.precision: must be one of \"fp32\", \"bf16\", \"fp16\"; got "
       "\"fp8\""},
      {"name_pattern",
       "[run]\nname = \"my run\"\nseq_len = 128\nmicro_batch = 2\ntarget_steps = 1\n",
       {},
       "pilot: t.toml:2: run.name: must be 1 to 64 characters of A-Z a-z 0-9 . _ -, got \"my "
       "run\""},
      {"sha256_not_hex",
       kRunConfig + "[model]\ninit_weights = \"w.safetensors\"\ninit_sha256 = \"abc\"\n",
       {},
       "pilot: t.toml:8: model.init_sha256: must be 64 hex characters (a sha256 digest), got "
       "\"abc\" (3 characters)"},
      {"alloc_conf_unknown_key",
       kRunConfig + "[training]\nalloc_conf = \"expandable_segment:True\"\n",
       {},
       "pilot: t.toml:7: training.alloc_conf: unknown allocator setting \"expandable_segment\" in "
       "\"expandable_segment:True\"" "\nHINT: write key:value pairs separated by commas, e.g. "
       "\"expandable_segments:True,max_split_size_mb:512\""},
      {"alloc_conf_bool",
       kRunConfig + "[training]\nalloc_conf = \"max_split_size_mb:256,expandable_segments:1\"\n",
       {},
       "pilot: t.toml:7: training.alloc_conf: expandable_segments must be True or False in "
       "\"max_split_size_mb:256,expandable_segments:1\"" "\nHINT: write key:value pairs separated by commas, e.g. "
       "\"expandable_segments:True,max_split_size_mb:512\""},
      {"alloc_conf_not_pairs",
       kRunConfig + "[training]\nalloc_conf = \"expandable_segments\"\n",
       {},
       "pilot: t.toml:7: training.alloc_conf: \"expandable_segments\" is not key:value in "
       "\"expandable_segments\"" "\nHINT: write key:value pairs separated by commas, e.g. "
       "\"expandable_segments:True,max_split_size_mb:512\""},
      {"image_bad_digest",
       kRunConfig + "[container]\nimage = \"repo/x@sha256:1234\"\n",
       {},
       "pilot: t.toml:7: container.image: the digest after '@' must be sha256: and 64 lower-case "
       "hex characters, got \"sha256:1234\""},
      // Required keys.
      {"missing_required_key",
       "[run]\nname = \"t\"\nmicro_batch = 2\ntarget_steps = 5\n",
       {},
       "pilot: t.toml:1: run.seq_len: required key is missing"},
      {"missing_run_section",
       "[model]\nlayers = 2\n",
       {},
       "pilot: t.toml:1: run.name: required key is missing (there is no [run] section)"},
      // Cross-field rules.
      {"target_both",
       kRunConfig,
       {"run.target_tokens=1e9"},
       "pilot: t.toml:5: run.target_steps: set run.target_tokens or run.target_steps, not both\n"
       "HINT: the other one follows from seq_len, micro_batch, grad_accum, gpus_per_node and "
       "nodes"},
      {"target_neither",
       "[run]\nname = \"t\"\nseq_len = 128\nmicro_batch = 2\n",
       {},
       "pilot: t.toml:1: run.target_tokens: the long run's length is missing: set "
       "run.target_tokens or run.target_steps to a value > 0"},
      {"gpu_type_not_candidate",
       kRunConfig + "[hardware]\ncandidates = [\"A100-80\"]\n",
       {"run.gpu_type=H100-80"},
       "pilot: --set run.gpu_type=H100-80: \"H100-80\" is not among hardware.candidates (A100-80)"
       "\nHINT: add it to hardware.candidates, or leave run.gpu_type empty for any type"},
      {"heads_do_not_divide",
       kRunConfig + "[model]\nd_model = 100\nheads = 3\n",
       {},
       "pilot: t.toml:8: model.heads: model.d_model = 100 is not divisible by model.heads = 3"},
      {"kv_heads_do_not_divide",
       kRunConfig + "[model]\nkind = \"llama\"\nheads = 12\nkv_heads = 5\n",
       {},
       "pilot: t.toml:9: model.kv_heads: model.kv_heads = 5 must divide model.heads = 12"},
      {"gpt_with_grouped_heads",
       kRunConfig + "[model]\nheads = 12\nkv_heads = 4\n",
       {},
       "pilot: t.toml:8: model.kv_heads: grouped key/value heads need model.kind = \"llama\"; a "
       "gpt model has kv_heads = heads = 12"},
      {"llama_odd_head_size",
       kRunConfig + "[model]\nkind = \"llama\"\nd_model = 60\nheads = 4\n",
       {},
       "pilot: t.toml:9: model.heads: llama's rotary embedding needs an even head size; d_model / "
       "heads = 60 / 4 = 15"},
      {"max_seq_len_too_short",
       kRunConfig + "[model]\nmax_seq_len = 64\n",
       {},
       "pilot: t.toml:7: model.max_seq_len: 64 is shorter than run.seq_len = 128"},
      {"init_weights_without_sha",
       kRunConfig + "[model]\ninit_weights = \"w.safetensors\"\n",
       {},
       "pilot: t.toml:7: model.init_weights: model.init_sha256 is required with init_weights\n"
       "HINT: pin the file: init_sha256 = \"<output of sha256sum>\""},
      {"random_with_train_file",
       kRunConfig + "[data]\ntrain = \"tokens.u16\"\n",
       {},
       "pilot: t.toml:7: data.train: is set but data.format is \"random\" (tokens come from the "
       "seed)\nHINT: set data.format = \"u16\" or \"u32\" to read token files"},
      {"files_without_train",
       kRunConfig + "[data]\nformat = \"u32\"\n",
       {},
       "pilot: t.toml:7: data.format: data.format = \"u32\" needs data.train, a token file"},
      {"u16_with_big_vocab",
       kRunConfig + "[model]\nvocab = 128256\n[data]\nformat = \"u16\"\ntrain = \"a\"\n",
       {},
       "pilot: t.toml:9: data.format: u16 tokens hold ids below 65536 but model.vocab = 128256\n"
       "HINT: use data.format = \"u32\""},
      {"smaller_shape_not_allowed",
       kRunConfig + "[training]\nseq_len = 64\n",
       {},
       "pilot: t.toml:7: training.seq_len: the pilot must use the real shape: 64 differs from "
       "run.seq_len = 128\nHINT: set training.allow_smaller_shape = true to run it anyway; the "
       "verdict will then be non-binding"},
      {"pilot_larger_than_run",
       kRunConfig + "[training]\nallow_smaller_shape = true\nmicro_batch = 4\n",
       {},
       "pilot: t.toml:8: training.micro_batch: 4 is larger than run.micro_batch = 2; a pilot may "
       "not be larger than the run it stands for"},
      {"warmup_not_below_steps",
       kRunConfig + "[training]\nsteps = 4\nwarmup_steps = 4\n",
       {},
       "pilot: t.toml:8: training.warmup_steps: training.warmup_steps = 4 leaves no measured "
       "step; it must be < training.steps = 4"},
      {"at_step_not_below_steps",
       kRunConfig + "[training]\nsteps = 10\n[checkpoint]\nat_step = 10\n",
       {},
       "pilot: t.toml:9: checkpoint.at_step: checkpoint.at_step = 10 must be between 1 and 9 "
       "(training.steps - 1): the pilot resumes from it\nHINT: a restore is proven only when "
       "steps follow the checkpoint"},
      {"check_steps_above_steps",
       kRunConfig + "[training]\nsteps = 4\nwarmup_steps = 1\nrecompute_check_steps = 5\n",
       {},
       "pilot: t.toml:9: training.recompute_check_steps: 5 is more than training.steps = 4"},
      {"lr_warmup_past_horizon",
       kRunConfig + "[training]\nlr_warmup = 100\n",
       {},
       "pilot: t.toml:7: training.lr_warmup: training.lr_warmup = 100 must be less than the "
       "schedule's horizon of 100 steps"},
      {"min_lr_above_lr",
       kRunConfig + "[training]\nlr = 1e-4\nmin_lr = 1e-3\n",
       {},
       "pilot: t.toml:8: training.min_lr: training.min_lr = 0.001 is above training.lr = 1e-4"},
      {"fp16_on_cpu",
       kRunConfig + "[training]\ndevice = \"cpu\"\nprecision = \"fp16\"\n",
       {},
       "pilot: t.toml:8: training.precision: fp16 is not supported on the cpu device\nHINT: use "
       "\"bf16\" or \"fp32\" on cpu"},
      {"nproc_above_run",
       kRunConfig + "[parallel]\nnproc = 16\n",
       {},
       "pilot: t.toml:7: parallel.nproc: 16 processes is more than the run's 8 GPUs (run.nodes = 1 "
       "times run.gpus_per_node = 8); a pilot may not be larger than the run it stands for"},
      {"nproc_above_run_of_nodes",
       kRunConfig + "nodes = 2\n[parallel]\nnproc = 17\n",
       {},
       "pilot: t.toml:8: parallel.nproc: 17 processes is more than the run's 16 GPUs (run.nodes = 2 "
       "times run.gpus_per_node = 8); a pilot may not be larger than the run it stands for"},
      // Paths and variables.
      {"unknown_variable",
       kRunConfig + "[data]\nformat = \"u16\"\ntrain = \"$DATA/x.u16\"\n",
       {},
       "pilot: t.toml:8: data.train: unknown variable $DATA in \"$DATA/x.u16\"\nHINT: paths may "
       "use $USER, $HOME, $SLURM_JOB_ID, $SLURM_SUBMIT_DIR"},
      {"unset_variable",
       kRunConfig + "[checkpoint]\ndir = \"/scratch/${SLURM_JOB_ID}/ckpt\"\n",
       {},
       "pilot: t.toml:7: checkpoint.dir: $SLURM_JOB_ID is not set (in "
       "\"/scratch/${SLURM_JOB_ID}/ckpt\")\nHINT: $SLURM_JOB_ID is set only inside a Slurm job"},
      {"tilde_path",
       kRunConfig + "[checkpoint]\ndir = \"~/ckpt\"\n",
       {},
       "pilot: t.toml:7: checkpoint.dir: '~' is not expanded in \"~/ckpt\"\nHINT: write $HOME "
       "instead of ~"},
      {"stray_dollar",
       kRunConfig + "[checkpoint]\ndir = \"/a/$/b\"\n",
       {},
       "pilot: t.toml:7: checkpoint.dir: '$' must be followed by a variable name in \"/a/$/b\"\n"
       "HINT: write $$ for a literal '$'"},
      // Overrides.
      {"override_unknown_key",
       kRunConfig,
       {"model.layer=3"},
       "pilot: --set model.layer=3: unknown key model.layer\nHINT: did you mean model.layers?"},
      {"override_wrong_type",
       kRunConfig,
       {"model.layers=abc"},
       "pilot: --set model.layers=abc: must be an integer, got string \"abc\""},
      {"override_out_of_range",
       kRunConfig,
       {"training.steps=1"},
       "pilot: --set training.steps=1: must be between 2 and 1000000, got 1"},
      {"override_without_equals",
       kRunConfig,
       {"training.steps"},
       "pilot: --set training.steps: expected section.key=value"},
      {"override_cross_field",
       kRunConfig,
       {"training.seq_len=64"},
       "pilot: --set training.seq_len=64: the pilot must use the real shape: 64 differs from "
       "run.seq_len = 128\nHINT: set training.allow_smaller_shape = true to run it anyway; the "
       "verdict will then be non-binding"},
      // Whole file.
      {"empty_file",
       "",
       {},
       "pilot: t.toml:1: file is empty\nHINT: a config needs at least [run] name, seq_len and "
       "micro_batch; see pilot.toml(5)"},
      {"blank_file",
       "  \n\n\t\n",
       {},
       "pilot: t.toml:1: file is empty\nHINT: a config needs at least [run] name, seq_len and "
       "micro_batch; see pilot.toml(5)"},
  };
  return kCases;
}

class BadConfigTest : public testing::TestWithParam<BadCase> {};

TEST_P(BadConfigTest, GivesOneExactMessage) {
  const BadCase& c = GetParam();
  Result<Config> r = ParseText(c.text, c.overrides);
  ASSERT_FALSE(r.ok()) << c.text;
  EXPECT_EQ(r.status().code(), Code::kInvalid);
  EXPECT_EQ(r.status().ToString(), c.message);
}

INSTANTIATE_TEST_SUITE_P(Config, BadConfigTest, testing::ValuesIn(BadCases()),
                         [](const testing::TestParamInfo<BadCase>& param) {
                           return std::string(param.param.name);
                         });

TEST(ConfigTest, HasManyBadCases) { EXPECT_GE(BadCases().size(), 35u); }

// ---- Accepted configs -------------------------------------------------------

TEST(ConfigTest, MinimalConfigGetsEveryDefault) {
  Result<Config> r = ParseText(kRunConfig);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = *r;
  EXPECT_EQ(c.run.name, "t");
  EXPECT_EQ(c.run.nodes, 1);
  EXPECT_EQ(c.run.gpus_per_node, 8);
  EXPECT_EQ(c.model.kind, "gpt");
  EXPECT_EQ(c.model.layers, 12);
  EXPECT_EQ(c.model.kv_heads, 12);            // 0 -> heads
  EXPECT_EQ(c.model.max_seq_len, 128);        // 0 -> run.seq_len
  EXPECT_EQ(c.training.seq_len, 128);         // 0 -> run.seq_len
  EXPECT_EQ(c.training.micro_batch, 2);       // 0 -> run.micro_batch
  EXPECT_EQ(c.checkpoint.at_step, 10);        // 0 -> steps / 2
  EXPECT_EQ(c.training.schedule_steps, 100);  // 0 -> run's steps
  EXPECT_EQ(c.training.seed, -1);
  EXPECT_EQ(c.parallel.nproc, 0);
  EXPECT_EQ(c.hardware.candidates.size(), 4u);
  EXPECT_TRUE(c.ShapeIsBinding());
  EXPECT_EQ(c.path, "t.toml");
}

TEST(ConfigTest, SourcesRecordLinesDefaultsAndOverrides) {
  Result<Config> r = ParseText(kRunConfig + "[model]\nlayers = 4\n", {"model.heads=4"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->sources.size(), KnownConfigKeys().size());
  for (const std::string& key : KnownConfigKeys()) EXPECT_EQ(r->sources.count(key), 1u) << key;
  const KeySource& seq = r->sources.at("run.seq_len");
  EXPECT_EQ(seq.line, 3);
  EXPECT_FALSE(seq.is_default);
  EXPECT_FALSE(seq.from_override);
  EXPECT_EQ(r->sources.at("model.layers").line, 7);
  const KeySource& heads = r->sources.at("model.heads");
  EXPECT_EQ(heads.line, 0);
  EXPECT_FALSE(heads.is_default);
  EXPECT_TRUE(heads.from_override);
  EXPECT_EQ(r->model.heads, 4);
  EXPECT_TRUE(r->sources.at("training.lr").is_default);
  EXPECT_EQ(r->sources.at("training.lr").line, 0);
}

TEST(ConfigTest, OverridesTakeTomlValuesAndBareStrings) {
  Result<Config> r =
      ParseText(kRunConfig + "[model]\nkind = \"gpt\"\n",
            {"model.kind=llama", "training.lr=1e-3", "training.deterministic=true",
             "hardware.candidates=[\"H100-80\"]", "run.name=\"x-2\"", "data.format = u16",
             "data.train=tok/train.u16", "training.steps=40", "training.steps=30"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model.kind, "llama");
  EXPECT_DOUBLE_EQ(r->training.lr, 1e-3);
  EXPECT_TRUE(r->training.deterministic);
  EXPECT_EQ(r->hardware.candidates, std::vector<std::string>{"H100-80"});
  EXPECT_EQ(r->run.name, "x-2");
  EXPECT_EQ(r->data.format, "u16");
  EXPECT_EQ(r->data.train, "/cfg/tok/train.u16");
  EXPECT_EQ(r->training.steps, 30);  // the last --set wins
}

TEST(ConfigTest, StringKeyTakesNumberLikeOverrideAsText) {
  Result<Config> r = ParseText(kRunConfig, {"run.name=2024"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->run.name, "2024");
}

TEST(ConfigTest, ExpandsVariablesAndResolvesRelativePaths) {
  LoadOptions o = TestOptions();
  o.env = FakeEnv({{"USER", "bob"},
                   {"HOME", "/home/bob"},
                   {"SLURM_JOB_ID", "42"},
                   {"SLURM_SUBMIT_DIR", "/sub"}});
  Result<Config> r = ParseConfig(
      kRunConfig +
          "[data]\nformat = \"u16\"\ntrain = \"$HOME/tok/${USER}.u16\"\neval = \"../e.u16\"\n"
          "[checkpoint]\ndir = \"$SLURM_SUBMIT_DIR/ck/$SLURM_JOB_ID/$$x\"\n"
          "[container]\nimage = \"images/pt.sqsh\"\n",
      "conf/t.toml", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->data.train, "/home/bob/tok/bob.u16");
  EXPECT_EQ(r->data.eval, "/e.u16");  // "/cfg/../e.u16"
  EXPECT_EQ(r->checkpoint.dir, "/sub/ck/42/$x");
  EXPECT_EQ(r->container.image, "/cfg/images/pt.sqsh");
}

TEST(ConfigTest, RegistryImageIsNotAPath) {
  Result<Config> r = ParseText(kRunConfig + "[container]\nimage = \"nvcr.io/nvidia/pytorch:24.10-py3\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->container.image, "nvcr.io/nvidia/pytorch:24.10-py3");
}

TEST(ConfigTest, BaseDirDefaultsToTheConfigsDirectory) {
  LoadOptions o = TestOptions();
  o.base_dir.clear();
  Result<Config> r = ParseConfig(kRunConfig + "[checkpoint]\ndir = \"ck\"\n", "/etc/pilots/t.toml", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->checkpoint.dir, "/etc/pilots/ck");
}

TEST(ConfigTest, WithoutExpansionNamesAreCheckedButPathsKept) {
  LoadOptions o = TestOptions();
  o.expand_paths = false;
  o.env = FakeEnv({});
  Result<Config> r = ParseConfig(kRunConfig + "[checkpoint]\ndir = \"$SLURM_JOB_ID/ck\"\n", "t.toml", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->checkpoint.dir, "$SLURM_JOB_ID/ck");
  Result<Config> bad = ParseConfig(kRunConfig + "[checkpoint]\ndir = \"$JOB/ck\"\n", "t.toml", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().what(), "t.toml:7: checkpoint.dir");
}

TEST(ConfigTest, SmallerShapeIsAllowedWhenAskedAndNonBinding) {
  Result<Config> r =
      ParseText(kRunConfig + "[training]\nallow_smaller_shape = true\nseq_len = 64\nmicro_batch = 1\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ShapeIsBinding());
  EXPECT_EQ(r->training.seq_len, 64);  // the shape the pilot runs
  EXPECT_EQ(r->training.micro_batch, 1);
}

TEST(ConfigTest, TargetTokensTakesWholeFloatsAndGivesRunSteps) {
  Result<Config> r = ParseText(
      "[run]\nname = \"t\"\nseq_len = 2048\nmicro_batch = 8\ngrad_accum = 4\n"
      "target_tokens = 2.6e10\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->run.target_tokens, 26'000'000'000);
  EXPECT_DOUBLE_EQ(r->RunTokensPerStep(), 2048.0 * 8 * 4 * 8);
  EXPECT_EQ(r->RunTotalSteps(), 49592);  // ceil(2.6e10 / 524288)
  EXPECT_EQ(r->training.schedule_steps, 49592);
}

TEST(ConfigTest, Sha256IsOfTheFileBytes) {
  Result<Config> r = ParseText(kRunConfig);
  ASSERT_TRUE(r.ok());
  // printf '[run]\nname = "t"\nseq_len = 128\nmicro_batch = 2\ntarget_steps = 100\n' | sha256sum
  EXPECT_EQ(r->sha256, "b5cc2e38369d74a72f9c0953cf4fbb5a43b46b0c3349813164ed0ff91765e654");
}

TEST(ConfigTest, Sha256DigestsAreStoredLowerCase) {
  const std::string upper(64, 'A');
  Result<Config> r =
      ParseText(kRunConfig + "[model]\ninit_weights = \"/w\"\ninit_sha256 = \"" + upper + "\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model.init_sha256, std::string(64, 'a'));
}

// ---- Files ----------------------------------------------------------------

TEST(ConfigTest, MissingFileIsNotFound) {
  Result<Config> r = LoadConfig("/nonexistent/pilot.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().ToString(), "pilot: /nonexistent/pilot.toml: no such file");
}

TEST(ConfigTest, DirectoryIsAnIoError) {
  Result<Config> r = LoadConfig(testing::TempDir());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kIoError);
}

TEST(ConfigTest, LoadsFromDiskAndResolvesAgainstItsDirectory) {
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / "config_test_dir";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "p.toml").string();
  std::ofstream(path) << kRunConfig << "[checkpoint]\ndir = \"ck\"\n";
  LoadOptions o;
  o.env = FakeEnv({});
  Result<Config> r = LoadConfig(path, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->checkpoint.dir, (std::filesystem::absolute(dir) / "ck").lexically_normal().string());
  EXPECT_EQ(r->path, path);
}

TEST(ConfigTest, TooLargeFileIsRejected) {
  std::string big = kRunConfig + "# " + std::string(2 << 20, 'x') + "\n";
  Result<Config> r = ParseText(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().what(), "t.toml:1");
  EXPECT_THAT(r.status().detail(), testing::HasSubstr("file is too large"));
}

// Random bytes and mutated configs: never a crash, always one kInvalid
// message that starts with the file name and a line.
TEST(ConfigTest, RandomBytesNeverCrash) {
  std::mt19937 rng(20261130);
  const std::string seed = kRunConfig +
                           "[model]\nlayers = 4\nkind = \"llama\"\n[hardware]\n"
                           "candidates = [\"A100-80\"]\n";
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    if (i % 2 == 0) {
      const size_t n = rng() % 300;
      for (size_t j = 0; j < n; ++j) text += static_cast<char>(rng() % 256);
    } else {
      text = seed;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t pos = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text[pos] = static_cast<char>(rng() % 256);
            break;
          case 1:
            text.erase(pos, 1 + rng() % 5);
            break;
          default:
            text.insert(pos, 1, "[]=\"\n.#$0{}"[rng() % 12]);
        }
        if (text.empty()) text = "x";
      }
    }
    Result<Config> r = ParseText(text);
    if (r.ok()) continue;
    ASSERT_EQ(r.status().code(), Code::kInvalid) << r.status().ToString();
    ASSERT_THAT(r.status().what(), testing::MatchesRegex("t\\.toml:[0-9]+(: .*)?"))
        << r.status().ToString();
    for (char ch : r.status().ToString()) {
      ASSERT_TRUE(ch == '\n' || (ch >= 0x20 && ch < 0x7f)) << r.status().ToString();
    }
  }
}

// ---- Keys and printing -----------------------------------------------------

TEST(ConfigTest, KnownKeysAreUniqueAndQualified) {
  const auto& keys = KnownConfigKeys();
  EXPECT_GE(keys.size(), 60u);
  std::set<std::string> seen;
  for (const std::string& k : keys) {
    EXPECT_THAT(k, testing::MatchesRegex("[a-z]+\\.[a-z0-9_]+"));
    EXPECT_TRUE(seen.insert(k).second) << k;
  }
  EXPECT_EQ(keys.front(), "run.name");
  EXPECT_EQ(keys.back(), "hardware.candidates");
}

TEST(ConfigTest, JsonHoldsEveryKeyWithItsResolvedValue) {
  Result<Config> r = ParseText(kRunConfig + "[model]\nlayers = 4\n");
  ASSERT_TRUE(r.ok());
  const nlohmann::json j = nlohmann::json::parse(ConfigToJson(*r));
  EXPECT_EQ(j["path"], "t.toml");
  EXPECT_EQ(j["binding"], true);
  EXPECT_EQ(j["model"]["layers"], 4);
  EXPECT_EQ(j["training"]["seq_len"], 128);
  EXPECT_EQ(j["training"]["lr"], 3e-4);
  EXPECT_EQ(j["hardware"]["candidates"][3], "MI300X-192");
  size_t n = 0;
  for (const std::string& key : KnownConfigKeys()) {
    const std::string section = key.substr(0, key.find('.'));
    EXPECT_TRUE(j[section].contains(key.substr(key.find('.') + 1))) << key;
    ++n;
  }
  EXPECT_EQ(n, KnownConfigKeys().size());
  const auto& defaults = j["defaults"];
  EXPECT_NE(std::find(defaults.begin(), defaults.end(), "training.lr"), defaults.end());
  EXPECT_EQ(std::find(defaults.begin(), defaults.end(), "model.layers"), defaults.end());
}

TEST(ConfigTest, TableMarksDefaultsAndOverrides) {
  Result<Config> r = ParseText(kRunConfig + "[model]\nlayers = 4\n", {"model.heads=4"});
  ASSERT_TRUE(r.ok());
  const std::string table = ConfigToTable(*r);
  EXPECT_THAT(table, testing::HasSubstr("\n[model]\n"));
  EXPECT_THAT(table, testing::ContainsRegex("\nlayers += 4\n"));
  EXPECT_THAT(table, testing::ContainsRegex("\nheads += 4 +\\(--set\\)\n"));
  EXPECT_THAT(table, testing::ContainsRegex("\nlr += 3e-4 +\\(default\\)\n"));
  EXPECT_THAT(table, testing::ContainsRegex("\nname += \"t\"\n"));
  EXPECT_THAT(table, testing::HasSubstr("= run (binding)"));
}

// ---- Shipped configs ---------------------------------------------------------

TEST(ConfigTest, EveryShippedConfigIsValid) {
  const std::filesystem::path dir = std::filesystem::path(PILOT_SOURCE_DIR) / "configs";
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    LoadOptions o;
    o.env = FakeEnv(
        {{"USER", "u"}, {"HOME", "/home/u"}, {"SLURM_JOB_ID", "1"}, {"SLURM_SUBMIT_DIR", "/s"}});
    Result<Config> r = LoadConfig(entry.path().string(), o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    ++n;
  }
  EXPECT_GE(n, 2);
}

TEST(ConfigTest, TinyCpuAndGpt1bHaveTheDocumentedShapes) {
  const std::string dir = std::string(PILOT_SOURCE_DIR) + "/configs/";
  LoadOptions o;
  o.env = FakeEnv({{"USER", "u"}, {"HOME", "/home/u"}, {"SLURM_JOB_ID", "1"}});
  Result<Config> tiny = LoadConfig(dir + "tiny-cpu.toml", o);
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  EXPECT_EQ(tiny->training.device, "cpu");
  EXPECT_EQ(tiny->training.precision, "fp32");
  EXPECT_EQ(tiny->data.format, "random");
  EXPECT_LT(tiny->checkpoint.at_step, tiny->training.steps);
  Result<Config> gpt = LoadConfig(dir + "gpt-1b.toml", o);
  ASSERT_TRUE(gpt.ok()) << gpt.status().ToString();
  EXPECT_EQ(gpt->model.layers, 24);
  EXPECT_EQ(gpt->model.d_model, 2048);
  EXPECT_EQ(gpt->model.heads, 16);
  EXPECT_EQ(gpt->model.vocab, 50304);
  EXPECT_EQ(gpt->run.seq_len, 2048);
  EXPECT_EQ(gpt->run.micro_batch, 8);
  EXPECT_EQ(gpt->training.precision, "bf16");
  EXPECT_EQ(gpt->training.optimizer, "adamw");
  EXPECT_TRUE(gpt->ShapeIsBinding());
}

}  // namespace
}  // namespace pilot
