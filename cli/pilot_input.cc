#include "cli/pilot_input.h"

#include <filesystem>

#include "cli/verdict_store.h"

namespace pilot::cli {

Result<PilotInput> LoadPilotInput(const std::string& source, const std::string& config_flag,
                                  const std::string& policy_flag) {
  PilotInput in;
  PILOT_ASSIGN_OR_RETURN(in.policy, LoadCliPolicy(policy_flag));
  Result<HardwareCatalog> cat = LoadHardwareCatalog(in.policy.hardware_catalog);
  if (!cat.ok()) {
    return cat.status().WithHint("set hardware_catalog in the site policy (pilot.conf(5))");
  }
  in.catalog = std::move(cat).value();

  std::string config_path = config_flag;
  const bool is_job = !source.empty() && source.size() <= 12 &&
                      source.find_first_not_of("0123456789") == std::string::npos;
  if (is_job) {
    const std::string dir = in.policy.state_dir + "/jobs/" + source;
    in.label = "job " + source;
    in.results_path = dir + "/work/results.json";
    if (config_path.empty()) config_path = dir + "/config.toml";
    Result<Verdict> v = ReadVerdict(VerdictPath(in.policy.state_dir, std::stoll(source)));
    if (v.ok()) in.verdict = std::move(v).value();
  } else {
    in.label = source;
    in.results_path = source;
  }
  Result<Results> r = ReadResultsFile(in.results_path);
  if (!r.ok()) {
    Status s = r.status();
    if (is_job && s.code() == Code::kNotFound) {
      s = s.WithHint("the job wrote its results elsewhere (--pilot-out)? pass that results.json");
    }
    return s;
  }
  in.results = std::move(r).value();
  in.metrics_path =
      (std::filesystem::path(in.results_path).parent_path() / "metrics.jsonl").string();
  if (config_path.empty()) config_path = in.results.config_path;
  if (config_path.empty()) {
    in.config_error = "results.json names no config: pass --config";
    return in;
  }
  LoadOptions opts;
  opts.expand_paths = false;  // only [run] and [model] are needed
  Result<Config> c = LoadConfig(config_path, opts);
  if (c.ok()) {
    in.config = std::move(c).value();
  } else {
    in.config_error = c.status().ToString();
  }
  return in;
}

}  // namespace pilot::cli
