#include "supervisor/program/observe.h"

#include <map>
#include <set>

#include "core/base/strings.h"
#include "supervisor/program/judge.h"

namespace pilot::supervisor {
namespace {

// The last "saved" line of step k per rank (a program that saves on a
// schedule may say it more than once), or the first "restored" one.
std::map<int, const StateLine*> StatesOf(const GroupResult& g, const std::string& when, int64_t k) {
  std::map<int, const StateLine*> out;
  for (const StateLine& s : g.states) {
    if (s.when != when || s.step != k || !s.rank) continue;
    if (when == "saved") out[*s.rank] = &s;
    else out.emplace(*s.rank, &s);
  }
  return out;
}

std::string RanksPhrase(const std::vector<int>& ranks, int all) {
  if (all > 1 && static_cast<int>(ranks.size()) == all) return "every rank";
  std::vector<std::string> r;
  for (int x : ranks) r.push_back(std::to_string(x));
  return (ranks.size() == 1 ? "rank " : "ranks ") + Join(r, ", ");
}

std::string ListPhrase(const std::vector<std::string>& items) {
  if (items.size() <= 1) return items.empty() ? "" : items.front();
  std::vector<std::string> head(items.begin(), items.end() - 1);
  return Join(head, ", ") + " and " + items.back();
}

}  // namespace

std::vector<StepMemory> MemorySteps(const GroupResult& g, int rank) {
  std::vector<StepMemory> out;
  for (const auto& [step, r] : StepsOf(g, rank)) {
    StepMemory m;
    m.step = step;
    m.peak_allocated_bytes = r.peak_allocated_bytes.value_or(-1);
    m.peak_reserved_bytes = r.peak_reserved_bytes.value_or(-1);
    m.peak_rss_bytes = r.peak_rss_bytes.value_or(-1);
    out.push_back(m);
  }
  return out;
}

ProgramPrecision PrecisionOf(const GroupResult& g, int rank) {
  ProgramPrecision p;
  std::map<std::string, int64_t> autocasts;
  for (const auto& [step, r] : StepsOf(g, rank)) {
    ++p.steps;
    if (!r.autocast.empty() || !r.param_dtype.empty() || r.grad_scaler) p.reported = true;
    if (!r.autocast.empty()) {
      ++p.autocast_steps;
      ++autocasts[r.autocast];
      if (!r.autocast_device.empty()) p.autocast_device = r.autocast_device;
    }
    if (!r.param_dtype.empty()) p.param_dtype = r.param_dtype;
    if (r.grad_scaler.value_or(false)) p.grad_scaler = true;
  }
  int64_t most = 0;
  for (const auto& [dtype, n] : autocasts) {
    if (n > most) {
      most = n;
      p.autocast = dtype;
    }
  }
  return p;
}

std::string PrecisionWord(const ProgramPrecision& p) {
  auto word = [](const std::string& dtype) -> std::string {
    if (dtype == "bfloat16") return "bf16";
    if (dtype == "float16") return "fp16";
    if (dtype == "float32") return "fp32";
    return "";
  };
  if (!p.autocast.empty() && !word(p.autocast).empty()) return word(p.autocast);
  return word(p.param_dtype);
}

std::optional<ProgramEnvironment> EnvironmentOf(const GroupResult& g) {
  const EnvLine* pick = nullptr;
  for (const EnvLine& e : g.envs) {
    if (pick == nullptr || (e.rank.value_or(0) == 0 && pick->rank.value_or(0) != 0)) pick = &e;
  }
  if (pick == nullptr) return std::nullopt;
  ProgramEnvironment env = pick->env;
  // The packages of the same rank (the first process of it to send them).
  for (const PackagesLine& p : g.packages) {
    if (p.rank.value_or(0) != pick->rank.value_or(0)) continue;
    for (const auto& [name, version] : p.distributions) {
      if (env.distributions.size() < kMaxDistributions) env.distributions.emplace(name, version);
    }
    for (const auto& [name, from] : p.extensions) {
      if (env.extensions.size() < kMaxExtensions) env.extensions.emplace(name, from);
    }
  }
  return env;
}

std::vector<StateComponentDiff> CompareState(const GroupResult& reference, const GroupResult& resumed,
                                             int64_t k) {
  const auto saved = StatesOf(reference, "saved", k);
  const auto restored = StatesOf(resumed, "restored", k);
  std::vector<StateComponentDiff> out;
  for (const auto& [rank, s] : saved) {
    auto it = restored.find(rank);
    if (it == restored.end()) continue;
    const StateLine& r = *it->second;
    std::set<std::string> names;
    for (const auto& [name, c] : s->components) names.insert(name);
    for (const auto& [name, c] : r.components) names.insert(name);
    for (const std::string& name : names) {
      StateComponentDiff d;
      d.rank = rank;
      d.component = name;
      if (auto a = s->components.find(name); a != s->components.end()) {
        d.saved = a->second.digest;
        d.saved_detail = a->second.detail;
      }
      if (auto b = r.components.find(name); b != r.components.end()) {
        d.restored = b->second.digest;
        d.restored_detail = b->second.detail;
      }
      // Python's and NumPy's global generators start from the OS's entropy
      // in every process: when neither process seeded or drew from them
      // (the probe says "untouched"), they are not part of the state.
      const bool untouched = d.saved_detail.find("untouched true") != std::string::npos &&
                             d.restored_detail.find("untouched true") != std::string::npos;
      d.equal = (!d.saved.empty() && d.saved == d.restored) || untouched;
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::string ComponentWords(const std::string& c) {
  static const std::map<std::string, std::string> kWords = {
      {"model", "model"},
      {"optimizer", "optimizer state"},
      {"optimizer.hyper", "optimizer hyper-parameters"},
      {"scheduler", "LR scheduler"},
      {"scaler", "gradient scaler"},
      {"rng.python", "Python RNG state"},
      {"rng.numpy", "NumPy RNG state"},
      {"rng.torch", "torch CPU RNG state"},
      {"rng.cuda", "CUDA RNG state"},
      {"data", "data position"},
  };
  auto it = kWords.find(c);
  return it == kWords.end() ? c : it->second;
}

std::string StateDiagnosis(const std::vector<StateComponentDiff>& diffs) {
  if (diffs.empty()) return "";
  std::set<int> all_ranks;
  for (const StateComponentDiff& d : diffs) all_ranks.insert(d.rank);
  const int ranks = static_cast<int>(all_ranks.size());
  // Per component (in the order first seen): the ranks where it differs,
  // where one side lacks it, and one example of the details.
  struct Seen {
    std::vector<int> differ, missing;
    std::string example;
  };
  std::vector<std::string> order;
  std::map<std::string, Seen> seen;
  for (const StateComponentDiff& d : diffs) {
    if (!seen.contains(d.component)) order.push_back(d.component);
    Seen& s = seen[d.component];
    if (d.saved.empty() || d.restored.empty()) {
      // A generator a process imported on one side only (NumPy while
      // loading a checkpoint) is no finding.
      if (d.component.rfind("rng.", 0) == 0) continue;
      s.missing.push_back(d.rank);
    } else if (!d.equal) {
      s.differ.push_back(d.rank);
      if (s.example.empty() && d.saved_detail != d.restored_detail && !d.saved_detail.empty()) {
        s.example = d.restored_detail + ", saved " + d.saved_detail;
      }
    }
  }
  std::vector<std::string> bad, good, unknown;
  for (const std::string& c : order) {
    const Seen& s = seen[c];
    if (!s.differ.empty()) {
      bad.push_back(ComponentWords(c) + " (" + RanksPhrase(s.differ, ranks) +
                    (s.example.empty() ? "" : ": " + s.example) + ")");
    } else if (!s.missing.empty()) {
      unknown.push_back(ComponentWords(c));
    } else {
      good.push_back(ComponentWords(c));
    }
  }
  std::string out;
  if (!bad.empty()) {
    out = "not restored: " + Join(bad, ", ");
    if (!good.empty()) out += "; restored: " + Join(good, ", ");
  } else if (!good.empty()) {
    out = ListPhrase(good) + " restored; the losses still differ: state outside them (what "
          "slurm_pilot.saved and slurm_pilot.restored were not given)";
  }
  if (!unknown.empty()) {
    out += std::string(out.empty() ? "" : "; ") + "not compared (fingerprinted on one side only): " +
           Join(unknown, ", ");
  }
  return out;
}

}  // namespace pilot::supervisor
