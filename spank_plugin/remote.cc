// Remote side (slurmstepd): the first task of a pilot job hands over to
// pilot-supervisor.
//
// A job that asked for a pilot (--pilot, or the SLURM_PILOT_CONFIG the
// plugin recorded at submission) runs its pilot when the prolog wrote its
// lock file for this job and this user; root on the node decides, from
// files only root can write (spank_plugin/task_role.h). Without that lock
// (its prolog could not write one), or with a lock that refuses the pilot
// (state_space_low), every task refuses: neither the pilot nor the job's
// command runs. Only another node of a job of several, which holds its own
// record of the job instead, runs a step's own command. The first task
// (global id 0) of the first step that reaches this point claims
// DIR/runner.started with O_EXCL, so the batch step of `sbatch --pilot`, or
// the first `srun` step of `salloc --pilot`, runs the pilot exactly once
// per instance; later steps and any `srun` started by the workload run
// their own command. No environment variable can skip or fake the claim.
//
// Any other job runs its command unless the prolog's run record of it
// (job/binding.h: a job submitted with --pilot-run) refuses it, or it named
// a pilot run and has no record: then every task refuses, as above. The
// batch step of a bound run the record admits hands over to
// `pilot-supervisor --bound-run PILOT`, which runs the pilot's
// program.command in place of the batch script; its other steps (the
// supervisor's own srun step of ranks across nodes) run their command.
//
// task_init_privileged (root, in the task process, before Slurm drops to
// the user): claim, then fork pilot-supervisor, which stays root, with one
// end of a socket pair and the job's environment in a memory file; the
// supervisor dies with the task (parent-death signal). task_init (as the
// user, stdio ready, the task placed in the step's groups): send stdio to
// the supervisor and wait for its exit status, which becomes the task's.
// The user's command never runs.
//
// A task of the supervisor's srun step across nodes in a container (its
// environment holds SLURM_PILOT_CONTAINER_IMAGE, job/env_names.h), on any
// node of a pilot job, is handed over the same way to `pilot-supervisor
// --container-task`, which runs its command under the runtime: task_init sends
// it the task's stdio and, with them, the task's environment, since the
// rank's variables are set only after the privileged hook
// (supervisor/program/container_task.h checks what it asks for).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <slurm/slurm.h>  // SLURM_BATCH_SCRIPT

#include "core/records/lock.h"
#include "job/binding.h"
#include "job/env_names.h"
#include "job/state_layout.h"
#include "job/task_channel.h"
#include "spank_plugin/pilot_spank.h"
#include "spank_plugin/task_role.h"

namespace pilot::spank {
namespace {

// Descriptors the supervisor finds its channel and the job's environment on.
constexpr int kChannelFd = 3;
constexpr int kJobEnvFd = 4;

std::string JobEnv(spank_t sp, const char* name) {
  char buf[4096];
  if (spank_getenv(sp, name, buf, sizeof(buf)) != ESPANK_SUCCESS) return "";
  return buf;
}

// The job's environment, NUL-separated, in an anonymous memory file.
int JobEnvFile(spank_t sp) {
  char** env = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || env == nullptr) return -1;
  const int fd = memfd_create("pilot-job-env", MFD_CLOEXEC);
  if (fd < 0) return -1;
  for (char** e = env; *e != nullptr; ++e) {
    const size_t n = std::strlen(*e) + 1;
    if (write(fd, *e, n) != static_cast<ssize_t>(n)) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

// In the forked child: descriptors in place, then exec the supervisor with
// an environment of its own (nothing of the job's reaches a root process).
[[noreturn]] void ExecSupervisor(const std::vector<std::string>& args, int channel, int env_fd,
                                 pid_t task) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != task) _exit(127);
  int c = fcntl(channel, F_DUPFD, 10);
  int e = env_fd < 0 ? -1 : fcntl(env_fd, F_DUPFD, 10);
  if (c < 0 || dup2(c, kChannelFd) < 0) _exit(127);
  if (env_fd >= 0 && (e < 0 || dup2(e, kJobEnvFd) < 0)) _exit(127);
  for (int fd = env_fd < 0 ? kChannelFd + 1 : kJobEnvFd + 1; fd < 4096; ++fd) close(fd);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD}) signal(sig, SIG_DFL);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char lang[] = "LANG=C";
  char* envp[] = {path, lang, nullptr};
  execve(argv[0], argv.data(), envp);
  _exit(127);
}

