// Remote side (slurmstepd): the first task of a pilot job becomes the runner.
//
// A job is a pilot job when the prolog wrote its lock file; that is decided
// by root on the node, not by anything the user's environment says. The
// first task (global id 0) of the first step that reaches this point claims
// DIR/runner.started with O_EXCL, so the batch step of `sbatch --pilot`, or
// the first `srun` step of `salloc --pilot`, runs the pilot exactly once;
// later steps and an `srun` started by the pilot itself run their own
// command. SLURM_PILOT_ACTIVE in the step's environment is a second guard.
//
// The replacement is an execve() from task_init: Slurm calls it in the task
// process, as the user, after stdio is set up and just before it would exec
// the user's command itself.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "job/state_layout.h"
#include "spank_plugin/pilot_spank.h"

namespace pilot::spank {
namespace {

std::string JobEnv(spank_t sp, const char* name) {
  char buf[4096];
  if (spank_getenv(sp, name, buf, sizeof(buf)) != ESPANK_SUCCESS) return "";
  return buf;
}

}  // namespace

int RemoteTaskInitPrivileged(spank_t sp) {
  PluginState& st = State();
  uint32_t task_id = 1;
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_TASK_GLOBAL_ID, &task_id) != ESPANK_SUCCESS || task_id != 0) {
    return 0;
  }
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) return 0;
  if (!JobEnv(sp, job::kEnvActive).empty()) return 0;

  job::JobPaths paths = job::StateLayout(st.args.state_dir).Job(job_id);
  struct stat sb {};
  if (stat(paths.lock.c_str(), &sb) != 0) return 0;  // not a pilot job

  int fd = open(paths.started.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                0644);
  if (fd < 0) {
    if (errno == EEXIST) return 0;  // an earlier step ran the pilot
    st.deferred_error = "cannot claim " + paths.started + ": " + std::strerror(errno);
    return 0;
  }
  uint32_t step_id = 0;
  spank_get_item(sp, S_JOB_STEPID, &step_id);
  std::string line = std::to_string(step_id) + "\n";
  ssize_t n = write(fd, line.data(), line.size());
  (void)n;
  close(fd);
  st.replace_task = true;
  return 0;
}

int RemoteTaskInit(spank_t sp) {
  PluginState& st = State();
  if (!st.deferred_error.empty()) {
    // Errors from the privileged hook surface here, where Slurm reports them
    // to the step (it does not for every earlier hook).
    LogError(st.deferred_error);
    return -1;
  }
  if (!st.replace_task) return 0;
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) return -1;

  PilotRequest req = st.request;
  if (std::string s = JobEnv(sp, job::kEnvStage); !s.empty() && !st.stage_given) req.stage = s;
  if (std::string o = JobEnv(sp, job::kEnvOut); !o.empty() && !st.out_given) req.out = o;
  if (!IsValidStage(req.stage)) req.stage = "all";

  spank_setenv(sp, job::kEnvActive, std::to_string(job_id).c_str(), 1);
  char** env = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || env == nullptr) {
    LogError("cannot read the job environment");
    return -1;
  }
  std::vector<std::string> args = RunnerArgv(st.args, req, job_id);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execve(argv[0], argv.data(), env);
  LogError("cannot start " + args[0] + ": " + std::strerror(errno));
  return -1;
}

}  // namespace pilot::spank
