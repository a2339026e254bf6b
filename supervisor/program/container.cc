#include "supervisor/program/container.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/base/crypto.h"
#include "core/base/split.h"
#include "core/base/strings.h"
#include "core/config/mounts.h"
#include "core/config/site_check.h"
#include "job/env_names.h"
#include "launch/container.h"
#include "launch/spawn.h"
#include "supervisor/cgroup.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

constexpr char kRootPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Variables that describe the node, not the image: the image's own values
// stand inside.
bool NodeOnly(std::string_view name) {
  static const char* const kNames[] = {"PATH",         "HOME",       "PWD",         "OLDPWD",
                                       "SHELL",        "PYTHONHOME", "VIRTUAL_ENV", "MANPATH",
                                       "LIBRARY_PATH", "CPATH",      "MODULEPATH",  "LOADEDMODULES",
                                       "TMPDIR",       "_"};
  if (StartsWith(name, "LD_") || StartsWith(name, "BASH_FUNC_") || StartsWith(name, "CONDA_") ||
      StartsWith(name, "XDG_")) {
    return true;
  }
  return std::find_if(std::begin(kNames), std::end(kNames),
                      [&](const char* n) { return name == n; }) != std::end(kNames);
}

std::vector<std::string> Fields(std::string_view text, char sep) {
  std::vector<std::string> out;
  for (std::string_view f : SplitOn(text, sep)) out.emplace_back(f);
  return out;
}

// `name` found in the root PATH when it has no '/'; "" when absent.
std::string RootProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  for (const std::string& dir : Fields(kRootPath, ':')) {
    const std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// `path` resolved by the job's user: root must not bind a folder the user
// could not reach (one beneath a folder closed to them, through a link the
// user made).
Result<std::string> ResolveAsUser(const std::string& path,
                                  const std::optional<job::RunAs>& run_as) {
  job::CommandSpec spec;
  spec.argv = {job::FindExecutable("realpath"), "-e", "--", path};
  if (spec.argv[0].empty()) return Status::NotFound("container", "realpath is not installed");
  spec.env = {std::string("PATH=") + kRootPath, "LC_ALL=C"};
  spec.run_as = run_as;
  spec.timeout_seconds = 10;
  Result<job::CommandResult> r = job::RunCommand(spec);
  const std::string out = r.ok() ? std::string(Trim(r->out)) : "";
  if (!r.ok() || !r->Succeeded() || out.empty() || out.front() != '/' ||
      out.find('\n') != std::string::npos) {
    const std::string why = !r.ok()              ? r.status().ToString()
                            : !Trim(r->err).empty() ? std::string(Trim(r->err))
                                                    : r->Describe(spec.timeout_seconds);
    return Status::Invalid("container", "the working folder " + path +
                                            " is not one the job's user can reach, so it is not "
                                            "bound into the image: " + why);
  }
  return out;
}

}  // namespace

std::string ContainerProblem(const Config& cfg, const Lock& lock, const Policy& policy) {
  const std::string& rt = cfg.container.runtime;
  if (rt == launch::kRuntimeNone) return "";
  // What the site allows, as the submission checked it.
  if (Status site = CheckConfigAgainstSite(cfg, policy.container); !site.ok()) {
    return site.Message();
  }
  const LockContainer& c = lock.container;
  const bool by_digest = c.method == "registry" && !launch::DigestOf(c.pinned).empty();
  const bool file = c.method == "file" && !c.pinned.empty() && !c.digest.empty();
  if (rt == launch::kRuntimePodman && file) {
    return "container " + Quote(cfg.container.image) +
           " is a file: podman runs an image of a registry (a file needs runtime \"apptainer\" "
           "or \"pyxis\")";
  }
  if (!by_digest && !file) {
    return "container " + Quote(cfg.container.image) +
           " was not pinned to a digest by the prolog, so there is no image to run";
  }
  // pyxis is srun's, found where the job finds srun; one that is not
  // there is named by srun's own error when the first process starts.
  if (rt == launch::kRuntimePyxis) return "";
  const std::string program = RuntimeProgram(rt, policy.container);
  if (program.empty() || ::access(program.c_str(), X_OK) != 0) {
    return "container.runtime " + Quote(rt) + ": " +
           (rt == launch::kRuntimePodman ? policy.container.podman_path
                                         : policy.container.apptainer_path) +
           " is not installed on this node (pilot.conf(5), [container])";
  }
  return "";
}

