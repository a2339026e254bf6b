#include "supervisor/program/container_task.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/base/strings.h"
#include "job/env_names.h"
#include "job/job_record.h"
#include "job/state_layout.h"
#include "launch/container.h"
#include "launch/spawn.h"
#include "supervisor/process.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

Status Refused(const std::string& what, const std::string& detail) {
  return Status::Invalid("container task: " + what, detail);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view line : SplitLines(text)) {
    if (!line.empty()) out.emplace_back(line);
  }
  return out;
}

// A folder the job's user owns, reached without a link (its real path is
// itself): what a task may bind at the same path.
bool UsersOwnFolder(const std::string& path, uid_t uid) {
  if (path.empty() || path.front() != '/') return false;
  char real[PATH_MAX];
  if (::realpath(path.c_str(), real) == nullptr || path != real) return false;
  struct stat sb {};
  return ::lstat(path.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == uid;
}

// The binds the task asked for, each checked (see the header).
Result<std::vector<Mount>> CheckedMounts(const ContainerTaskInput& in) {
  std::vector<Mount> out;
  const std::string probe = ResolveProbePath(*in.policy);
  for (const std::string& path : Lines(EnvValue(in.env, job::kEnvContainerBinds))) {
    if (path != probe && !UsersOwnFolder(path, in.run_as.uid)) {
      return Refused("bind", Quote(path) + " is neither a folder of " + in.run_as.user +
                                 "'s (reached without a link) nor the probe's");
    }
    out.push_back(Mount{path, path, false});
  }
  for (const std::string& text : Lines(EnvValue(in.env, job::kEnvContainerMounts))) {
    Result<Mount> m = ParseMount(text);
    if (!m.ok()) return Refused("mount", Quote(text) + ": " + m.status().detail());
    if (!MountSourceAllowed(m->source, in.policy->container.allowed_mounts)) {
      return Refused("mount", Quote(m->source) +
                                  " is outside the folders this node's pilot.conf allows "
                                  "(allowed_mounts)");
    }
    out.push_back(*m);
  }
  return out;
}

volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_passed_on = 0;

void PassOn(int sig) {
  g_passed_on = 1;
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

}  // namespace

Result<Lock> NodeRecordOfJob(const Policy& policy, int64_t job_id, uid_t uid,
                             const std::string& node) {
  const job::StateLayout layout(policy.state_dir, policy.work_root);
  Result<Lock> lock = job::ReadJobRecord(layout.Job(job_id).lock, job_id, uid);
  if (lock.ok() || lock.status().code() != Code::kNotFound || node.empty()) return lock;
  return job::ReadJobRecord(layout.NodeRecordFile(job_id, node), job_id, uid);
}

Result<RankLaunch> PlanContainerTask(const ContainerTaskInput& in) {
  const std::string image = EnvValue(in.env, job::kEnvContainerImage);
  std::string runtime = EnvValue(in.env, job::kEnvContainerRuntime);
  if (runtime.empty()) runtime = launch::kRuntimePodman;
  if (runtime != launch::kRuntimePodman && runtime != launch::kRuntimeApptainer) {
    return Refused("runtime", Quote(runtime) + " is not one a task is handed over for (podman, "
                                               "apptainer)");
  }
  const auto& allowed = in.policy->container.allowed_runtimes;
  if (std::find(allowed.begin(), allowed.end(), runtime) == allowed.end()) {
    return Refused("runtime",
                   "this node's pilot.conf does not allow " + runtime + " (allowed_runtimes)");
  }
  const std::string where = in.node.empty() ? "this node" : in.node;
  Result<Lock> record = NodeRecordOfJob(*in.policy, in.job_id, in.run_as.uid, in.node);
  if (!record.ok()) {
    return Refused("record", "no record of job " + std::to_string(in.job_id) + " on " + where +
                                 ": " + record.status().Message());
  }
  const LockContainer& pinned = record->container;
  const bool by_digest =
      pinned.method == "registry" && !launch::DigestOf(pinned.pinned).empty();
  const bool file = runtime == launch::kRuntimeApptainer && pinned.method == "file" &&
                    !pinned.pinned.empty() && !pinned.digest.empty();
  if (!by_digest && !file) {
    return Refused("image", "the prolog of " + where + " pinned no image by digest for job " +
                                std::to_string(in.job_id));
  }
  if (image != pinned.pinned) {
    return Refused("image", Quote(image) + " is not the image the prolog of " + where +
                                " pinned, " + Quote(pinned.pinned) +
                                " (a tag that moved between the nodes' prologs)");
  }
  PILOT_ASSIGN_OR_RETURN(std::vector<Mount> mounts, CheckedMounts(in));
  const std::string workdir = EnvValue(in.env, job::kEnvContainerWorkdir);
  const bool bound = std::any_of(mounts.begin(), mounts.end(),
                                 [&](const Mount& m) { return m.destination == workdir; });
  if (!bound) return Refused("workdir", Quote(workdir) + " is not one of the binds");
  if (in.command.empty()) return Refused("command", "is empty");

  ContainerSetup setup;
  setup.runtime = runtime;
  setup.image = image;
  setup.mounts = std::move(mounts);
  setup.gpus = SplitGpuList(JobGpuList(*record, in.env));
  setup.site = &in.policy->container;
  setup.run_as = in.run_as;
  setup.workdir = workdir;
  RankLaunch r;
  r.rank = static_cast<int>(in.task_id);
  r.argv = in.command;
  for (const std::string& kv : in.env) {
    if (!StartsWith(kv, "SLURM_PILOT_CONTAINER_")) r.env.push_back(kv);
  }
  const std::string name = "pilot-" + std::to_string(in.job_id) + "-" + std::to_string(in.step_id) +
                           "-" + std::to_string(in.task_id);
  PILOT_RETURN_IF_ERROR(WrapInContainer(setup, name, &r));
  return r;
}

int RunContainerTask(const ContainerTaskInput& in) {
  Result<RankLaunch> plan = PlanContainerTask(in);
  if (!plan.ok()) {
    std::fprintf(stderr, "pilot: %s\n", plan.status().Message().c_str());
    return 1;
  }
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    std::fprintf(stderr, "pilot: container task: fork: %s\n", std::strerror(errno));
    return 1;
  }
  if (child == 0) {
    // podman itself runs as root (as_root) and drops to the user inside;
    // Apptainer runs as the user.
    BecomeWorkloadChild(plan->as_root ? std::nullopt : std::optional<job::RunAs>(in.run_as),
                        ::getppid());
    const std::string why = launch::ExecSearchingPath(plan->argv, plan->env);
    std::fprintf(stderr, "pilot: container task: %s\n", why.c_str());
    _exit(127);
  }
  g_child = child;
  struct sigaction sa {};
  sa.sa_handler = PassOn;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  int status = 0;
  pid_t removal = -1;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return 1;
    // A signal was passed on: the container's PID 1 may ignore it, and
    // the step's KillWait is short, so the container is removed at once.
    if (g_passed_on && removal < 0) removal = StartContainerRemoval(*plan);
  }
  g_child = 0;
  if (removal > 0) {
    // Done before this task ends: the job is not over while it runs.
    while (::waitpid(removal, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  // Once more after podman ended: the first removal may have met the
  // container still starting (--ignore makes this one cheap).
  if (WIFSIGNALED(status) || g_passed_on) RemoveContainer(*plan, std::nullopt, "container task");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace pilot::supervisor