// A task of the supervisor's srun step across nodes in a container
// (job/env_names.h: kEnvContainerImage): hands it to `pilot-supervisor
// --container-task` (root), which runs its command under the runtime once
// task_init has sent it the task's stdio and environment.
int StartContainerTask(spank_t sp, PluginState& st, uint32_t job_id, uint32_t task_id, uid_t uid,
                       gid_t gid, const char* node) {
  int argc = 0;
  char** argv = nullptr;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1) {
    st.deferred_error = "container task: the task has no command";
    return 0;
  }
  uint32_t step_id = 0;
  spank_get_item(sp, S_JOB_STEPID, &step_id);
  std::vector<std::string> args = {st.args.supervisor, "--container-task",
                                   "--job",            std::to_string(job_id),
                                   "--uid",            std::to_string(uid),
                                   "--gid",            std::to_string(gid),
                                   "--policy",         st.args.policy,
                                   "--state-dir",      st.args.state_dir,
                                   "--step",           std::to_string(step_id),
                                   "--task",           std::to_string(task_id),
                                   "--channel",        std::to_string(kChannelFd)};
  if (node != nullptr && *node != '\0') {
    args.push_back("--node");
    args.push_back(node);
  }
  args.push_back("--");
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    st.deferred_error = std::string("container task: socketpair: ") + std::strerror(errno);
    return 0;
  }
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    st.deferred_error = std::string("container task: fork: ") + std::strerror(errno);
    close(pair[0]);
    close(pair[1]);
    return 0;
  }
  if (pid == 0) ExecSupervisor(args, pair[1], -1, self);
  close(pair[1]);
  st.channel_fd = pair[0];
  st.replace_task = true;
  st.container_task = true;
  return 0;
}

// Forks pilot-supervisor (root) with `args`, the job's environment in a
// memory file and one end of a socket pair; this task then relays to it
// (RemoteTaskInit). Errors are deferred to task_init.
int StartSupervisor(spank_t sp, PluginState& st, const std::vector<std::string>& args) {
  const int env_fd = JobEnvFile(sp);
  int pair[2];
  if (env_fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    st.deferred_error = std::string("cannot prepare the supervisor: ") + std::strerror(errno);
    if (env_fd >= 0) close(env_fd);
    return 0;
  }
  const pid_t self = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    st.deferred_error = std::string("cannot start pilot-supervisor: fork: ") + std::strerror(errno);
    close(pair[0]);
    close(pair[1]);
    close(env_fd);
    return 0;
  }
  if (pid == 0) ExecSupervisor(args, pair[1], env_fd, self);
  close(pair[1]);
  close(env_fd);
  st.channel_fd = pair[0];
  st.replace_task = true;
  return 0;
}

// The task of a bound run's batch step that its prolog admitted: hands
// over to `pilot-supervisor --bound-run PILOT`, which runs the pilot's
// program.command in place of the batch script (job/binding.h).
int StartBoundRun(spank_t sp, PluginState& st, uint32_t job_id, uid_t uid, gid_t gid, int64_t pilot_job) {
  TaskIdentity task;
  task.job_id = job_id;
  task.uid = uid;
  task.gid = gid;
  if (std::string w = JobEnv(sp, "SLURM_SUBMIT_DIR"); !w.empty() && w[0] == '/') task.cwd = w;
  PilotRequest req = st.request;
  if (!st.out_given) req.out.clear();
  std::vector<std::string> args = SupervisorArgv(st.args, req, task, kChannelFd, kJobEnvFd);
  args.push_back("--bound-run");
  args.push_back(std::to_string(pilot_job));
  return StartSupervisor(sp, st, args);
}

}  // namespace