std::string RuntimeProgram(const std::string& runtime, const ContainerPolicy& site) {
  if (runtime == launch::kRuntimePodman) return RootProgram(site.podman_path);
  if (runtime == launch::kRuntimeApptainer) return RootProgram(site.apptainer_path);
  if (runtime == launch::kRuntimePyxis) return "srun";  // in the job's PATH (RuntimeEnv)
  return "";
}

std::vector<Mount> ContainerMounts(const std::vector<std::string>& paths, const Config& cfg) {
  std::vector<Mount> out;
  auto add = [&](const Mount& m) {
    for (const Mount& o : out) {
      if (o.destination == m.destination) return;  // one bind per place inside
    }
    out.push_back(m);
  };
  for (const std::string& p : paths) {
    if (!p.empty() && p != "/") add(Mount{p, p, false});
  }
  for (const std::string& text : cfg.container.mounts) {
    Result<Mount> m = ParseMount(text);
    if (m.ok()) add(*m);
  }
  return out;
}

Result<ContainerSetup> MakeContainerSetup(const Config& cfg, const Lock& lock,
                                          const Policy& policy,
                                          const std::optional<job::RunAs>& run_as,
                                          const std::string& workdir, const std::string& gpus,
                                          const std::vector<std::string>& own,
                                          const std::string& metrics_dir) {
  if (const std::string why = ContainerProblem(cfg, lock, policy); !why.empty()) {
    return Status::Invalid("container", why);
  }
  PILOT_ASSIGN_OR_RETURN(const std::string real, ResolveAsUser(workdir, run_as));
  ContainerSetup c;
  c.runtime = cfg.container.runtime;
  c.image = lock.container.pinned;
  c.site = &policy.container;
  c.run_as = run_as;
  c.workdir = workdir;
  std::vector<std::string> present;
  for (const std::string& path : own) {
    if (!path.empty() && ::access(path.c_str(), F_OK) == 0) present.push_back(path);
  }
  c.mounts = ContainerMounts(present, cfg);
  for (Mount& m : c.mounts) {
    if (m.destination == workdir && m.source == workdir) m.source = real;
  }
  for (const std::string& path : present) {
    if (path != metrics_dir) c.task_binds.push_back(path);
  }
  c.gpus = SplitGpuList(gpus);
  c.node = lock.job.host;
  return c;
}

void MarkContainerStep(const ContainerSetup& setup, const Config& cfg,
                       std::vector<std::string>* env) {
  SetEnvValue(env, job::kEnvContainerRuntime, setup.runtime);
  SetEnvValue(env, job::kEnvContainerImage, setup.image);
  SetEnvValue(env, job::kEnvContainerWorkdir, setup.workdir);
  SetEnvValue(env, job::kEnvContainerBinds, Join(setup.task_binds, "\n"));
  SetEnvValue(env, job::kEnvContainerMounts, Join(cfg.container.mounts, "\n"));
}

namespace {

// The ContainerRun of `setup` for one process whose environment is `env`
// (its command left to the caller).
launch::ContainerRun RunOf(const ContainerSetup& setup, const std::vector<std::string>& env) {
  launch::ContainerRun run;
  run.runtime = setup.runtime;
  run.image = setup.image;
  run.uid = setup.run_as ? setup.run_as->uid : ::getuid();
  run.gid = setup.run_as ? setup.run_as->gid : ::getgid();
  run.workdir = setup.workdir;
  for (const std::string& kv : env) {
    const std::string var = kv.substr(0, kv.find('='));
    if (!NodeOnly(var)) run.env.push_back(kv);
  }
  const bool podman = setup.runtime == launch::kRuntimePodman;
  if (podman && !setup.gpus.empty()) {
    // podman gives the container the job's GPUs only, numbered from 0.
    // Apptainer shares the node's /dev and pyxis's step is Slurm's: there
    // the job's own numbering stands.
    std::vector<std::string> inside;
    for (size_t i = 0; i < setup.gpus.size(); ++i) inside.push_back(std::to_string(i));
    std::erase_if(run.env,
                  [](const std::string& kv) { return StartsWith(kv, "CUDA_VISIBLE_DEVICES="); });
    run.env.push_back("CUDA_VISIBLE_DEVICES=" + Join(inside, ","));
  }
  run.mounts = setup.mounts;
  run.gpus = setup.gpus;
  if (setup.site != nullptr) {
    run.program_path = RuntimeProgram(setup.runtime, *setup.site);
    if (podman) {
      run.site_args = setup.site->podman_args;
      run.containers_conf = setup.site->containers_conf;
    } else if (setup.runtime == launch::kRuntimeApptainer) {
      run.site_args = setup.site->apptainer_args;
    } else {
      run.site_args = setup.site->pyxis_args;
    }
    if (setup.runtime != launch::kRuntimePyxis) run.image_cache = setup.site->image_cache;
  }
  if (podman) run.cgroup_parent = ContainerCgroupParent();
  run.node = setup.node;
  return run;
}

// What the runtime itself runs with: PATH, root's (srun's: the job's, where
// the job finds srun, else root's; the image's own PATH stands inside), and
// HOME: root's for podman (started as root), the user's for Apptainer and
// srun.
std::vector<std::string> RuntimeEnv(const ContainerSetup& setup,
                                    const std::vector<std::string>& env) {
  std::string home = setup.runtime == launch::kRuntimePodman ? "/root" : EnvValue(env, "HOME");
  if (home.empty()) home = "/";
  std::string path = setup.runtime == launch::kRuntimePyxis ? EnvValue(env, "PATH") : "";
  if (path.empty()) path = kRootPath;
  return {"PATH=" + path, "HOME=" + home};
}

}  // namespace

