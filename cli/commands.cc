#include "cli/commands.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <exception>

#include "cli/visible_output.h"
#include "core/base/status.h"
#include "core/base/strings.h"
#include "pilot/version.h"

namespace pilot::cli {

// One line per subcommand: X(name, function, summary). The function is
// defined in cli/<name>.cc; `pilot --help` lists the commands in this order.
#define PILOT_COMMANDS(X)                                                        \
  X("check", RunCheck, "validate a pilot.toml and print the resolved config")    \
  X("verdict", RunVerdict, "show a pilot job's verdict and check its signature") \
  X("verify-verdict", RunVerifyVerdict, "check a copied verdict's Ed25519 signature offline") \
  X("list", RunList, "list stored verdicts")                                     \
  X("keygen", RunKeygen, "create the verdict signing keys (root)")                \
  X("flush", RunFlush, "post the verdicts queued in the outbox (root)")                         \
  X("plan", RunPlan, "what-if table: memory fit, throughput and budget per GPU type")          \
  X("report", RunReport, "write a self-contained HTML report with plots of a pilot")            \
  X("grant", RunGrant, "create the Slurm reservation a GO verdict allows (root)")            \
  X("explain", RunExplain, "why the controller refused a change to a job bound to a grant")   \
  X("run", RunRun, "submit the run a pilot's grant binds: its program.command, not a script") \
  X("doctor", RunDoctor, "check what this node needs to run a pilot, each missing piece with its fix")

#define PILOT_DECLARE_COMMAND(name, fn, summary) int fn(const Invocation&);
PILOT_COMMANDS(PILOT_DECLARE_COMMAND)
#undef PILOT_DECLARE_COMMAND

const std::vector<Command>& Commands() {
#define PILOT_COMMAND_ENTRY(name, fn, summary) Command{name, summary, &fn},
  static const std::vector<Command> kCommands = {PILOT_COMMANDS(PILOT_COMMAND_ENTRY)};
#undef PILOT_COMMAND_ENTRY
  return kCommands;
}

namespace {

namespace po = boost::program_options;

po::options_description GlobalOptions() {
  po::options_description d("Options");
  d.add_options()("help,h", "show this help and exit")("version,V", "print the version and exit");
  return d;
}

void PrintHelp(std::ostream& out) {
  out << "usage: pilot [--help] [--version] COMMAND [ARGS...]\n\n"
         "Prove a PyTorch training run with a short pilot before a long reservation\n"
         "is granted: check pilot configs, read verdicts, manage the verdict store.\n\n"
         "Commands:\n";
  size_t width = 4;
  for (const Command& c : Commands()) width = std::max(width, std::string(c.name).size());
  auto row = [&](const std::string& name, const std::string& summary) {
    out << "  " << name << std::string(width + 3 - name.size(), ' ') << summary << "\n";
  };
  for (const Command& c : Commands()) row(c.name, c.summary);
  row("help", "show the help of pilot or of a command");
  out << "\n"
      << GlobalOptions() << "\nRun 'pilot COMMAND --help' for a command's options. See pilot(1).\n";
}

const Command* Find(const std::string& name) {
  for (const Command& c : Commands()) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

int UnknownCommand(const std::string& name, std::ostream& err) {
  std::vector<std::string> names = {"help"};
  for (const Command& c : Commands()) names.push_back(c.name);
  Status s = Status::Invalid("unknown command '" + name + "'");
  if (auto m = ClosestMatch(name, names)) {
    s = s.WithHint("did you mean '" + *m + "'?");
  } else {
    s = s.WithHint("run 'pilot --help' for the list of commands");
  }
  err << s.ToString() << "\n";
  return kExitUsage;
}

int Dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Global options are those before the command; everything after the
  // command belongs to it (so `pilot check --help` is the command's help).
  size_t i = 0;
  while (i < args.size() && StartsWith(args[i], "-")) ++i;
  po::variables_map vm;
  try {
    std::vector<std::string> global(args.begin(), args.begin() + static_cast<long>(i));
    po::store(po::command_line_parser(global).options(GlobalOptions()).run(), vm);
  } catch (const po::error& e) {
    err << Status::Invalid(e.what()).WithHint("see 'pilot --help'").ToString() << "\n";
    return kExitUsage;
  }
  if (vm.count("version")) {
    out << "pilot " << PILOT_VERSION_STRING << "\n";
    return kExitOk;
  }
  if (vm.count("help")) {
    PrintHelp(out);
    return kExitOk;
  }
  if (i == args.size()) {
    PrintHelp(err);
    return kExitUsage;
  }
  std::string name = args[i];
  std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());
  if (name == "help") {
    if (rest.empty() || rest[0] == "--help" || rest[0] == "-h") {
      PrintHelp(out);
      return kExitOk;
    }
    if (rest.size() > 1) {
      err << Status::Invalid("help", "expected at most one command name").ToString() << "\n";
      return kExitUsage;
    }
    name = rest[0];
    rest = {"--help"};
  }
  const Command* cmd = Find(name);
  if (cmd == nullptr) return UnknownCommand(name, err);
  return cmd->run(Invocation{name, rest, out, err});
}

}  // namespace

int Main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  // Every byte out goes through VisibleText: no text read from a verdict,
  // results or a message can act on the terminal (cli/visible_output.h).
  VisibleStreamBuf out_buf(out.rdbuf()), err_buf(err.rdbuf());
  std::ostream visible_out(&out_buf), visible_err(&err_buf);
  int rc = kExitInternal;
  try {
    rc = Dispatch(args, visible_out, visible_err);
  } catch (const std::exception& e) {
    visible_err << "pilot: internal error: " << e.what() << "\n";
  } catch (...) {
    visible_err << "pilot: internal error: unknown exception\n";
  }
  visible_err.flush();
  visible_out.flush();
  if (!visible_out) out.setstate(std::ios::badbit);
  return rc;
}

}  // namespace pilot::cli
