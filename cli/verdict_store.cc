#include "cli/verdict_store.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "job/env_names.h"
#include "job/state_layout.h"

namespace pilot::cli {

Result<Policy> LoadCliPolicy(const std::string& flag_value) {
  if (!flag_value.empty()) return LoadPolicy(flag_value);
  if (const char* env = std::getenv(job::kUserPolicy); env != nullptr && *env != '\0') {
    return LoadPolicy(env);
  }
  return LoadPolicy(DefaultPolicyPath(), /*missing_ok=*/true);
}

std::optional<int> OpenStore(const Invocation& inv, const std::string& policy_flag, Store* out) {
  Result<Policy> policy = LoadCliPolicy(policy_flag);
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  out->policy = std::move(policy).value();
  Result<std::vector<StoredVerdict>> verdicts = ListStoredVerdicts(out->policy.state_dir, &out->skipped);
  if (!verdicts.ok()) {
    inv.err << verdicts.status().ToString() << "\n";
    return kExitNo;
  }
  out->verdicts = std::move(verdicts).value();
  return std::nullopt;
}

Result<std::vector<StoredVerdict>> ListStoredVerdicts(const std::string& state_dir,
                                                      std::vector<std::string>* skipped) {
  namespace fs = std::filesystem;
  std::vector<StoredVerdict> out;
  const fs::path dir = job::StateLayout(state_dir).VerdictsDir();
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::IoError(dir.string(), ec.message());
  for (const fs::directory_entry& e : it) {
    const std::optional<int64_t> job_id =
        job::StateLayout::JobOfVerdictFile(e.path().filename().string());
    if (!job_id) continue;
    Result<Verdict> v = ReadVerdict(e.path().string());
    if (!v.ok()) {
      if (skipped != nullptr) skipped->push_back(v.status().Message());
      continue;
    }
    out.push_back({*job_id, e.path().string(), std::move(v).value()});
  }
  std::sort(out.begin(), out.end(),
            [](const StoredVerdict& a, const StoredVerdict& b) { return a.job_id < b.job_id; });
  return out;
}

std::string CallerName() {
  if (struct passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return std::to_string(getuid());
}

}  // namespace pilot::cli
