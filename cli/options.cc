#include "cli/options.h"

#include "core/base/status.h"

namespace pilot::cli {

void PrintCommandHelp(const Invocation& inv, const CommandLine& cl) {
  inv.out << "usage: " << cl.usage << "\n";
  if (!cl.description.empty()) inv.out << "\n" << cl.description << "\n";
  inv.out << "\n" << cl.options << "\nSee pilot(1) for details.\n";
}

po::typed_value<std::string>* PolicyValue() { return po::value<std::string>()->default_value(""); }

std::string PolicyHelp(const std::string& read_for) {
  return "site policy " + (read_for.empty() ? "" : "for " + read_for + " ") +
         "(default: $PILOT_POLICY, else the installed pilot.conf)";
}

int UsageError(const Invocation& inv, const std::string& message) {
  inv.err << Status::Invalid(inv.name, message)
                 .WithHint("see 'pilot " + inv.name + " --help'")
                 .ToString()
          << "\n";
  return kExitUsage;
}

std::optional<int> ParseCommandArgs(const Invocation& inv, CommandLine& cl, po::variables_map& vm) {
  cl.options.add_options()("help,h", "show this help and exit");
  po::options_description all;
  all.add(cl.options).add(cl.hidden);
  try {
    po::store(po::command_line_parser(inv.args).options(all).positional(cl.positional).run(), vm);
    if (vm.count("help")) {
      PrintCommandHelp(inv, cl);
      return kExitOk;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return UsageError(inv, e.what());
  }
  return std::nullopt;
}

}  // namespace pilot::cli
