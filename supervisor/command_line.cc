#include "supervisor/command_line.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace pilot::supervisor {

const char kUsage[] =
    "usage: pilot-supervisor --job ID --uid UID --gid GID [--policy FILE] [--state-dir DIR]\n"
    "                        [--runner PATH] [--stage single|node|all] [--out DIR] [--cwd DIR]\n"
    "                        [--channel FD] [--job-env FD] [--bound-run PILOT]\n"
    "       pilot-supervisor --container-task --job ID --uid UID --gid GID [--policy FILE]\n"
    "                        [--state-dir DIR] [--node NAME] [--step N] [--task N]\n"
    "                        [--channel FD] -- COMMAND...\n"
    "Started by the spank_pilot plugin in a pilot job's task; see pilot-supervisor(8).\n";

namespace {

Result<int64_t> Number(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || n < lo || n > hi) {
    return Status::Invalid(flag, "expected a number from " + std::to_string(lo) + " to " +
                                     std::to_string(hi) + ", got \"" + v + "\"");
  }
  return static_cast<int64_t>(n);
}

}  // namespace

Result<CommandLine> ParseCommandLine(int argc, char** argv) {
  CommandLine c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      c.help = true;
      return c;
    }
    if (a == "--version") {
      c.version = true;
      return c;
    }
    if (a == "--container-task") {
      c.container_task = true;
      continue;
    }
    if (a == "--") {
      if (!c.container_task) return Status::Invalid(a, "only --container-task takes a command");
      c.command.assign(argv + i + 1, argv + argc);
      break;
    }
    if (i + 1 >= argc) return Status::Invalid(a, "needs a value").WithHint("pilot-supervisor --help");
    const std::string v = argv[++i];
    auto path = [&](std::string* slot) -> Status {
      if (v.empty() || v[0] != '/') return Status::Invalid(a, "must be an absolute path, got \"" + v + "\"");
      *slot = v;
      return Status::Ok();
    };
    if (a == "--job") {
      PILOT_ASSIGN_OR_RETURN(c.job_id, Number(a, v, 0, 999999999999));
    } else if (a == "--uid") {
      PILOT_ASSIGN_OR_RETURN(c.uid, Number(a, v, 0, 4294967294));
    } else if (a == "--gid") {
      PILOT_ASSIGN_OR_RETURN(c.gid, Number(a, v, 0, 4294967294));
    } else if (a == "--channel") {
      PILOT_ASSIGN_OR_RETURN(int64_t n, Number(a, v, -1, 65535));
      c.channel = static_cast<int>(n);
    } else if (a == "--job-env") {
      PILOT_ASSIGN_OR_RETURN(int64_t n, Number(a, v, -1, 65535));
      c.job_env = static_cast<int>(n);
    } else if (a == "--policy") {
      PILOT_RETURN_IF_ERROR(path(&c.policy));
    } else if (a == "--state-dir") {
      PILOT_RETURN_IF_ERROR(path(&c.state_dir));
    } else if (a == "--runner") {
      PILOT_RETURN_IF_ERROR(path(&c.runner));
    } else if (a == "--out") {
      PILOT_RETURN_IF_ERROR(path(&c.out));
    } else if (a == "--cwd") {
      PILOT_RETURN_IF_ERROR(path(&c.cwd));
    } else if (a == "--bound-run") {
      PILOT_ASSIGN_OR_RETURN(c.bound_run, Number(a, v, 1, 999999999999));
    } else if (a == "--step") {
      PILOT_ASSIGN_OR_RETURN(c.step_id, Number(a, v, 0, 4294967295));
    } else if (a == "--task") {
      PILOT_ASSIGN_OR_RETURN(c.task_id, Number(a, v, 0, 4294967295));
    } else if (a == "--node") {
      if (v.empty() || v.find('/') != std::string::npos || v[0] == '.') {
        return Status::Invalid(a, "not a node name: \"" + v + "\"");
      }
      c.node = v;
    } else if (a == "--stage") {
      if (v != "single" && v != "node" && v != "all") {
        return Status::Invalid(a, "must be single, node or all, got \"" + v + "\"");
      }
      c.stage = v;
    } else {
      return Status::Invalid(a, "unknown flag").WithHint("pilot-supervisor --help");
    }
  }
  if (c.job_id < 0 || c.uid < 0 || c.gid < 0) {
    return Status::Invalid("pilot-supervisor", "--job, --uid and --gid are required");
  }
  if (c.container_task && c.bound_run > 0) {
    return Status::Invalid("--bound-run", "not with --container-task");
  }
  if (c.container_task && c.command.empty()) {
    return Status::Invalid("--container-task", "needs the task's command after --");
  }
  return c;
}

Result<std::vector<std::string>> ReadEnvEntries(int fd) {
  std::string text;
  char buf[65536];
  if (lseek(fd, 0, SEEK_SET) < 0) return Status::IoError("--job-env", std::strerror(errno));
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::IoError("--job-env", std::strerror(errno));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (64u << 20)) return Status::Invalid("--job-env", "larger than 64 MiB");
  }
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\0') {
      if (i > start) out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

Status Prepare(const CommandLine& cl, char** own_env, SuperviseOptions* o) {
  const bool named = !cl.policy.empty();
  PILOT_ASSIGN_OR_RETURN(Policy p, LoadPolicy(named ? cl.policy : DefaultPolicyPath(), !named));
  if (!cl.state_dir.empty()) p.state_dir = cl.state_dir;
  if (!cl.runner.empty()) p.runner_path = cl.runner;
  o->runner = ResolveRunnerPath(p);
  o->policy = std::move(p);
  o->job_id = cl.job_id;
  o->stage = cl.stage;
  o->out = cl.out;
  o->cwd = cl.cwd;
  const uid_t uid = static_cast<uid_t>(cl.uid);
  struct passwd* pw = getpwuid(uid);
  if (pw == nullptr) return Status::Invalid("--uid", "no user with uid " + std::to_string(cl.uid));
  o->home = pw->pw_dir;
  if (geteuid() == 0) {
    o->run_as = job::RunAs{uid, static_cast<gid_t>(cl.gid), pw->pw_name};
  } else if (geteuid() != uid) {
    return Status::Invalid("--uid", "not root: the workload can only run as the caller (uid " +
                                        std::to_string(geteuid()) + ")");
  }
  o->job_env.clear();
  if (cl.job_env >= 0) {
    PILOT_ASSIGN_OR_RETURN(o->job_env, ReadEnvEntries(cl.job_env));
    close(cl.job_env);
  } else {
    for (char** e = own_env; e != nullptr && *e != nullptr; ++e) o->job_env.emplace_back(*e);
  }
  return Status::Ok();
}

}  // namespace pilot::supervisor
