// pilot doctor, the node's side: root's state folder and keys, the kernel
// features and capabilities the supervisor uses, the container runtimes the
// policy allows, the GPUs and the probe's Python.
#include <fcntl.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/doctor.h"
#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/base/disk_space.h"
#include "core/base/strings.h"
#include "core/records/hardware.h"
#include "job/node_facts.h"
#include "job/state_layout.h"
#include "job/subprocess.h"

namespace pilot::cli::doctor {
namespace {

constexpr unsigned kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC

Item StateItem(const Node& node) {
  const Policy& p = node.policy;
  const std::string fix_dir = "create it root's, mode 0755 (install -d -o root -m 0755 " +
                              p.state_dir + "); the prolog makes its folders";
  struct stat st {};
  if (stat(p.state_dir.c_str(), &st) != 0) {
    return Missing("state", p.state_dir + ": " + std::strerror(errno), fix_dir);
  }
  if (!S_ISDIR(st.st_mode)) return Missing("state", p.state_dir + ": not a folder", fix_dir);
  if (st.st_uid != 0 || (st.st_mode & 0022) != 0) {
    return Missing("state", p.state_dir + ": owner uid " + std::to_string(st.st_uid) + ", mode " +
                                ModeText(st.st_mode) + ": another user could change locks and verdicts",
                   "chown root " + p.state_dir + " && chmod 0755 " + p.state_dir);
  }
  Result<MeasuredSpace> space = MeasureSpace(p.state_dir);
  if (!space.ok()) return Missing("state", space.status().Message(), fix_dir);
  // The reserve, once made, is allocated: what is free is beyond it. Before
  // the first prolog made it, it still has to fit.
  const job::StateLayout layout(p.state_dir, p.work_root);
  const bool reserved = access(layout.ReserveFile().c_str(), F_OK) == 0;
  const int64_t need = (int64_t{p.state_floor_mb} + (reserved ? 0 : p.state_reserve_mb)) << 20;
  const std::string free_text = FormatSize(space->free_bytes) + " free on " + p.state_dir;
  if (space->free_bytes < need) {
    return Missing("state", free_text + ", below state_floor_mb " + std::to_string(p.state_floor_mb) +
                                (reserved ? "" : " + state_reserve_mb " + std::to_string(p.state_reserve_mb)) +
                                " MiB: the prolog refuses pilots (state_space_low)",
                   "free space on that file system, or move state_dir to a larger one");
  }
  return Holds("state", p.state_dir + " (root's, " + ModeText(st.st_mode) + "), " + free_text +
                            ", floor " + std::to_string(p.state_floor_mb) + " MiB");
}

Item KeyItem(const Node& node) {
  const Policy& p = node.policy;
  const std::string keygen = "run 'pilot keygen --policy " + p.path + "' as root";
  for (const std::string* path : {&p.key_file, &p.signing_key_file}) {
    if (path->empty()) continue;
    const std::string problem = RootFileProblem(*path, RootFileKind::kPrivate);
    if (problem.empty()) continue;
    if (access(path->c_str(), F_OK) != 0) return Missing("key", problem, keygen);
    return Missing("key", problem, "chown root " + *path + " && chmod 0600 " + *path);
  }
  if (geteuid() != 0) {
    return Warn("key", p.key_file + " and " + p.signing_key_file + ": root's, mode 0600; not read "
                "(not root)", "run pilot doctor as root to read the keys");
  }
  Result<std::string> hmac = ReadKeyFile(p.key_file);
  if (!hmac.ok()) return Missing("key", hmac.status().Message(), keygen + " --force");
  std::string detail = p.key_file + " (0600, key id " + KeyId(*hmac) + ")";
  if (p.signing_key_file.empty() || p.public_key_file.empty()) {
    return Warn("key", detail + "; no Ed25519 pair in the policy",
                "set signing_key_file and public_key_file, then " + keygen +
                    ": users check verdicts with the public key");
  }
  Result<std::string> seed = ReadEd25519PrivateKeyFile(p.signing_key_file);
  if (!seed.ok()) return Missing("key", seed.status().Message(), keygen + " --force");
  Result<std::string> pub = ReadEd25519PublicKeyFile(p.public_key_file);
  struct stat st {};
  if (!pub.ok() || stat(p.public_key_file.c_str(), &st) != 0 || (st.st_mode & 0004) == 0) {
    return Missing("key",
                   pub.ok() ? p.public_key_file + ": not readable by others (mode " +
                                  ModeText(st.st_mode) + "): users cannot check signatures"
                            : pub.status().Message(),
                   keygen + " (writes the public key again from the private one)");
  }
  Result<std::string> want = Ed25519PublicKeyOf(*seed);
  if (!want.ok() || *want != *pub) {
    return Missing("key", p.public_key_file + " is not the public key of " + p.signing_key_file,
                   keygen + " (writes the public key again from the private one)");
  }
  return Holds("key", detail + ", " + p.signing_key_file + " (0600) and " + p.public_key_file +
                          " (ed25519, key id " + KeyId(*pub) + ")");
}

Item YamaItem(const Node& node) {
  const int scope = job::PtraceScope();
  if (scope >= 1) return Holds("ptrace_scope", "kernel.yama.ptrace_scope = " + std::to_string(scope));
  const std::string seen = scope < 0 ? "no Yama (kernel.yama.ptrace_scope absent)"
                                     : "kernel.yama.ptrace_scope = " + std::to_string(scope);
  const std::string meaning =
      ": another process of a job's user could attach to the workload with ptrace and change "
      "what it reports";
  const std::string fix = scope < 0 ? "boot a kernel with Yama (CONFIG_SECURITY_YAMA) and set "
                                      "kernel.yama.ptrace_scope = 1"
                                    : "sysctl -w kernel.yama.ptrace_scope=1 (and in /etc/sysctl.d/)";
  if (node.policy.require_ptrace_scope) {
    return Missing("ptrace_scope", seen + meaning + "; the policy requires it "
                   "(require_ptrace_scope): every verdict here fails its ptrace_scope check", fix);
  }
  return Warn("ptrace_scope", seen + meaning + "; verdicts name it and warn "
              "(require_ptrace_scope = false)", fix);
}

Item FanotifyItem() {
  const int fd = fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, O_RDONLY);
  if (fd >= 0) {
    close(fd);
    return Holds("fanotify", "permission events available (the resumed process's checkpoint reads)");
  }
  const int e = errno;
  if (e == EPERM) {
    return Warn("fanotify", "not checked: fanotify needs root (CAP_SYS_ADMIN)",
                "run pilot doctor as root");
  }
  return Missing("fanotify", std::string("fanotify_init: ") + std::strerror(e) +
                                 ": a program's checkpoint_read check fails on this node",
                 "use a kernel with CONFIG_FANOTIFY and CONFIG_FANOTIFY_ACCESS_PERMISSIONS");
}

// The capabilities the supervisor and the prolog and epilog use, with why.
struct NeededCap {
  int bit;
  const char* name;
  const char* why;
};
constexpr NeededCap kNeededCaps[] = {
    {0, "CAP_CHOWN", "the job's folders given to its user"},
    {1, "CAP_DAC_OVERRIDE", "the user's work folders read and removed"},
    {5, "CAP_KILL", "a phase's processes ended"},
    {6, "CAP_SETGID", "the workload run as the job's user"},
    {7, "CAP_SETUID", "the workload run as the job's user"},
    {21, "CAP_SYS_ADMIN", "fanotify's permission events"},
};

Item CapabilitiesItem(const Node& node) {
  // slurmd's effective set is what its prolog, epilog and slurmstepd (the
  // supervisor's parent) have; without slurmd in sight, this process's.
  std::string who, status_text;
  const std::string pid_file = node.slurm_conf ? node.slurm_conf->Value("SlurmdPidFile") : "";
  if (Result<std::string> pid = ReadFileLimited(pid_file.empty() ? "/run/slurmd.pid" : pid_file, 64);
      pid.ok()) {
    const std::string p(Trim(*pid));
    if (Result<std::string> s = ReadFileLimited("/proc/" + p + "/status", 1 << 16); s.ok()) {
      who = "slurmd (pid " + p + ")";
      status_text = *s;
    }
  }
  if (who.empty() && geteuid() != 0) {
    return Warn("capabilities", "not checked: slurmd is not running here and this process is not root",
                "run pilot doctor as root, or where slurmd runs");
  }
  if (who.empty()) {
    Result<std::string> s = ReadFileLimited("/proc/self/status", 1 << 16);
    if (s.ok()) status_text = *s;
    who = "this process (slurmd not running here)";
  }
  const std::optional<unsigned long long> caps = CapabilitySet(status_text, "CapEff");
  if (!caps) return Warn("capabilities", "cannot read " + who + "'s CapEff", "run pilot doctor as root");
  std::vector<std::string> lacking;
  for (const NeededCap& c : kNeededCaps) {
    if ((*caps & (1ull << c.bit)) == 0) lacking.push_back(std::string(c.name) + " (" + c.why + ")");
  }
  if (lacking.empty()) return Holds("capabilities", who + " has what the supervisor uses");
  return Missing("capabilities", who + " lacks " + Join(lacking, ", "),
                 "run slurmd as root with its full capability set (no CapabilityBoundingSet "
                 "that drops these in its systemd unit)");
}

// The program `name` as root runs it: itself when it holds a '/', else the
// first executable of that name in root's PATH; "" when there is none.
std::string RootExecutable(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  return job::FindExecutable(name);
}

// cgroup layout: "v2", "v1", or "hybrid" (v1 controllers and a v2 tree at
// /sys/fs/cgroup/unified that holds a controller, where crun refuses).
std::string CgroupLayout() {
  struct statfs fs {};
  if (statfs("/sys/fs/cgroup", &fs) == 0 && static_cast<unsigned>(fs.f_type) == kCgroup2Magic) {
    return "v2";
  }
  Result<std::string> c = ReadFileLimited("/sys/fs/cgroup/unified/cgroup.controllers", 4096);
  return c.ok() && !Trim(*c).empty() ? "hybrid" : "v1";
}

Item PodmanItem(const Node& node) {
  const ContainerPolicy& c = node.policy.container;
  const std::string podman = RootExecutable(c.podman_path);
  if (podman.empty()) {
    return Missing("podman", c.podman_path + ": not found or not executable (the policy allows "
                   "podman: its programs would fail to start)",
                   "install podman (Debian: podman, runc), or set [container] podman_path, or "
                   "take podman out of allowed_runtimes");
  }
  if (!c.containers_conf.empty() && access(c.containers_conf.c_str(), R_OK) != 0) {
    return Missing("podman", "containers_conf " + c.containers_conf + ": " + std::strerror(errno),
                   "write it (spank_pilot(8), CONTAINERS) or empty containers_conf");
  }
  if (geteuid() != 0) {
    return Warn("podman", podman + ": not run (not root; the supervisor runs podman as root)",
                "run pilot doctor as root");
  }
  job::CommandSpec spec;
  spec.argv = {podman};
  if (!c.image_cache.empty()) spec.argv.insert(spec.argv.end(), {"--root", c.image_cache});
  spec.argv.insert(spec.argv.end(), {"info", "--format",
                                     "{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Path}}"});
  spec.env = job::CleanEnvironment("root", "/root");
  if (!c.containers_conf.empty()) spec.env.push_back("CONTAINERS_CONF=" + c.containers_conf);
  spec.timeout_seconds = 60;
  Result<job::CommandResult> r = job::RunCommand(spec);
  if (!r.ok() || !r->Succeeded()) {
    return Missing("podman", "podman info: " + (r.ok() ? r->Describe(spec.timeout_seconds) + ": " +
                                                          FirstLine(r->err)
                                                    : r.status().Message()),
                   "make 'podman info' work as root with the policy's containers_conf");
  }
  const std::vector<std::string> oci = SplitList(Trim(r->out), ' ');
  const std::string layout = CgroupLayout();
  if (oci.size() < 2) return Missing("podman", "podman info printed " + Quote(Trim(r->out)), "");
  std::string detail = podman + ", OCI runtime " + oci[0] + " (" + oci[1] + "), cgroups " + layout;
  if (oci[0] == "crun" && layout == "hybrid") {
    return Missing("podman", detail + ": crun refuses hybrid cgroups",
                   "name a containers.conf with [engine] runtime = \"runc\" as containers_conf "
                   "(spank_pilot(8), CONTAINERS)");
  }
  job::CommandSpec version;
  version.argv = {oci[1], "--version"};
  version.env = job::CleanEnvironment();
  Result<job::CommandResult> v = job::RunCommand(version);
  if (!v.ok() || !v->Succeeded()) {
    return Missing("podman", detail + ": " + oci[1] + " --version failed",
                   "install the OCI runtime podman names, or name another in containers.conf");
  }
  if (c.containers_conf.empty()) {
    Result<std::string> self = ReadFileLimited("/proc/self/status", 1 << 16);
    const auto caps = self.ok() ? CapabilitySet(*self, "CapBnd") : std::nullopt;
    if (caps && (*caps & (1ull << 24)) == 0) {
      return Missing("podman", detail + "; no CAP_SYS_RESOURCE here: podman's default ulimits fail",
                     "name a containers.conf with [containers] default_ulimits = [] as "
                     "containers_conf (spank_pilot(8), CONTAINERS)");
    }
  }
  return Holds("podman", detail + ", " + FirstLine(Trim(v->out), 80));
}

Item ApptainerItem(const Node& node) {
  const std::string program = RootExecutable(node.policy.container.apptainer_path);
  if (program.empty()) {
    return Missing("apptainer", node.policy.container.apptainer_path + ": not found",
                   "install Apptainer, or set [container] apptainer_path, or take apptainer out "
                   "of allowed_runtimes");
  }
  job::CommandSpec spec;
  spec.argv = {program, "--version"};
  spec.env = job::CleanEnvironment();
  Result<job::CommandResult> r = job::RunCommand(spec);
  if (!r.ok() || !r->Succeeded()) {
    return Missing("apptainer", program + " --version failed", "repair the Apptainer installation");
  }
  return Holds("apptainer", program + ", " + FirstLine(Trim(r->out), 80));
}

Item PyxisItem(const Node& node) {
  bool loaded = false;
  if (node.plugstack) {
    for (const PlugstackEntry& e : node.plugstack->entries) {
      loaded = loaded || BaseName(e.plugin) == "spank_pyxis.so";
    }
  }
  if (!loaded) {
    return Missing("pyxis", "no spank_pyxis.so line in " + node.plugstack_path,
                   "install pyxis and enroot and add pyxis's plugstack line, or take pyxis out "
                   "of allowed_runtimes");
  }
  if (job::FindExecutable("enroot").empty()) {
    return Missing("pyxis", "enroot is not installed", "install enroot (pyxis runs images with it)");
  }
  return Holds("pyxis", "spank_pyxis.so in the plugstack, enroot installed");
}

std::vector<Item> RuntimeItems(const Node& node) {
  std::vector<Item> items;
  for (const std::string& r : node.policy.container.allowed_runtimes) {
    if (r == "podman") items.push_back(PodmanItem(node));
    if (r == "apptainer") items.push_back(ApptainerItem(node));
    if (r == "pyxis") items.push_back(PyxisItem(node));
  }
  if (items.empty()) items.push_back(Holds("containers", "the policy allows no container runtime"));
  return items;
}

Item GpuItem(const Node& node) {
  Result<job::GpuInventory> inv = job::ReadGpuInventory(job::RunCommand, 30);
  if (!inv.ok() && inv.status().code() == Code::kUnavailable) {
    if (access("/dev/nvidia0", F_OK) == 0) {
      return Missing("gpus", "/dev/nvidia0 exists but nvidia-smi is not installed: pilots record "
                     "no GPU", "install NVIDIA's driver utilities (nvidia-smi)");
    }
    return Holds("gpus", "no NVIDIA GPU (no nvidia-smi): a CPU node");
  }
  if (!inv.ok()) {
    return Missing("gpus", inv.status().Message(), "repair the NVIDIA driver (nvidia-smi must list the GPUs)");
  }
  if (inv->gpus.empty()) return Holds("gpus", "nvidia-smi lists no GPU: a CPU node");
  const std::string path = node.policy.hardware_catalog.empty() ? DefaultPolicy().hardware_catalog
                                                                 : node.policy.hardware_catalog;
  Result<HardwareCatalog> cat = LoadHardwareCatalog(path);
  if (!cat.ok()) {
    return Missing("gpus", cat.status().Message(), "install the hardware catalog (pilot.conf(5), "
                   "HARDWARE CATALOG) or set hardware_catalog");
  }
  std::vector<std::string> seen, unknown;
  for (const LockGpu& g : inv->gpus) {
    const GpuType* t = GpuTypeOfDevice(*cat, g.name);
    seen.push_back(std::to_string(g.index) + " " + g.name + (t ? " = " + t->name : ""));
    if (t == nullptr) unknown.push_back(g.name);
  }
  const std::string detail = Join(seen, ", ") + " (driver " + inv->driver_version + ")";
  if (!unknown.empty()) {
    return Warn("gpus", detail + "; not in " + path + ": " + Join(unknown, ", ") +
                            ": verdicts cannot place this node's GPU in the hardware fit",
                "add a [gpu.NAME] section for it to the catalog (pilot.conf(5), HARDWARE CATALOG)");
  }
  return Holds("gpus", detail);
}

Item PythonItem(const Node& node) {
  const std::string probe = ResolveProbePath(node.policy);
  if (access((probe + "/slurm_pilot/__init__.py").c_str(), R_OK) != 0) {
    return Missing("python", probe + "/slurm_pilot: the probe is not installed",
                   "install the probe (share/slurm-pilot/python) or set probe_path");
  }
  const std::string python = job::FindExecutable("python3");
  if (python.empty()) {
    return Warn("python", "probe " + probe + "; no python3: only the builtin runner and programs "
                "in images run here", "install python3 and torch for programs run outside an image");
  }
  job::CommandSpec spec;
  spec.argv = {python, "-c", "import torch; print(torch.__version__)"};
  spec.env = job::CleanEnvironment();
  spec.timeout_seconds = 60;
  Result<job::CommandResult> r = job::RunCommand(spec);
  if (!r.ok() || !r->Succeeded()) {
    return Warn("python", "probe " + probe + ", " + python + " without torch: a program run "
                "outside an image needs its own environment's torch",
                "install torch for " + python + " (Debian: python3-torch), or run programs in images");
  }
  return Holds("python", "probe " + probe + ", " + python + " with torch " + std::string(Trim(r->out)));
}

}  // namespace

std::optional<unsigned long long> CapabilitySet(const std::string& status_text,
                                                const std::string& field) {
  for (std::string_view line : SplitLines(status_text)) {
    if (!StartsWith(line, field + ":")) continue;
    const std::string hex(Trim(line.substr(field.size() + 1)));
    if (hex.empty() || hex.size() > 16 || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoull(hex, nullptr, 16);
  }
  return std::nullopt;
}

std::vector<Item> NodeItems(const Node& node) {
  std::vector<Item> items = {StateItem(node), KeyItem(node), YamaItem(node), FanotifyItem(),
                             CapabilitiesItem(node)};
  for (Item& i : RuntimeItems(node)) items.push_back(std::move(i));
  items.push_back(GpuItem(node));
  items.push_back(PythonItem(node));
  return items;
}

}  // namespace pilot::cli::doctor
