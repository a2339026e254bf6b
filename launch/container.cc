#include "launch/container.h"

#include <algorithm>
#include <cctype>

#include "core/base/crypto.h"
#include "core/base/strings.h"

namespace pilot::launch {
namespace {

bool ValidEnvName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front()))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char ch) { return std::isalnum(ch) || ch == '_'; });
}

// Variables a root podman (Go, conmon, the OCI runtime, the loader) reads
// itself: a program's value of one of these must not reach podman's own
// environment, so it travels on the command line as --env NAME=VALUE.
bool RuntimeReads(std::string_view name) {
  static const char* const kPrefixes[] = {
      "LD_",  "GO",   "CONTAINERS_", "PODMAN_", "STORAGE_", "BUILDAH_", "DOCKER_", "REGISTRY_",
      "XDG_", "SSL_", "CONTAINER_",  "OCI_",    "CRUN_",    "RUNC_",    "DBUS_"};
  static const char* const kNames[] = {"PATH",        "HOME",        "TMPDIR",   "NOTIFY_SOCKET",
                                       "http_proxy",  "https_proxy", "no_proxy", "HTTP_PROXY",
                                       "HTTPS_PROXY", "NO_PROXY",    "TZ",       "USER",
                                       "LANG",        "LC_ALL"};
  for (const char* p : kPrefixes) {
    if (StartsWith(name, p)) return true;
  }
  return std::find_if(std::begin(kNames), std::end(kNames),
                      [&](const char* n) { return name == n; }) != std::end(kNames);
}

// Sets NAME=VALUE in `env`, replacing an earlier NAME.
void SetEnvValue(std::vector<std::string>* env, const std::string& name, const std::string& value) {
  const std::string prefix = name + "=";
  std::erase_if(*env, [&](const std::string& kv) { return StartsWith(kv, prefix); });
  env->push_back(prefix + value);
}

Status Bad(const std::string& what, const std::string& detail) {
  return Status::Invalid("container: " + what, detail);
}

std::string BindSpec(const Mount& m) {
  return m.source + ":" + m.destination + (m.read_only ? ":ro" : "");
}

std::string Joined(const std::vector<Mount>& mounts) {
  std::vector<std::string> parts;
  for (const Mount& m : mounts) parts.push_back(BindSpec(m));
  return Join(parts, ",");
}

bool IsFile(const std::string& image) { return StartsWith(image, "/"); }

std::vector<std::string> PodmanArgv(const ContainerRun& run,
                                    const std::vector<std::string>& names_from_env,
                                    const std::vector<std::string>& env_on_argv) {
  std::vector<std::string> a = {run.program_path.empty() ? "podman" : run.program_path};
  if (!run.image_cache.empty()) a.insert(a.end(), {"--root", run.image_cache});
  a.insert(a.end(), {"run", "--rm", "--pull=missing",
                     "--user=" + std::to_string(run.uid) + ":" + std::to_string(run.gid),
                     // The ranks' rendezvous (MASTER_ADDR on the node or
                     // another node) and NCCL's sockets are the host's.
                     "--network=host",
                     // The image is the user's: a setuid program in it must
                     // not make the program root over the bound folders.
                     "--security-opt=no-new-privileges", "--cap-drop=all",
                     "--workdir=" + run.workdir});
  if (!run.cgroup_parent.empty()) a.push_back("--cgroup-parent=" + run.cgroup_parent);
  if (!run.name.empty()) a.push_back("--name=" + run.name);
  for (const std::string& n : names_from_env) a.insert(a.end(), {"--env", n});
  for (const std::string& kv : env_on_argv) a.insert(a.end(), {"--env", kv});
  for (const Mount& m : run.mounts) a.push_back("--volume=" + BindSpec(m));
  for (const std::string& g : run.gpus) a.push_back("--device=nvidia.com/gpu=" + g);
  a.insert(a.end(), run.site_args.begin(), run.site_args.end());
  // The program's argv runs as written, not as arguments of the image's
  // entrypoint.
  a.push_back("--entrypoint=");
  a.push_back(run.image);
  a.insert(a.end(), run.command.begin(), run.command.end());
  return a;
}

std::vector<std::string> ApptainerArgv(const ContainerRun& run) {
  // --contain: a minimal /dev (GPU devices come with --nv) and empty /tmp
  // and home: the program sees the image and the binds, not the node.
  std::vector<std::string> a = {run.program_path.empty() ? "apptainer" : run.program_path, "exec",
                                "--cleanenv", "--contain", "--pwd", run.workdir};
  if (!run.mounts.empty()) a.insert(a.end(), {"--bind", Joined(run.mounts)});
  if (!run.gpus.empty()) a.push_back("--nv");
  a.insert(a.end(), run.site_args.begin(), run.site_args.end());
  a.push_back(IsFile(run.image) ? run.image : "docker://" + run.image);
  a.insert(a.end(), run.command.begin(), run.command.end());
  return a;
}

std::vector<std::string> PyxisArgv(const ContainerRun& run) {
  // One task on one node, sharing the job's CPUs and GPUs with the other
  // processes of the phase (each rank is its own step).
  std::vector<std::string> a = {run.program_path.empty() ? "srun" : run.program_path, "--overlap",
                                "--nodes=1", "--ntasks=1"};
  if (!run.node.empty()) a.push_back("--nodelist=" + run.node);
  const std::vector<std::string> flags = PyxisFlags(run);
  a.insert(a.end(), flags.begin(), flags.end());
  a.insert(a.end(), run.command.begin(), run.command.end());
  return a;
}

}  // namespace

