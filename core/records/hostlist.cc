// Host lists and rank variables for the node stage.
#include "core/records/hostlist.h"

#include <charconv>

namespace pilot {
namespace {

constexpr size_t kMaxHosts = 100000;

Status Bad(const std::string& list, const std::string& why) {
  return Status::Invalid("host list \"" + list + "\"", why);
}

// Splits at commas outside brackets.
Result<std::vector<std::string>> SplitTop(const std::string& list) {
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return Bad(list, "']' without '['");
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
      continue;
    }
    cur.push_back(c);
  }
  if (depth != 0) return Bad(list, "'[' without ']'");
  parts.push_back(cur);
  return parts;
}

bool ParseUint(const std::string& s, uint64_t* v) {
  if (s.empty() || s.size() > 18) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size();
}

// Expands one name with zero or more bracket groups into `out`.
Status ExpandOne(const std::string& list, const std::string& name, std::vector<std::string>* out) {
  const size_t open = name.find('[');
  if (open == std::string::npos) {
    if (name.find(']') != std::string::npos) return Bad(list, "']' without '['");
    out->push_back(name);
    return Status::Ok();
  }
  const size_t close = name.find(']', open);
  if (close == std::string::npos) return Bad(list, "'[' without ']'");
  const std::string prefix = name.substr(0, open);
  const std::string body = name.substr(open + 1, close - open - 1);
  const std::string rest = name.substr(close + 1);
  if (body.empty()) return Bad(list, "empty brackets in \"" + name + "\"");
  std::vector<std::string> heads;
  size_t start = 0;
  while (start <= body.size()) {
    size_t comma = body.find(',', start);
    if (comma == std::string::npos) comma = body.size();
    const std::string item = body.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) return Bad(list, "empty range in \"" + name + "\"");
    const size_t dash = item.find('-');
    const std::string lo_s = item.substr(0, dash);
    const std::string hi_s = dash == std::string::npos ? lo_s : item.substr(dash + 1);
    uint64_t lo = 0, hi = 0;
    if (!ParseUint(lo_s, &lo) || !ParseUint(hi_s, &hi)) {
      return Bad(list, "\"" + item + "\" is not a number or a range a-b");
    }
    if (hi < lo) return Bad(list, "range \"" + item + "\" ends before it starts");
    if (hi - lo >= kMaxHosts) return Bad(list, "more than 100000 hosts");
    const size_t width = lo_s.size() > 1 && lo_s[0] == '0' ? lo_s.size() : 0;
    for (uint64_t v = lo; v <= hi; ++v) {
      std::string num = std::to_string(v);
      if (num.size() < width) num.insert(0, width - num.size(), '0');
      heads.push_back(prefix + num);
      if (heads.size() > kMaxHosts) return Bad(list, "more than 100000 hosts");
    }
  }
  std::vector<std::string> tails;
  PILOT_RETURN_IF_ERROR(ExpandOne(list, rest, &tails));
  for (const auto& h : heads) {
    for (const auto& t : tails) {
      out->push_back(h + t);
      if (out->size() > kMaxHosts) return Bad(list, "more than 100000 hosts");
    }
  }
  return Status::Ok();
}

Result<int> IntVar(const EnvLookup& env, const std::string& name, int lo, int hi) {
  std::optional<std::string> v = env(name);
  if (!v) return Status::NotFound(name, "not set");
  uint64_t n = 0;
  if (!ParseUint(*v, &n) || n < static_cast<uint64_t>(lo) || n > static_cast<uint64_t>(hi)) {
    return Status::Invalid(name, "\"" + *v + "\" is not a number in [" + std::to_string(lo) + ", " +
                                     std::to_string(hi) + "]");
  }
  return static_cast<int>(n);
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(const std::string& list) {
  if (list.empty()) return Bad(list, "empty");
  PILOT_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitTop(list));
  std::vector<std::string> hosts;
  for (const auto& p : parts) {
    if (p.empty()) return Bad(list, "empty host name");
    PILOT_RETURN_IF_ERROR(ExpandOne(list, p, &hosts));
  }
  for (const auto& h : hosts) {
    if (h.empty()) return Bad(list, "empty host name");
  }
  return hosts;
}

int MasterPortForJob(uint64_t job_id) { return kPortBase + static_cast<int>(job_id % kPortSpan); }

bool InSlurmStep(const EnvLookup& env) {
  return env("SLURM_STEP_ID").has_value() && env("SLURM_NTASKS").has_value() &&
         env("SLURM_PROCID").has_value();
}

Result<RankInfo> RankFromEnv(const EnvLookup& env) {
  RankInfo r;
  constexpr int kMax = 1 << 20;
  if (env("PILOT_RANK")) {
    r.launcher = "local";
    PILOT_ASSIGN_OR_RETURN(r.world_size, IntVar(env, "PILOT_WORLD_SIZE", 1, kMax));
    PILOT_ASSIGN_OR_RETURN(r.rank, IntVar(env, "PILOT_RANK", 0, r.world_size - 1));
    PILOT_ASSIGN_OR_RETURN(r.local_rank, IntVar(env, "PILOT_LOCAL_RANK", 0, r.world_size - 1));
    if (env("PILOT_NODE_ID")) {
      PILOT_ASSIGN_OR_RETURN(r.node_id, IntVar(env, "PILOT_NODE_ID", 0, kMax));
    }
    if (auto a = env("PILOT_MASTER_ADDR")) r.master_addr = *a;
    PILOT_ASSIGN_OR_RETURN(r.master_port, IntVar(env, "PILOT_MASTER_PORT", 1, 65535));
    return r;
  }
  if (!InSlurmStep(env)) return Status::NotFound("rank", "neither PILOT_RANK nor an srun step");
  r.launcher = "srun";
  PILOT_ASSIGN_OR_RETURN(r.world_size, IntVar(env, "SLURM_NTASKS", 1, kMax));
  PILOT_ASSIGN_OR_RETURN(r.rank, IntVar(env, "SLURM_PROCID", 0, r.world_size - 1));
  PILOT_ASSIGN_OR_RETURN(r.local_rank, IntVar(env, "SLURM_LOCALID", 0, r.world_size - 1));
  if (env("SLURM_NODEID")) {
    PILOT_ASSIGN_OR_RETURN(r.node_id, IntVar(env, "SLURM_NODEID", 0, kMax));
  }
  std::optional<std::string> nodes = env("SLURM_STEP_NODELIST");
  if (!nodes) nodes = env("SLURM_JOB_NODELIST");
  if (!nodes) return Status::NotFound("SLURM_JOB_NODELIST", "not set in an srun step");
  PILOT_ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandHostlist(*nodes));
  r.master_addr = hosts.front();
  if (auto a = env("SLURM_LAUNCH_NODE_IPADDR")) r.launch_addr = *a;
  if (auto a = env("PILOT_MASTER_ADDR")) r.master_addr = *a;
  if (env("PILOT_MASTER_PORT")) {
    PILOT_ASSIGN_OR_RETURN(r.master_port, IntVar(env, "PILOT_MASTER_PORT", 1, 65535));
  } else {
    std::optional<std::string> job = env("SLURM_JOB_ID");
    uint64_t id = 0;
    if (!job || !ParseUint(*job, &id)) return Status::Invalid("SLURM_JOB_ID", "missing or not a number");
    r.master_port = MasterPortForJob(id);
  }
  return r;
}

}  // namespace pilot
