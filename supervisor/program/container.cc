#include "supervisor/program/container.h"

#include <unistd.h>

#include <algorithm>

#include "core/base/strings.h"
#include "core/config/mounts.h"
#include "core/config/site_check.h"
#include "job/env_names.h"
#include "launch/container.h"
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
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
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

}  // namespace

std::string ContainerProblem(const Config& cfg, const Lock& lock, const Policy& policy) {
  const std::string& rt = cfg.container.runtime;
  if (rt == launch::kRuntimeNone) return "";
  // What the site allows, as the submission checked it.
  if (Status site = CheckConfigAgainstSite(cfg, policy.container); !site.ok()) {
    return site.Message();
  }
  if (rt != launch::kRuntimePodman) {
    return "container.runtime " + Quote(rt) +
           ": the supervisor runs programs in podman only so "
           "far";
  }
  if (lock.container.method != "registry" || launch::DigestOf(lock.container.pinned).empty()) {
    return "container " + Quote(cfg.container.image) +
           " was not pinned to a digest by the "
           "prolog, so there is no image to run";
  }
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

void MarkContainerStep(const ContainerSetup& setup, const Config& cfg,
                       std::vector<std::string>* env) {
  SetEnvValue(env, job::kEnvContainerImage, setup.image);
  SetEnvValue(env, job::kEnvContainerWorkdir, setup.workdir);
  SetEnvValue(env, job::kEnvContainerBinds, Join(setup.task_binds, "\n"));
  SetEnvValue(env, job::kEnvContainerMounts, Join(cfg.container.mounts, "\n"));
}

Status WrapInContainer(const ContainerSetup& setup, const std::string& name, RankLaunch* r) {
  launch::ContainerRun run;
  run.runtime = setup.runtime;
  run.image = setup.image;
  run.uid = setup.run_as ? setup.run_as->uid : ::getuid();
  run.gid = setup.run_as ? setup.run_as->gid : ::getgid();
  run.workdir = setup.workdir;
  for (const std::string& kv : r->env) {
    const std::string var = kv.substr(0, kv.find('='));
    if (!NodeOnly(var)) run.env.push_back(kv);
  }
  if (!setup.gpus.empty()) {
    // The runtime gives the container the job's GPUs only, numbered from 0.
    std::vector<std::string> inside;
    for (size_t i = 0; i < setup.gpus.size(); ++i) inside.push_back(std::to_string(i));
    std::erase_if(run.env,
                  [](const std::string& kv) { return StartsWith(kv, "CUDA_VISIBLE_DEVICES="); });
    run.env.push_back("CUDA_VISIBLE_DEVICES=" + Join(inside, ","));
  }
  run.mounts = setup.mounts;
  run.gpus = setup.gpus;
  if (setup.site != nullptr) {
    run.site_args = setup.site->podman_args;
    run.program_path = RootProgram(setup.site->podman_path);
    run.image_cache = setup.site->image_cache;
    run.containers_conf = setup.site->containers_conf;
  }
  run.name = name;
  run.cgroup_parent = ContainerCgroupParent();
  run.command = r->argv;
  PILOT_ASSIGN_OR_RETURN(
      launch::ContainerCommand c,
      launch::BuildContainerCommand(run, {std::string("PATH=") + kRootPath, "HOME=/root"}));
  r->argv = std::move(c.argv);
  r->env = std::move(c.env);
  r->as_root = c.as_root;
  return Status::Ok();
}

ProgramContainer ReadBackContainer(const ContainerSetup& setup) {
  ProgramContainer out;
  out.runtime = setup.runtime;
  out.image = setup.image;
  const std::string podman =
      setup.site ? RootProgram(setup.site->podman_path) : RootProgram("podman");
  if (podman.empty()) {
    out.problem = "podman is not installed on this node";
    return out;
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
    out.problem = "podman image inspect: " + r.status().ToString();
    return out;
  }
  if (!r->Succeeded()) {
    const std::vector<std::string_view> lines = SplitLines(Trim(r->err));
    out.problem = "podman image inspect " + setup.image + ": " + r->Describe(spec.timeout_seconds) +
                  (lines.empty() ? "" : ": " + std::string(lines.back()));
    return out;
  }
  const std::vector<std::string> fields = Fields(Trim(r->out), ' ');
  if (fields.size() != 2 || launch::DigestOf("x@" + fields[0]).empty()) {
    out.problem = "podman image inspect printed " + Quote(Trim(r->out).substr(0, 200));
    return out;
  }
  out.digest = fields[0];
  out.image_id = fields[1];
  return out;
}

std::string ContainerStartFailure(const std::vector<ProgramProcess>& processes) {
  for (const ProgramProcess& p : processes) {
    if (p.signal != 0 || p.exit_code < 125 || p.exit_code > 127) continue;
    std::string said;
    for (std::string_view line : SplitLines(p.stderr_tail)) {
      line = Trim(line);
      if (StartsWith(line, "Error:") || StartsWith(line, "Error ")) said = std::string(line);
    }
    const char* what = p.exit_code == 125   ? "podman could not start the image"
                       : p.exit_code == 126 ? "the command in the image could not be run"
                                            : "the image has no such command";
    return p.stage + " " + p.process + " rank " + std::to_string(p.rank) + ": " + what +
           " (exit " + std::to_string(p.exit_code) + ")" + (said.empty() ? "" : ": " + said);
  }
  return "";
}

}  // namespace pilot::supervisor
