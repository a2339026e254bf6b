// Program pins: the request, the default script, the JSON that travels
// between the plugin, the prolog and its child. The walks and git's and the
// hub cache's layouts are in pin_sources.cc; the summary compared between
// submit and job start in core/records/lock.cc.
#include "job/pins.h"

#include <sys/stat.h>

#include <chrono>
#include <climits>
#include <cstdlib>

#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "job/pin_walk.h"
#include "job/safe_read.h"

namespace pilot::job {
namespace {

// `path` with links resolved (the base folders are the user's choice);
// `path` itself when it does not resolve (the walk then names the error).
std::string Real(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return path;
  return buf;
}

// The default pin: the first of the command's first two words that names
// a regular file below the workdir ("python3 train.py" -> train.py).
std::vector<std::string> DefaultPins(const PinRequest& req) {
  for (size_t i = 0; i < req.command.size() && i < 2; ++i) {
    std::string word = req.command[i];
    while (StartsWith(word, "./")) word = word.substr(2);
    if (word.empty() || word.front() == '-' || !PinPathProblem(word).empty()) continue;
    struct stat st {};
    Result<UniqueFd> fd = OpenBeneath(req.workdir, word, &st);
    if (fd.ok() && S_ISREG(st.st_mode)) return {word};
  }
  return {};
}

}  // namespace

PinRequest PinRequestFor(const Config& cfg, const std::string& submit_dir,
                         const std::string& hub_cache) {
  PinRequest req;
  if (!cfg.IsProgram()) return req;
  req.workdir = cfg.program.workdir.empty() ? submit_dir : cfg.program.workdir;
  req.pins = cfg.program.pin;
  req.command = cfg.program.command;
  req.hub_cache = hub_cache;
  req.hub_models = cfg.program.hub_models;
  req.hub_datasets = cfg.program.hub_datasets;
  return req;
}

bool HasPins(const PinRequest& req) {
  return !req.workdir.empty() && (!req.pins.empty() || !req.command.empty() ||
                                  !req.hub_models.empty() || !req.hub_datasets.empty());
}

std::string HubCacheFolder(const EnvLookup& env, const std::string& home) {
  auto get = [&](const char* name) -> std::string {
    std::optional<std::string> v = env(name);
    return v && !v->empty() ? *v : "";
  };
  if (std::string v = get("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = get("HF_HOME"); !v.empty()) return v + "/hub";
  if (std::string v = get("XDG_CACHE_HOME"); !v.empty()) return v + "/huggingface/hub";
  return home.empty() ? "" : home + "/.cache/huggingface/hub";
}

std::vector<LockPin> ComputePins(const PinRequest& req_in, const PinLimits& limits) {
  PinRequest req = req_in;
  std::vector<LockPin> out;
  if (req.workdir.empty()) return out;
  req.workdir = Real(req.workdir);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(limits.seconds * 1000));
  const std::vector<std::string> pins = req.pins.empty() ? DefaultPins(req) : req.pins;
  for (const std::string& name : pins) {
    out.push_back(PinPath(req.workdir, name, limits, deadline));
  }
  const std::string cache = req.hub_cache.empty() ? "" : Real(req.hub_cache);
  for (const std::string& ref : req.hub_models) {
    out.push_back(PinHub(cache, "hub_model", ref, limits, deadline));
  }
  for (const std::string& ref : req.hub_datasets) {
    out.push_back(PinHub(cache, "hub_dataset", ref, limits, deadline));
  }
  return out;
}

std::string SummaryToJson(const std::map<std::string, std::string>& summary) {
  Json j = Json::object();
  for (const auto& [k, v] : summary) j[k] = v;
  return DumpJson(j);
}

Result<std::map<std::string, std::string>> ParseSummary(const std::string& text) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, "the pins recorded at submit", 1 << 20));
  if (!j.is_object()) return Status::Corrupt("the pins recorded at submit", "not a JSON object");
  std::map<std::string, std::string> m;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) {
      return Status::Corrupt("the pins recorded at submit", it.key() + ": not a string");
    }
    m[it.key()] = it.value().get<std::string>();
  }
  return m;
}

std::string PinRequestToJson(const PinRequest& req) {
  Json j = Json::object();
  j["workdir"] = req.workdir;
  j["pins"] = req.pins;
  j["command"] = req.command;
  j["hub_cache"] = req.hub_cache;
  j["hub_models"] = req.hub_models;
  j["hub_datasets"] = req.hub_datasets;
  return DumpJson(j);
}

Result<PinRequest> ParsePinRequest(const std::string& text) {
  const std::string label = "pin request";
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, 1 << 20));
  PinRequest req;
  try {
    req.workdir = j.at("workdir").get<std::string>();
    req.pins = j.at("pins").get<std::vector<std::string>>();
    req.command = j.at("command").get<std::vector<std::string>>();
    req.hub_cache = j.at("hub_cache").get<std::string>();
    req.hub_models = j.at("hub_models").get<std::vector<std::string>>();
    req.hub_datasets = j.at("hub_datasets").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return Status::Corrupt(label, e.what());
  }
  return req;
}

}  // namespace pilot::job
