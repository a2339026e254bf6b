// spank_pilot_impl.so: the entry points the front part (dispatch.cc) calls,
// the per-process state, logging and the policy defaults.
#include <exception>
#include <string>
#include <vector>

#include "core/records/policy.h"
#include "spank_plugin/impl_api.h"
#include "spank_plugin/pilot_spank.h"

namespace pilot::spank {
namespace {

// Runs `fn` and turns any escaping exception into a logged SPANK error:
// nothing may unwind into Slurm's C code.
template <typename Fn>
int Guarded(const char* hook, Fn fn) {
  try {
    return fn();
  } catch (const std::exception& e) {
    LogError(std::string(hook) + ": " + e.what());
  } catch (...) {
    LogError(std::string(hook) + ": unknown exception");
  }
  return -1;
}

void TakeRequest(const pilot_request* req) {
  PluginState& st = State();
  st.request.config = req->config;
  st.request.stage = req->stage;
  st.request.out = req->out;
  st.pilot_option_seen = req->config_given != 0;
  st.stage_given = req->stage_given != 0;
  st.out_given = req->out_given != 0;
}

}  // namespace

PluginState& State() {
  static PluginState state;
  return state;
}

void ApplyPolicy(PluginArgs* args) {
  if (args->state_dir_given && args->runner_given && args->supervisor_given) return;
  Result<Policy> policy = LoadPolicy(args->policy, /*missing_ok=*/true);
  if (!policy.ok()) {
    LogError(policy.status().Message());
    return;
  }
  job::ApplyPolicyDefaults(*policy, args);
}

void LogError(const std::string& message) { slurm_error("pilot: %s", message.c_str()); }

}  // namespace pilot::spank

using pilot::spank::Guarded;
using pilot::spank::State;

extern "C" int pilot_impl_init(spank_t, int ac, char** av) {
  return Guarded("init", [&] {
    std::vector<std::string> argv(av, av + ac);
    auto args = pilot::spank::ParsePluginArgs(argv);
    if (!args.ok()) {
      pilot::spank::LogError(args.status().Message());
      return -1;
    }
    State().args = *args;
    if (spank_context() == S_CTX_REMOTE) pilot::spank::ApplyPolicy(&State().args);
    return 0;
  });
}

extern "C" int pilot_impl_submit(spank_t sp, const pilot_request* req) {
  return Guarded("init_post_opt", [&] {
    pilot::spank::TakeRequest(req);
    return pilot::spank::SubmitInitPostOpt(sp);
  });
}

extern "C" int pilot_impl_task_init_privileged(spank_t sp, const pilot_request* req) {
  return Guarded("task_init_privileged", [&] {
    pilot::spank::TakeRequest(req);
    return pilot::spank::RemoteTaskInitPrivileged(sp);
  });
}

extern "C" int pilot_impl_task_init(spank_t sp, const pilot_request* req) {
  return Guarded("task_init", [&] {
    pilot::spank::TakeRequest(req);
    return pilot::spank::RemoteTaskInit(sp);
  });
}