int RemoteTaskInitPrivileged(spank_t sp) {
  PluginState& st = State();
  uint32_t task_id = 1;
  uint32_t job_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  if (spank_get_item(sp, S_TASK_GLOBAL_ID, &task_id) != ESPANK_SUCCESS) return 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
    return 0;
  }
  // Asked for a pilot at all? (Only ever makes a job a pilot, never less.)
  const bool asked = st.pilot_option_seen || !JobEnv(sp, job::kEnvConfig).empty();
  // This node's name from slurmstepd's own environment (it sets
  // SLURMD_NODENAME for itself), not the job's copy of it.
  const char* node = std::getenv("SLURMD_NODENAME");
  const job::StateLayout layout(st.args.state_dir);
  if (!asked) {
    // A job bound to a pilot's grant runs only as its prolog admitted it
    // (job/binding.h); any other job finds no record and runs.
    const bool named_run = !JobEnv(sp, job::kEnvPilotRun).empty();
    std::string refused = job::RunRefusal(layout.RunFile(job_id), job_id, uid, named_run);
    if (!refused.empty()) {
      st.deferred_error = std::move(refused);
      return 0;
    }
    // Admitted: its batch script is replaced by the pilot's program; the
    // steps the supervisor starts (ranks across nodes) run their command.
    uint32_t step_id = 0;
    spank_get_item(sp, S_JOB_STEPID, &step_id);
    if (!named_run || step_id != SLURM_BATCH_SCRIPT || task_id != 0) return 0;
    Result<job::RunRecord> run = job::ReadRunRecordOf(layout.RunFile(job_id), job_id, uid);
    if (!run.ok()) {
      st.deferred_error = "job " + std::to_string(job_id) + ": " + run.status().detail() + "; no task runs";
      return 0;
    }
    return StartBoundRun(sp, st, job_id, uid, gid, run->pilot_job);
  }
  TaskDecision decided = DecideTask(layout, job_id, uid, asked, node != nullptr ? node : "");
  if (decided.role == TaskRole::kRefuse) {
    // A pilot job without its lock (or refused) runs nothing of the user's,
    // in no task of any step.
    st.deferred_error = decided.message;
    return 0;
  }
  // A task of the pilot's own srun step across nodes in the pinned image.
  const bool in_image = !JobEnv(sp, job::kEnvContainerImage).empty();
  if (decided.role == TaskRole::kOwnCommand || task_id != 0) {
    return in_image ? StartContainerTask(sp, st, job_id, task_id, uid, gid, node) : 0;
  }
  const Lock* lock = &decided.lock;
  job::JobPaths paths = layout.Job(job_id);

  int fd = open(paths.started.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                0644);
  if (fd < 0) {
    if (errno == EEXIST) {  // an earlier step ran this instance's pilot
      return in_image ? StartContainerTask(sp, st, job_id, task_id, uid, gid, node) : 0;
    }
    st.deferred_error = "cannot claim " + paths.started + ": " + std::strerror(errno);
    return 0;
  }
  uint32_t step_id = 0;
  spank_get_item(sp, S_JOB_STEPID, &step_id);
  std::string line = lock->instance + " " + std::to_string(step_id) + "\n";
  ssize_t n = write(fd, line.data(), line.size());
  (void)n;
  close(fd);

  PilotRequest req = st.request;
  if (std::string s = JobEnv(sp, job::kEnvStage); !s.empty() && !st.stage_given) req.stage = s;
  if (std::string o = JobEnv(sp, job::kEnvOut); !o.empty() && !st.out_given) req.out = o;
  if (!IsValidStage(req.stage)) req.stage = "all";
  TaskIdentity task;
  task.job_id = job_id;
  task.uid = uid;
  task.gid = gid;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) task.cwd = cwd;
  if (std::string w = JobEnv(sp, "SLURM_SUBMIT_DIR"); !w.empty() && w[0] == '/') task.cwd = w;
  std::vector<std::string> args = SupervisorArgv(st.args, req, task, kChannelFd, kJobEnvFd);
  return StartSupervisor(sp, st, args);
}

int RemoteTaskInit(spank_t sp) {
  PluginState& st = State();
  if (!st.deferred_error.empty()) {
    // Errors from the privileged hook surface here, where Slurm reports them
    // to the step (it does not for every earlier hook): on the job's standard
    // error (set up by now) and in slurmd's log. slurmstepd then ends the
    // task with status 1, before the job's command.
    std::fprintf(stderr, "pilot: %s\n", st.deferred_error.c_str());
    LogError(st.deferred_error);
    return -1;
  }
  if (!st.replace_task) return 0;
  // From here this process only relays: the job's end of a pilot is the
  // supervisor's. Cancellation reaches the supervisor (and, through it, the
  // workload) directly; this process outlives it to report its status.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) signal(sig, SIG_IGN);
  Status sent = Status::Ok();
  if (st.container_task) {
    // The task's environment as slurmstepd made it by now (its rank's
    // variables included), for the command in the image.
    const int env_fd = JobEnvFile(sp);
    sent = env_fd < 0 ? Status::IoError("container task", "cannot write the task's environment")
                      : job::SendStdioAndEnv(st.channel_fd, env_fd);
    if (env_fd >= 0) close(env_fd);
  } else {
    sent = job::SendStdio(st.channel_fd);
  }
  if (!sent.ok()) {
    std::fprintf(stderr, "pilot: %s\n", sent.Message().c_str());
    _exit(4);
  }
  std::optional<int> status = job::ReceiveExitStatus(st.channel_fd);
  if (!status) {
    std::fprintf(stderr, "pilot: the supervisor ended without a status\n");
    _exit(4);
  }
  std::fflush(nullptr);
  _exit(*status);
}

}  // namespace pilot::spank
