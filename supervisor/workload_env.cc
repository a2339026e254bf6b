#include "supervisor/workload_env.h"

#include <algorithm>
#include <string_view>

#include "core/base/strings.h"
#include "job/env_names.h"

namespace pilot::supervisor {
namespace {

constexpr std::string_view kExact[] = {
    "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL",
    "GLOO_SOCKET_IFNAME",   "OMP_NUM_THREADS",      "MKL_NUM_THREADS",     "TZ",
    "LANG",                 "TMPDIR",               "PILOT_MASTER_PORT"};
constexpr std::string_view kPrefixes[] = {"SLURM_", "NCCL_", "LC_"};
constexpr std::string_view kTestPrefix = "PILOT_RUNNER_TEST_";
constexpr std::string_view kPilotPrefix = "SLURM_PILOT_";

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool Allowed(std::string_view name) {
  if (StartsWith(name, kPilotPrefix)) return false;  // ours to set
  for (std::string_view e : kExact) {
    if (name == e) return true;
  }
  for (std::string_view p : kPrefixes) {
    if (StartsWith(name, p)) return true;
  }
  return false;
}

}  // namespace

WorkloadEnv BuildWorkloadEnv(const WorkloadEnvInput& in) {
  WorkloadEnv out;
  out.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + (in.home.empty() ? "/" : in.home),
             "USER=" + in.user, "LOGNAME=" + in.user,
             std::string(job::kEnvActive) + "=" + std::to_string(in.job_id),
             std::string(job::kEnvInstance) + "=" + in.instance};
  std::vector<std::string> seen;
  for (const std::string& kv : in.job_env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = kv.substr(0, eq);
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;  // first wins
    seen.push_back(name);
    if (StartsWith(name, kTestPrefix)) {
      if (in.allow_test_switches) {
        out.env.push_back(kv);
        out.test_switches.push_back(name);
      } else {
        out.dropped.push_back(name);
      }
      continue;
    }
    if (Allowed(name)) {
      out.env.push_back(kv);
      out.passed.push_back(name);
    } else {
      out.dropped.push_back(name);
    }
  }
  return out;
}

std::string EnvValue(const std::vector<std::string>& env, std::string_view name) {
  for (const std::string& kv : env) {
    if (kv.size() > name.size() && kv[name.size()] == '=' && StartsWith(kv, name)) {
      return kv.substr(name.size() + 1);
    }
  }
  return "";
}

void SetEnvValue(std::vector<std::string>* env, std::string_view name, std::string_view value) {
  std::string entry = std::string(name) + "=" + std::string(value);
  for (std::string& kv : *env) {
    if (kv.size() > name.size() && kv[name.size()] == '=' && StartsWith(kv, name)) {
      kv = std::move(entry);
      return;
    }
  }
  env->push_back(std::move(entry));
}

std::string JobGpuList(const Lock& lock, const std::vector<std::string>& job_env) {
  if (lock.job.gpus) return *lock.job.gpus;
  return EnvValue(job_env, "SLURM_JOB_GPUS");
}

std::vector<std::string> SplitGpuList(std::string_view list) {
  std::vector<std::string> out;
  while (!Trim(list).empty()) {
    const size_t comma = list.find(',');
    out.emplace_back(Trim(list.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace pilot::supervisor
