// Command-line parsing: a table of flags per subcommand.
#include "runner/app/cli.h"

#include <boost/program_options.hpp>

#include <sstream>

#include "core/base/strings.h"

namespace pilot::runner {
namespace po = boost::program_options;
namespace {

constexpr char kUsage[] =
    "usage: pilot-runner COMMAND [options]\n"
    "       pilot-runner --versions [--json] | --help | --version\n"
    "\n"
    "Commands:\n"
    "  run       the pilot: steps at the real shape, memory, eval, checkpoint, restore\n"
    "  verify    re-check a checkpoint from its files (what the epilog runs)\n"
    "\n"
    "Options:\n"
    "  --versions  libtorch, CUDA runtime and driver, cuDNN, NCCL, devices\n"
    "  --json      with --versions: print JSON\n"
    "  --help      this text; COMMAND --help for a command's options\n"
    "  --version   the runner's version\n"
    "\n"
    "See pilot-runner(1).\n";

std::string HelpOf(const std::string& usage, const po::options_description& d) {
  std::ostringstream os;
  os << usage << "\n" << d << "\nSee pilot-runner(1).\n";
  return os.str();
}

bool WantsHelp(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

std::vector<std::string> OptionNames(const po::options_description& d) {
  std::vector<std::string> names;
  for (const auto& o : d.options()) names.push_back("--" + o->long_name());
  return names;
}

Status Parse(const po::options_description& desc, const std::vector<std::string>& args,
             const std::string& sub, po::variables_map* vm) {
  try {
    // No prefix guessing: "--overhead-step" is a typo, not a flag.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(args).options(desc).style(style).run(), *vm);
    po::notify(*vm);
  } catch (const po::unknown_option& e) {
    Status s = Status::Invalid(sub, "unknown option " + e.get_option_name());
    std::string word = e.get_option_name();
    if (auto m = ClosestMatch(word, OptionNames(desc))) s = s.WithHint("did you mean " + *m + "?");
    return s;
  } catch (const po::error& e) {
    return Status::Invalid(sub, e.what()).WithHint("see pilot-runner(1)");
  }
  return Status::Ok();
}

}  // namespace

Result<Command> ParseCommandLine(const std::vector<std::string>& args) {
  Command cmd;
  cmd.help = kUsage;
  if (args.empty()) return Status::Invalid("pilot-runner", "no command").WithHint("pilot-runner --help");
  const std::string sub = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "run") {
    RunOptions& r = cmd.run;
    po::options_description d("Options");
    d.add_options()
        ("config", po::value(&r.config)->required(), "pilot.toml")
        ("out", po::value(&r.out)->required(), "output directory")
        ("lock", po::value(&r.lock), "lock.json written by the prolog")
        ("stage", po::value(&r.stage)->default_value("single"), "single | node | all")
        ("set", po::value(&r.sets)->composing(), "section.key=value override")
        ("overhead-steps", po::value(&r.overhead_steps)->default_value(0), "instrumentation check")
        ("nproc", po::value(&r.nproc)->default_value(0), "node stage: local processes (0 = parallel.nproc)")
        ("keep-reference", po::bool_switch(&r.keep_reference), "keep reference-final.safetensors")
        ("trace", po::value(&r.trace), "write a Chrome trace of steady steps to FILE")
        ("trace-steps", po::value(&r.trace_steps)->default_value(3), "steps in the trace (1-100)")
        ("resume-from", po::value(&r.resume_checkpoint), "internal: restore this checkpoint")
        ("reference", po::value(&r.reference_params), "internal: reference parameters")
        ("report-fd", po::value(&r.report_fd)->default_value(-1), "internal: report to this descriptor")
        ("supervised", po::bool_switch(&r.supervised), "internal: the supervisor runs the restore")
        ("single-tokens-per-second", po::value(&r.single_tokens_per_second)->default_value(0.0),
         "internal: single-stage throughput for the node stage's scaling")
        ("memory-headroom", po::value(&r.memory_headroom)->default_value(0.10),
         "free fraction of a process's memory the single stage plans to leave (0-0.9)");
    if (WantsHelp(rest)) {
      cmd.help = HelpOf("usage: pilot-runner run --config FILE --out DIR [options]", d);
      return cmd;
    }
    po::variables_map vm;
    PILOT_RETURN_IF_ERROR(Parse(d, rest, "run", &vm));
    if (r.stage != "single" && r.stage != "node" && r.stage != "all") {
      return Status::Invalid("run: --stage", "unknown \"" + r.stage + "\" (single, node or all)");
    }
    if (r.overhead_steps < 0 || r.overhead_steps > 10000) {
      return Status::Invalid("run: --overhead-steps", "must be between 0 and 10000");
    }
    if (r.trace_steps < 1 || r.trace_steps > 100) {
      return Status::Invalid("run: --trace-steps", "must be between 1 and 100");
    }
    if (r.nproc < 0 || r.nproc > 1024) {
      return Status::Invalid("run: --nproc", "must be between 0 and 1024");
    }
    if (r.report_fd < -1 || r.report_fd == 0 || r.report_fd == 1 || r.report_fd == 2) {
      return Status::Invalid("run: --report-fd", "must be a descriptor above 2");
    }
    if (!(r.memory_headroom >= 0 && r.memory_headroom <= 0.9)) {
      return Status::Invalid("run: --memory-headroom", "must be between 0 and 0.9");
    }
    if (!(r.single_tokens_per_second >= 0)) {
      return Status::Invalid("run: --single-tokens-per-second", "must not be negative");
    }
    if (!r.resume_checkpoint.empty() && r.reference_params.empty()) {
      return Status::Invalid("run: --resume-from", "needs --reference");
    }
    cmd.kind = Command::kRun;
    return cmd;
  }
  if (sub == "verify") {
    VerifyOptions& v = cmd.verify;
    po::options_description d("Options");
    d.add_options()
        ("checkpoint", po::value(&v.checkpoint), "checkpoint directory (the builtin workload's)")
        ("config", po::value(&v.config), "pilot.toml (with --checkpoint)")
        ("expect", po::value(&v.expect), "results.json to compare with")
        ("set", po::value(&v.sets)->composing(), "section.key=value override")
        ("program-checkpoint", po::value(&v.program_checkpoint),
         "a program's checkpoint directory, in any format")
        ("expect-manifest", po::value(&v.expect_manifest),
         "with --program-checkpoint: an earlier report to compare the files with")
        ("json", po::bool_switch(&v.json), "print the report as JSON")
        ("out", po::value(&v.out), "also write the JSON report to FILE");
    if (WantsHelp(rest)) {
      cmd.help = HelpOf(
          "usage: pilot-runner verify --checkpoint DIR --config FILE [options]\n"
          "       pilot-runner verify --program-checkpoint DIR [--expect-manifest FILE] [options]",
          d);
      return cmd;
    }
    po::variables_map vm;
    PILOT_RETURN_IF_ERROR(Parse(d, rest, "verify", &vm));
    if (!v.program_checkpoint.empty()) {
      if (!v.checkpoint.empty() || !v.config.empty() || !v.expect.empty() || !v.sets.empty()) {
        return Status::Invalid("verify: --program-checkpoint",
                               "takes none of --checkpoint, --config, --expect and --set");
      }
    } else {
      if (!v.expect_manifest.empty()) {
        return Status::Invalid("verify: --expect-manifest", "needs --program-checkpoint");
      }
      if (v.checkpoint.empty()) {
        return Status::Invalid("verify", "the option '--checkpoint' is required but missing")
            .WithHint("or --program-checkpoint DIR for a program's own checkpoint");
      }
      if (v.config.empty()) return Status::Invalid("verify", "the option '--config' is required but missing");
    }
    cmd.kind = Command::kVerify;
    return cmd;
  }
  if (sub == "--versions") {
    for (const auto& a : rest) {
      if (a != "--json") return Status::Invalid("--versions", "unknown option " + a);
      cmd.json = true;
    }
    cmd.kind = Command::kVersions;
    return cmd;
  }
  if (sub == "--help" || sub == "-h" || sub == "help") {
    cmd.kind = Command::kHelp;
    return cmd;
  }
  if (sub == "--version") {
    cmd.kind = Command::kVersion;
    return cmd;
  }
  Status s = Status::Invalid("pilot-runner", "unknown command \"" + sub + "\"");
  if (auto m = ClosestMatch(sub, {"run", "verify", "--versions", "--help", "--version"})) {
    s = s.WithHint("did you mean " + *m + "?");
  }
  return s;
}

}  // namespace pilot::runner
