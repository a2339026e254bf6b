#include "core/decide/ptrace_check.h"

#include <string>

#include "core/decide/checks.h"

namespace pilot {

std::optional<Check> PtraceScopeCheck(const Results* results, const Policy& policy) {
  if (results == nullptr || !results->supervisor) return std::nullopt;
  const int scope = results->supervisor->ptrace_scope;
  Check c;
  c.name = std::string(CheckName("ptrace_scope"));
  c.verified_by = VerifiedBy::kSupervisor;
  c.threshold = "kernel.yama.ptrace_scope >= 1";
  if (scope >= 1) {
    c.status = CheckStatus::kPass;
    c.measured = "kernel.yama.ptrace_scope = " + std::to_string(scope);
    c.detail = "only root and the workload's own ancestors could attach to it while it ran";
    return c;
  }
  c.measured = scope < 0 ? std::string("no Yama (kernel.yama.ptrace_scope absent)")
                         : "kernel.yama.ptrace_scope = " + std::to_string(scope);
  c.detail =
      "another process of the job's user on this node (a login shell, another job) "
      "could attach to the workload with ptrace and change what it reports; set "
      "kernel.yama.ptrace_scope = 1 on pilot nodes";
  if (policy.require_ptrace_scope) {
    c.status = CheckStatus::kFail;
    c.detail += " (the site requires it: require_ptrace_scope)";
  } else {
    c.status = CheckStatus::kWarn;
    c.detail += " (require_ptrace_scope = false: named, not failed)";
  }
  return c;
}

}  // namespace pilot