std::vector<std::string> PyxisFlags(const ContainerRun& run) {
  std::vector<std::string> a = {"--container-image=" + PyxisImage(run.image),
                                "--container-workdir=" + run.workdir, "--no-container-remap-root",
                                "--no-container-mount-home"};
  if (!run.mounts.empty()) a.push_back("--container-mounts=" + Joined(run.mounts));
  a.insert(a.end(), run.site_args.begin(), run.site_args.end());
  return a;
}

std::string DigestOf(const std::string& image) {
  const size_t at = image.rfind('@');
  if (at == std::string::npos) return "";
  const std::string d = image.substr(at + 1);
  return StartsWith(d, "sha256:") && IsSha256Hex(d.substr(7)) ? d : "";
}

std::string PyxisImage(const std::string& image) {
  if (IsFile(image)) return image;
  const size_t slash = image.find('/');
  if (slash == std::string::npos) return image;
  const std::string host = image.substr(0, slash);
  if (host.find('.') == std::string::npos && host.find(':') == std::string::npos &&
      host != "localhost") {
    return image;  // Docker Hub's "user/repo"
  }
  return host + "#" + image.substr(slash + 1);
}

Result<ContainerCommand> BuildContainerCommand(const ContainerRun& run,
                                               const std::vector<std::string>& base_env) {
  const std::string& rt = run.runtime;
  if (rt != kRuntimePodman && rt != kRuntimeApptainer && rt != kRuntimePyxis) {
    return Bad("runtime", "unknown runtime " + Quote(rt));
  }
  if (IsFile(run.image)) {
    if (rt == kRuntimePodman)
      return Bad("image", "podman runs a registry image, not " + Quote(run.image));
  } else if (DigestOf(run.image).empty()) {
    return Bad("image", Quote(run.image) + " is not pinned by digest (REPO@sha256:HEX)");
  }
  if (run.workdir.empty() || run.workdir.front() != '/') {
    return Bad("workdir", Quote(run.workdir) + " is not an absolute path");
  }
  if (run.command.empty()) return Bad("command", "is empty");
  if (!std::all_of(run.node.begin(), run.node.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '-' || c == '_' || c == '.';
      })) {
    return Bad("node", Quote(run.node) + " is not one node's name");
  }
  if (!run.cgroup_parent.empty() &&
      (run.cgroup_parent.front() != '/' || run.cgroup_parent.find("/..") != std::string::npos ||
       run.cgroup_parent.find_first_of("\n,") != std::string::npos)) {
    return Bad("cgroup parent", Quote(run.cgroup_parent) + " is not an absolute cgroup path");
  }
  for (const Mount& m : run.mounts) {
    Result<Mount> again = ParseMount(BindSpec(m));
    if (!again.ok() || !(*again == m)) {
      return Bad("mount", Quote(BindSpec(m)) + (again.ok() ? " does not read back as itself"
                                                           : ": " + again.status().detail()));
    }
  }
  for (const std::string& g : run.gpus) {
    if (g.empty() ||
        !std::all_of(g.begin(), g.end(), [](unsigned char c) { return std::isdigit(c); })) {
      return Bad("gpu", Quote(g) + " is not a GPU index");
    }
  }
  ContainerCommand out;
  out.env = base_env;
  std::vector<std::string> names_from_env, env_on_argv;
  for (const std::string& kv : run.env) {
    const size_t eq = kv.find('=');
    const std::string name = kv.substr(0, eq);
    if (eq == std::string::npos || !ValidEnvName(name)) {
      return Bad("env", Quote(kv) + " is not NAME=VALUE with a name of [A-Za-z0-9_]");
    }
    if (rt == kRuntimePodman) {
      if (RuntimeReads(name)) {
        if (kv.find('\n') != std::string::npos) {
          return Bad("env", name + " holds a newline and podman reads it itself");
        }
        env_on_argv.push_back(kv);
      } else {
        SetEnvValue(&out.env, name, kv.substr(eq + 1));
        names_from_env.push_back(name);
      }
    } else if (rt == kRuntimeApptainer) {
      SetEnvValue(&out.env, "APPTAINERENV_" + name, kv.substr(eq + 1));
    } else {
      SetEnvValue(&out.env, name, kv.substr(eq + 1));
    }
  }
  if (rt == kRuntimePodman) {
    out.as_root = true;
    if (!run.containers_conf.empty()) SetEnvValue(&out.env, "CONTAINERS_CONF", run.containers_conf);
    out.argv = PodmanArgv(run, names_from_env, env_on_argv);
    if (!run.name.empty()) {
      out.remove_argv = {out.argv.front()};
      if (!run.image_cache.empty()) out.remove_argv.insert(out.remove_argv.end(), {"--root", run.image_cache});
      out.remove_argv.insert(out.remove_argv.end(),
                             {"rm", "--force", "--ignore", "--time", "0", run.name});
    }
  } else if (rt == kRuntimeApptainer) {
    if (!run.image_cache.empty()) SetEnvValue(&out.env, "APPTAINER_CACHEDIR", run.image_cache);
    out.argv = ApptainerArgv(run);
  } else {
    out.argv = PyxisArgv(run);
  }
  return out;
}

}  // namespace pilot::launch