pid_t StartContainerRemoval(const RankLaunch& r) {
  if (r.cleanup_argv.empty()) return -1;
  return launch::SpawnProcess(r.cleanup_argv.front(), r.cleanup_argv, r.env);
}

void RemoveContainer(const RankLaunch& r, const std::optional<job::RunAs>& run_as, const std::string& who) {
  if (r.cleanup_argv.empty()) return;
  job::CommandSpec c;
  c.argv = r.cleanup_argv;
  c.env = r.env;
  if (!r.as_root) c.run_as = run_as;
  c.timeout_seconds = 30;
  Result<job::CommandResult> out = job::RunCommand(c);
  if (!out.ok() || !out->Succeeded()) {
    std::fprintf(stderr, "pilot: %s: %s was not removed: %s\n", who.c_str(), c.argv.back().c_str(),
                 (out.ok() ? out->Describe(c.timeout_seconds) + ": " + out->err.substr(0, 400)
                           : out.status().ToString())
                     .c_str());
  }
}

Status WrapInContainer(const ContainerSetup& setup, const std::string& name, RankLaunch* r) {
  launch::ContainerRun run = RunOf(setup, r->env);
  if (setup.runtime == launch::kRuntimePodman) run.name = name;
  run.command = r->argv;
  PILOT_ASSIGN_OR_RETURN(launch::ContainerCommand c,
                         launch::BuildContainerCommand(run, RuntimeEnv(setup, r->env)));
  r->argv = std::move(c.argv);
  r->env = std::move(c.env);
  r->as_root = c.as_root;
  r->cleanup_argv = std::move(c.remove_argv);
  return Status::Ok();
}

Result<std::vector<std::string>> PyxisStep(const ContainerSetup& setup,
                                           std::vector<std::string>* env) {
  launch::ContainerRun run = RunOf(setup, *env);
  run.command = {"true"};  // checked, not used: the step's command is the caller's
  PILOT_ASSIGN_OR_RETURN(launch::ContainerCommand c,
                         launch::BuildContainerCommand(run, RuntimeEnv(setup, *env)));
  *env = std::move(c.env);
  return launch::PyxisFlags(run);
}

