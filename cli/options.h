// Shared argument parsing for `pilot` subcommands (Boost.Program_options), so
// that every subcommand answers --help, reports unknown flags and missing
// arguments in the same words and with the same exit code.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"

namespace pilot::cli {

namespace po = boost::program_options;

// A subcommand's command line. Fill `options` (shown by --help), `hidden`
// (positionals) and `positional`, then call ParseCommandArgs.
struct CommandLine {
  explicit CommandLine(std::string usage_text, std::string description_text = {})
      : usage(std::move(usage_text)), description(std::move(description_text)) {}
  std::string usage;        // after "usage: ", may hold several lines
  std::string description;  // a paragraph printed under the usage
  po::options_description options{"Options"};
  po::options_description hidden;
  po::positional_options_description positional;
};

// Parses inv.args into `vm`. Returns nullopt to go on, or the exit code to
// return at once: kExitOk after printing help (--help, -h), kExitUsage after
// printing "pilot: COMMAND: problem" and a hint (unknown flag, missing value,
// too many arguments).
std::optional<int> ParseCommandArgs(const Invocation& inv, CommandLine& cl, po::variables_map& vm);

// Prints the help of `cl` (usage, description, options).
void PrintCommandHelp(const Invocation& inv, const CommandLine& cl);

// The --policy option of every command that reads the site policy, where
// the command lists it:
//   cl.options.add_options()("policy", PolicyValue(), PolicyHelp().c_str())
// Not given, its value is "": LoadCliPolicy (cli/verdict_store.h) then
// takes $PILOT_POLICY, else the installed pilot.conf, as its help says.
po::typed_value<std::string>* PolicyValue();
// "site policy (default: ...)"; "site policy for KEY (default: ...)" for a
// command that reads one key of it (`read_for`).
std::string PolicyHelp(const std::string& read_for = "");

// "pilot: COMMAND: message" and "HINT: see 'pilot COMMAND --help'"; returns
// kExitUsage. For missing positionals and bad flag combinations.
int UsageError(const Invocation& inv, const std::string& message);

}  // namespace pilot::cli
