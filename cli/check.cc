// pilot check CONFIG: validate a pilot.toml exactly as a submission would,
// then print the resolved configuration.
#include <filesystem>
#include <iostream>
#include <optional>

#include "cli/options.h"
#include "core/base/utf8.h"
#include "core/config/config.h"
#include "core/config/config_schema.h"
#include "core/config/load.h"
#include "core/config/site_check.h"
#include "cli/verdict_store.h"

namespace pilot::cli {

namespace {

// The environment as a submission from here would see it. Outside a job
// $SLURM_SUBMIT_DIR is what sbatch would set (the current directory) and
// $SLURM_JOB_ID, not known before submission, stays as written.
EnvLookup CheckEnv() {
  EnvLookup process = ProcessEnv();
  return [process](const std::string& name) -> std::optional<std::string> {
    if (std::optional<std::string> v = process(name)) return v;
    if (name == "SLURM_SUBMIT_DIR") {
      std::error_code ec;
      const std::filesystem::path cwd = std::filesystem::current_path(ec);
      if (!ec) return cwd.string();
    }
    if (name == "SLURM_JOB_ID") return "$SLURM_JOB_ID";
    return std::nullopt;
  };
}

}  // namespace

int RunCheck(const Invocation& inv) {
  CommandLine cl(
      "pilot check [--set KEY=VALUE]... [--json] [--no-expand] [--policy FILE] CONFIG\n"
      "       pilot check --list-keys",
      "Validate CONFIG (a pilot.toml) with the rules a submission uses and print\n"
      "the resolved configuration; values not in the file are marked (default).\n"
      "The [container] keys are checked against the site's policy too, where it is read.\n"
      "Exit 0 when the config is valid, 2 with one FILE:LINE message when not.");
  cl.options.add_options()(
      "set", po::value<std::vector<std::string>>()->value_name("KEY=VALUE")->composing(),
      "override section.key with a TOML value (bare words are strings); repeatable")(
      "json", po::bool_switch(), "print the resolved config as JSON")(
      "no-expand", po::bool_switch(), "check $VARIABLE names in paths without expanding them")(
      "list-keys", po::bool_switch(), "print every known key, one section.key a line")(
      "policy", PolicyValue(), PolicyHelp("the container runtimes and mounts it allows").c_str());
  cl.hidden.add_options()("config", po::value<std::string>(), "pilot.toml to check");
  cl.positional.add("config", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;

  if (vm["list-keys"].as<bool>()) {
    for (const std::string& key : KnownConfigKeys()) inv.out << key << "\n";
    return kExitOk;
  }
  if (!vm.count("config")) return UsageError(inv, "missing CONFIG (a pilot.toml)");

  LoadOptions opts;
  if (vm.count("set")) opts.overrides = vm["set"].as<std::vector<std::string>>();
  opts.expand_paths = !vm["no-expand"].as<bool>();
  opts.env = CheckEnv();
  const std::string path = vm["config"].as<std::string>();
  Result<Config> config = LoadConfig(path, opts);
  if (!config.ok()) {
    inv.err << config.status().ToString() << "\n";
    return kExitUsage;
  }
  // What the site allows (the submission checks the same): an unreadable
  // policy is an error only when named with --policy.
  const std::string policy_flag = vm["policy"].as<std::string>();
  Result<Policy> site = LoadCliPolicy(policy_flag);
  if (!site.ok()) {
    if (!policy_flag.empty()) {
      inv.err << site.status().ToString() << "\n";
      return kExitUsage;
    }
    inv.err << "pilot: check: the site's policy was not read (" << VisibleText(site.status().Message())
            << "): the [container] keys are checked against it at submission\n";
  } else if (Status s = site->path.empty() ? Status::Ok()  // none installed: nothing to check against
                                            : CheckConfigAgainstSite(*config, site->container);
             !s.ok()) {
    inv.err << VisibleText(s.ToString()) << "\n";
    return kExitUsage;
  }
  // A config's values are its author's bytes (and the environment's, in
  // expanded paths): shown inert.
  inv.out << (vm["json"].as<bool>() ? VisibleJsonText(ConfigToJson(*config))
                                     : VisibleText(ConfigToTable(*config), Newlines::kKeep));
  return kExitOk;
}

}  // namespace pilot::cli