namespace {

// The pinned image file hashed again, as the job's user (root must not
// read for the user what the user could not), 600 s at most.
void ReadBackFile(const ContainerSetup& setup, ProgramContainer* out) {
  job::CommandSpec spec;
  spec.env = {std::string("PATH=") + kRootPath};
  spec.run_as = setup.run_as;
  spec.timeout_seconds = 600;
  Result<std::string> h = job::HashFileAsUser(job::RunCommand, std::move(spec), setup.image);
  if (!h.ok()) {
    out->problem = h.status().code() == Code::kUnavailable
                       ? "sha256sum is not installed on this node"
                       : "the image file " + setup.image + " could not be hashed again: " +
                             (h.status().code() == Code::kNotFound ? h.status().detail() : h.status().ToString());
    return;
  }
  out->digest = "sha256:" + *h;
  out->digest_source = "file";
}

void ReadBackPodman(const ContainerSetup& setup, ProgramContainer* out) {
  const std::string podman =
      setup.site ? RootProgram(setup.site->podman_path) : RootProgram("podman");
  if (podman.empty()) {
    out->problem = "podman is not installed on this node";
    return;
  }
  job::CommandSpec spec;
  spec.argv = {podman};
  if (setup.site && !setup.site->image_cache.empty()) {
    spec.argv.insert(spec.argv.end(), {"--root", setup.site->image_cache});
  }
  spec.argv.insert(spec.argv.end(),
                   {"image", "inspect", "--format", "{{.Digest}} {{.Id}}", setup.image});
  spec.env = {std::string("PATH=") + kRootPath, "HOME=/root"};
  if (setup.site && !setup.site->containers_conf.empty()) {
    spec.env.push_back("CONTAINERS_CONF=" + setup.site->containers_conf);
  }
  spec.timeout_seconds = 60;
  Result<job::CommandResult> r = job::RunCommand(spec);
  if (!r.ok()) {
    out->problem = "podman image inspect: " + r.status().ToString();
    return;
  }
  if (!r->Succeeded()) {
    const std::vector<std::string_view> lines = SplitLines(Trim(r->err));
    out->problem = "podman image inspect " + setup.image + ": " +
                   r->Describe(spec.timeout_seconds) +
                   (lines.empty() ? "" : ": " + std::string(lines.back()));
    return;
  }
  const std::vector<std::string> fields = Fields(Trim(r->out), ' ');
  if (fields.size() != 2 || launch::DigestOf("x@" + fields[0]).empty()) {
    out->problem = "podman image inspect printed " + Quote(Trim(r->out).substr(0, 200));
    return;
  }
  out->digest = fields[0];
  out->image_id = fields[1];
  out->digest_source = "runtime";
}

// The stderr line in which the runtime said why it did not start, or "".
std::string RuntimeSaid(const std::string& runtime, const std::string& tail) {
  std::string said;
  for (std::string_view line : SplitLines(tail)) {
    line = Trim(line);
    const bool is = runtime == launch::kRuntimePodman
                        ? StartsWith(line, "Error:") || StartsWith(line, "Error ")
                    : runtime == launch::kRuntimeApptainer
                        ? StartsWith(line, "FATAL:")
                        : (line.find("pyxis:") != std::string_view::npos &&
                           (line.find("error") != std::string_view::npos ||
                            line.find("ERROR") != std::string_view::npos)) ||
                              line.find("unrecognized option '--container") !=
                                  std::string_view::npos;
    if (is) said = std::string(line);
  }
  return said;
}

}  // namespace

ProgramContainer ReadBackContainer(const ContainerSetup& setup,
                                   const std::vector<ProgramProcess>& processes) {
  ProgramContainer out;
  out.runtime = setup.runtime;
  out.image = setup.image;
  if (StartsWith(setup.image, "/")) {
    ReadBackFile(setup, &out);
  } else if (setup.runtime == launch::kRuntimePodman) {
    ReadBackPodman(setup, &out);
  } else if (std::none_of(processes.begin(), processes.end(),
                          [](const ProgramProcess& p) { return p.records > 0; })) {
    out.problem = "no process " + setup.runtime + " started reported a step";
  } else {
    // Neither Apptainer nor pyxis tells what it ran: the digest is the one
    // the processes were started with, and it was not read back.
    out.digest = launch::DigestOf(setup.image);
    out.digest_source = "reference";
  }
  return out;
}

std::string ContainerStartFailure(const std::string& runtime,
                                  const std::vector<ProgramProcess>& processes) {
  for (const ProgramProcess& p : processes) {
    if (p.signal != 0 || p.exit_code == 0) continue;
    const std::string said = RuntimeSaid(runtime, p.stderr_tail);
    std::string what;
    if (runtime == launch::kRuntimePodman) {
      if (p.exit_code < 125 || p.exit_code > 127) continue;
      what = p.exit_code == 125   ? "podman could not start the image"
             : p.exit_code == 126 ? "the command in the image could not be run"
                                  : "the image has no such command";
    } else {
      // Apptainer and srun exit with the program's status too: only a
      // process that reported nothing and whose runtime said why.
      if (p.records > 0 || said.empty()) continue;
      what = runtime + " could not start the image";
    }
    return p.stage + " " + p.process + " rank " + std::to_string(p.rank) + ": " + what +
           " (exit " + std::to_string(p.exit_code) + ")" + (said.empty() ? "" : ": " + said);
  }
  return "";
}

}  // namespace pilot::supervisor
