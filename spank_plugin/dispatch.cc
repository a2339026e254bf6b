// The symbols Slurm looks up in spank_pilot.so, and the options.
//
// This file is the whole front part of the plugin. It depends on libc only
// (no C++ library, no exceptions: see impl_api.h for why) and forwards to
// spank_pilot_impl.so, loaded from the same folder, when there is pilot work:
// a --pilot submission, or slurmstepd. The linker script spank_pilot.map
// keeps every other symbol local.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

#include "job/env_names.h"
#include "spank_plugin/impl_api.h"

// A const object at namespace scope has internal linkage in C++; declaring
// the plugin identification extern first gives SPANK_PLUGIN's definitions
// the external C linkage Slurm's loader looks up.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(pilot, 1)
}

namespace {

enum OptionId { kOptPilot = 1, kOptStage = 2, kOptOut = 3, kOptRun = 4 };

// Option values. The callbacks may run twice (from the environment Slurm
// forwards, then from the command line); the later value wins.
char g_config[4096];
char g_stage[16] = "all";
char g_out[4096];
char g_run[24];
int g_config_given = 0;
int g_run_given = 0;
int g_stage_given = 0;
int g_out_given = 0;

void* g_impl = nullptr;

bool Store(char* dst, size_t size, const char* value, const char* option) {
  size_t n = std::strlen(value);
  if (n == 0 || n >= size) {
    slurm_error("pilot: --%s: needs a value of 1 to %zu characters", option, size - 1);
    return false;
  }
  std::memcpy(dst, value, n + 1);
  return true;
}

// A job id: 1 to 18 digits, not 0.
bool ValidRun(const char* v, const char* what) {
  size_t n = std::strlen(v);
  bool ok = n >= 1 && n <= 18 && std::strspn(v, "0123456789") == n && std::strspn(v, "0") < n;
  if (!ok) slurm_error("pilot: %s: expected a pilot's job id, got \"%s\"", what, v);
  return ok;
}

int OnOption(int val, const char* optarg, int /*remote*/) {
  const char* v = optarg != nullptr ? optarg : "";
  switch (val) {
    case kOptPilot:
      if (!Store(g_config, sizeof(g_config), v, "pilot")) return -1;
      g_config_given = 1;
      return 0;
    case kOptStage:
      if (std::strcmp(v, "single") != 0 && std::strcmp(v, "node") != 0 &&
          std::strcmp(v, "all") != 0) {
        slurm_error("pilot: --pilot-stage: must be single, node or all, got \"%s\"", v);
        return -1;
      }
      Store(g_stage, sizeof(g_stage), v, "pilot-stage");
      g_stage_given = 1;
      return 0;
    case kOptOut:
      if (!Store(g_out, sizeof(g_out), v, "pilot-out")) return -1;
      g_out_given = 1;
      return 0;
    case kOptRun:
      if (!ValidRun(v, "--pilot-run") || !Store(g_run, sizeof(g_run), v, "pilot-run")) return -1;
      g_run_given = 1;
      return 0;
    default:
      return -1;
  }
}

// Slurm keeps pointers into these tables; they live as long as the plugin.
char kNamePilot[] = "pilot";
char kNameStage[] = "pilot-stage";
char kNameOut[] = "pilot-out";
char kNameRun[] = "pilot-run";
char kArgFile[] = "FILE";
char kArgStage[] = "STAGE";
char kArgDir[] = "DIR";
char kArgJob[] = "JOBID";
char kUsagePilot[] =
    "Run a pilot of the training described by FILE (pilot.toml) in place of "
    "the job's command, then verify it and issue a signed verdict. Env: PILOT_CONFIG.";
char kUsageStage[] = "Pilot stages to run: single, node or all (default all). Env: PILOT_STAGE.";
char kUsageOut[] =
    "Folder for the pilot's results, metrics and checkpoints, a relative one in the "
    "submit directory (default: the job's folder in the pilot state directory). Env: PILOT_OUT.";

char kUsageRun[] =
    "Run this job as the run piloted by job JOBID, under that pilot's grant (reservation "
    "pilot_JOBID): before its first task the node checks that the program, config, image and "
    "data are the piloted ones, and refuses the tasks otherwise. Env: PILOT_RUN.";

struct spank_option kOptions[] = {
    {kNamePilot, kArgFile, kUsagePilot, 1, kOptPilot, OnOption},
    {kNameRun, kArgJob, kUsageRun, 1, kOptRun, OnOption},
    {kNameStage, kArgStage, kUsageStage, 1, kOptStage, OnOption},
    {kNameOut, kArgDir, kUsageOut, 1, kOptOut, OnOption},
};

// Plugstack arguments are checked here too, so a typo is reported by every
// Slurm command, not only by those that load the implementation.
bool ArgsValid(int ac, char** av) {
  static const char* const kKeys[] = {"state_dir=", "runner=", "supervisor=", "policy="};
  for (int i = 0; i < ac; ++i) {
    bool known = false;
    for (const char* key : kKeys) {
      size_t n = std::strlen(key);
      if (std::strncmp(av[i], key, n) == 0 && av[i][n] == '/') known = true;
    }
    if (!known) {
      slurm_error("pilot: plugstack.conf: \"%s\": expected state_dir=, runner=, supervisor= or policy= "
                  "with an absolute path",
                  av[i]);
      return false;
    }
  }
  return true;
}

// Loads spank_pilot_impl.so from this object's folder and initialises it.
bool LoadImpl(spank_t sp, int ac, char** av) {
  if (g_impl != nullptr) return true;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&LoadImpl), &info) == 0 || info.dli_fname == nullptr) {
    slurm_error("pilot: cannot locate spank_pilot.so");
    return false;
  }
  static const char kImpl[] = "spank_pilot_impl.so";
  char path[4096];
  const char* slash = std::strrchr(info.dli_fname, '/');
  size_t dir = slash != nullptr ? static_cast<size_t>(slash - info.dli_fname + 1) : 0;
  if (dir + sizeof(kImpl) > sizeof(path)) return false;
  std::memcpy(path, info.dli_fname, dir);
  std::memcpy(path + dir, kImpl, sizeof(kImpl));
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    slurm_error("pilot: cannot load %s: %s", path, dlerror());
    return false;
  }
  auto init = reinterpret_cast<decltype(&pilot_impl_init)>(dlsym(h, "pilot_impl_init"));
  if (init == nullptr || init(sp, ac, av) != 0) {
    dlclose(h);
    return false;
  }
  g_impl = h;
  return true;
}

pilot_request Request() {
  return pilot_request{g_config, g_stage, g_out, g_config_given, g_stage_given, g_out_given};
}

// Calls fn of the implementation with the request; -1 when it is missing.
int Forward(spank_t sp, const char* fn) {
  using Fn = int (*)(spank_t, const pilot_request*);
  auto f = reinterpret_cast<Fn>(dlsym(g_impl, fn));
  if (f == nullptr) {
    slurm_error("pilot: spank_pilot_impl.so has no %s", fn);
    return -1;
  }
  pilot_request req = Request();
  return f(sp, &req);
}

int g_ac = 0;
char** g_av = nullptr;

// --pilot-run (or PILOT_RUN): recorded for the prolog (job control
// environment) and the job's tasks (its environment). A pilot is never
// itself a bound run. A job that names none does not inherit the variable
// from the job it is submitted in (a long run that submits its sequel):
// its tasks would be refused for a check its prolog never made.
int RecordRun(spank_t sp, bool pilot) {
  const char* run = g_run_given ? g_run : std::getenv(pilot::job::kUserPilotRun);
  if (run == nullptr || *run == '\0') {
    unsetenv(pilot::job::kEnvPilotRun);
    return 0;
  }
  if (!g_run_given && !ValidRun(run, "PILOT_RUN")) return -1;
  if (pilot) {
    slurm_error("pilot: --pilot-run: a pilot job (--pilot) cannot itself run under another pilot's grant");
    return -1;
  }
  if (spank_job_control_setenv(sp, pilot::job::kEnvPilotRun, run, 1) != ESPANK_SUCCESS ||
      setenv(pilot::job::kEnvPilotRun, run, 1) != 0) {
    slurm_error("pilot: --pilot-run: cannot record the pilot job %s for the job", run);
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" int slurm_spank_init(spank_t sp, int ac, char** av) {
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR && ctx != S_CTX_REMOTE) return 0;
  if (!ArgsValid(ac, av)) return -1;
  g_ac = ac;
  g_av = av;
  for (struct spank_option& opt : kOptions) {
    spank_err_t rc = spank_option_register(sp, &opt);
    if (rc != ESPANK_SUCCESS) {
      slurm_error("pilot: spank_option_register(--%s): %s", opt.name, spank_strerror(rc));
      return -1;
    }
  }
  // slurmstepd: load once here, before the tasks are forked.
  if (ctx == S_CTX_REMOTE && !LoadImpl(sp, ac, av)) return -1;
  return 0;
}

extern "C" int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
  // An srun inside an allocation starts a step of a job whose prolog has
  // already run: the allocation decided whether it is a pilot (and the
  // task's claim of runner.started makes sure one runs once). Nothing in
  // the environment is trusted for that: a user who sets SLURM_JOB_ID
  // makes srun join that (their own) job, not start a new one.
  if (ctx == S_CTX_LOCAL && std::getenv("SLURM_JOB_ID") != nullptr) return 0;
  const char* env = std::getenv(pilot::job::kUserConfig);
  const bool pilot = g_config_given || (env != nullptr && *env != '\0');
  if (int rc = RecordRun(sp, pilot); rc != 0) return rc;
  if (!pilot) return 0;  // no pilot: done
  if (!LoadImpl(sp, g_ac, g_av)) return -1;
  return Forward(sp, "pilot_impl_submit");
}

extern "C" int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
  if (spank_context() != S_CTX_REMOTE || g_impl == nullptr) return 0;
  return Forward(sp, "pilot_impl_task_init_privileged");
}

extern "C" int slurm_spank_task_init(spank_t sp, int, char**) {
  if (spank_context() != S_CTX_REMOTE || g_impl == nullptr) return 0;
  return Forward(sp, "pilot_impl_task_init");
}
