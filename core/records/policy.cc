#include "core/records/policy.h"

#include <unistd.h>

#include <algorithm>
#include <climits>

#include "core/base/atomic_file.h"
#include "core/base/strings.h"
#include "core/records/record_toml.h"

#ifndef PILOT_SYSCONFDIR
#define PILOT_SYSCONFDIR "/etc/slurm-pilot"
#endif
#ifndef PILOT_BINDIR
#define PILOT_BINDIR "/usr/bin"
#endif

namespace pilot {
namespace {

constexpr size_t kMaxPolicyBytes = 1u << 20;

std::string AbsoluteOrEmpty(const std::string& v) {
  return v.empty() || v.front() == '/' ? "" : "must be an absolute path";
}
std::string NotEmpty(const std::string& v) { return v.empty() ? "must not be empty" : ""; }
std::string HttpUrlOrEmpty(const std::string& v) {
  if (v.empty() || v.rfind("http://", 0) == 0 || v.rfind("https://", 0) == 0) return "";
  return "must start with http:// or https://";
}

}  // namespace

// ---- the key table -----------------------------------------------------------
// Every pilot.conf key, once, in documentation order: its type is the
// member's, its default the member's initializer in policy.h (the catalog
// path: DefaultPolicy()), then its bounds or checks and a one-line hint.
// ParsePolicy and KnownPolicyKeys() both walk these lists (core/records/record.h,
// read through core/records/record_toml.h). Adding a key is one line here plus its
// entry in pilot.conf(5) and the commented etc/pilot.conf (tests check both).

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Thresholds>) {
  v("memory_headroom", s.memory_headroom, NumRange{0, 0.9}, kMayBeAbsent,
    Doc{"free fraction of GPU memory required"});
  v("restore_tolerance", s.restore_tolerance, NumRange{0, 1}, kMayBeAbsent,
    Doc{"max relative loss difference after a restore"});
  v("restore_first_tolerance", s.restore_first_tolerance, NumRange{0, 1}, kMayBeAbsent,
    Doc{"max relative loss difference at the first step after a restore"});
  v("restore_noise_margin", s.restore_noise_margin, NumRange{1, 1e6}, kMayBeAbsent,
    Doc{"a later step within this many times a second resume's spread"});
  v("min_pilot_steps", s.min_pilot_steps, IntRange{1, 1000000}, kMayBeAbsent,
    Doc{"optimizer steps a pilot must complete"});
  v("verdict_lifetime_days", s.verdict_lifetime_days, IntRange{1, 365}, kMayBeAbsent,
    Doc{"a verdict expires this long after issue"});
  v("max_unpiloted_days", s.max_unpiloted_days, IntRange{0, 365}, kMayBeAbsent,
    Doc{"longest job allowed without a GO verdict"});
  v("precision_loss_tolerance", s.precision_loss_tolerance, NumRange{0, 10}, kMayBeAbsent,
    Doc{"max relative loss difference of bf16/fp16 against fp32"});
  v("budget_buffer", s.budget_buffer, NumRange{0, 10}, kMayBeAbsent,
    Doc{"operational buffer added to the budget"});
  v("min_scaling_efficiency", s.min_scaling_efficiency, NumRange{0, 1}, kMayBeAbsent,
    Doc{"node stage against single (warn below)"});
  v("min_checkpoint_read_fraction", s.min_checkpoint_read_fraction, NumRange{0, 1}, kMayBeAbsent,
    Doc{"checkpoint bytes a program's resumed process must open"});
  v("min_busy_cpu_cores", s.min_busy_cpu_cores, NumRange{0, 1024}, kMayBeAbsent,
    Doc{"CPU cores a program's processes must keep busy while reporting steps"});
  v("min_busy_device_utilization", s.min_busy_device_utilization, NumRange{0, 1}, kMayBeAbsent,
    Doc{"GPU utilization a program must keep while reporting steps"});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<PlanningPolicy>) {
  v("assumed_mfu", s.assumed_mfu, NumRange{0.01, 1}, kMayBeAbsent,
    Doc{"model FLOP utilisation assumed for a CPU pilot"});
  v("download_gb_per_s", s.download_gb_per_s, NumRange{1e-6, 1e6}, kMayBeAbsent,
    Doc{"dataset download / copy-in rate"});
  v("export_gb_per_s", s.export_gb_per_s, NumRange{1e-6, 1e6}, kMayBeAbsent,
    Doc{"rate of copying outputs off the node"});
  v("network_gb_per_s", s.network_gb_per_s, NumRange{1e-6, 1e6}, kMayBeAbsent,
    Doc{"inter-node bandwidth per GPU"});
  v("network_latency_us", s.network_latency_us, NumRange{0, 1e6}, kMayBeAbsent,
    Doc{"latency per ring hop and gradient bucket"});
  v("max_nodes", s.max_nodes, IntRange{1, 100000}, kMayBeAbsent,
    Doc{"largest node count the scaling scan tries"});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RegistryPolicy>) {
  v("insecure", s.insecure, kMayBeAbsent, Doc{"\"host:port\" registries reached over plain http"});
  v("ca_file", s.ca_file, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"extra CA bundle (\"\" = the system's)"});
  v("connect_timeout_seconds", s.connect_timeout_seconds, IntRange{1, 300}, kMayBeAbsent,
    Doc{"connect timeout per request"});
  v("timeout_seconds", s.timeout_seconds, IntRange{1, 600}, kMayBeAbsent,
    Doc{"timeout per request"});
  v("retries", s.retries, IntRange{0, 10}, kMayBeAbsent, Doc{"extra attempts after the first"});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ContainerPolicy>) {
  v("allowed_runtimes", s.allowed_runtimes, kMayBeAbsent,
    Doc{"what container.runtime may be: none, pyxis, apptainer, podman"});
  v("allowed_mounts", s.allowed_mounts, kMayBeAbsent,
    Doc{"folders whose trees container.mounts may bind"});
  v("podman_args", s.podman_args, kMayBeAbsent, Doc{"added after podman run"});
  v("apptainer_args", s.apptainer_args, kMayBeAbsent, Doc{"added after apptainer exec"});
  v("pyxis_args", s.pyxis_args, kMayBeAbsent, Doc{"added to the pyxis srun step"});
  v("podman_path", s.podman_path, Validate{&NotEmpty}, kMayBeAbsent,
    Doc{"podman to run (PATH lookup without '/')"});
  v("apptainer_path", s.apptainer_path, Validate{&NotEmpty}, kMayBeAbsent,
    Doc{"apptainer to run (PATH lookup without '/')"});
  v("containers_conf", s.containers_conf, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"podman's containers.conf, passed as CONTAINERS_CONF (\"\" = podman's own)"});
  v("image_cache", s.image_cache, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"podman's --root, Apptainer's APPTAINER_CACHEDIR (\"\" = the runtime's default)"});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Policy>) {
  v("state_dir", s.state_dir, Validate{&AbsoluteOrEmpty}, Validate{&NotEmpty}, kMayBeAbsent,
    Doc{"where verdicts, locks and grants are kept"});
  v("work_root", s.work_root, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"folder of the jobs' work folders (\"\" = inside each job's folder)"});
  v("keep_work", s.keep_work, kMayBeAbsent,
    Doc{"keep a job's work folder after its verdict is stored"});
  v("work_quota_command", s.work_quota_command, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"run as root with WORK_DIR UID JOBID after the prolog made the work folder"});
  v("state_reserve_mb", s.state_reserve_mb, IntRange{0, 4096}, kMayBeAbsent,
    Doc{"space kept free in the state directory for locks and verdicts"});
  v("state_floor_mb", s.state_floor_mb, IntRange{0, 1 << 20}, kMayBeAbsent,
    Doc{"free space below which the prolog refuses new pilots (state_space_low)"});
  v("key_file", s.key_file, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"the verdict signing key"});
  v("signing_key_file", s.signing_key_file, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"the Ed25519 private key that signs verdicts (root only)"});
  v("public_key_file", s.public_key_file, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"the Ed25519 public key anyone checks verdicts with"});
  v("notify_url", s.notify_url, Validate{&HttpUrlOrEmpty}, kMayBeAbsent,
    Doc{"where verdicts are posted (\"\" = nowhere)"});
  v("notify_timeout_seconds", s.notify_timeout_seconds, IntRange{1, 600}, kMayBeAbsent,
    Doc{"per posting attempt"});
  v("notify_retries", s.notify_retries, IntRange{0, 10}, kMayBeAbsent,
    Doc{"extra posting attempts after the first"});
  v("hardware_catalog", s.hardware_catalog, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"the GPU types the site offers"});
  v("runner_path", s.runner_path, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"pilot-runner to run (\"\" = beside the calling program)"});
  v("supervisor_path", s.supervisor_path, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"pilot-supervisor the plugin starts (\"\" = the installed one)"});
  v("probe_path", s.probe_path, Validate{&AbsoluteOrEmpty}, kMayBeAbsent,
    Doc{"folder with the slurm_pilot Python package, put first on a program's PYTHONPATH"});
  v("allow_test_switches", s.allow_test_switches, kMayBeAbsent,
    Doc{"pass PILOT_RUNNER_TEST_* variables to the workload (test clusters only)"});
  v("require_ptrace_scope", s.require_ptrace_scope, kMayBeAbsent,
    Doc{"fail a verdict whose node has kernel.yama.ptrace_scope below 1 (false: warn)"});
  v("independent_checks", s.independent_checks, kMayBeAbsent,
    Doc{"checks the workload alone cannot pass"});
  v("program_independent_checks", s.program_independent_checks, kMayBeAbsent,
    Doc{"the same for a user's program"});
  v("verify_timeout_seconds", s.verify_timeout_seconds, IntRange{1, 86400}, kMayBeAbsent,
    Doc{"the epilog's pilot-runner verify"});
  v("epilog_timeout_seconds", s.epilog_timeout_seconds, IntRange{20, 86400}, kMayBeAbsent,
    Doc{"the epilog's whole time (below PrologEpilogTimeout)"});
  v("prolog_timeout_seconds", s.prolog_timeout_seconds, IntRange{1, 3600}, kMayBeAbsent,
    Doc{"total pinning time in the prolog"});
  v("scontrol_path", s.scontrol_path, Validate{&NotEmpty}, kMayBeAbsent,
    Doc{"scontrol run by pilot grant"});
  v("thresholds", s.thresholds, kMayBeAbsent);
  v("planning", s.planning, kMayBeAbsent);
  v("registry", s.registry, kMayBeAbsent);
  v("container", s.container, kMayBeAbsent);
}

double NotifyWorstCaseSeconds(const Policy& policy) {
  if (policy.notify_url.empty()) return 0;
  // The backoff of PostSigned's default RetryOptions: 0.5 s, doubling, at
  // most 10 s.
  double total = static_cast<double>(policy.notify_retries + 1) * policy.notify_timeout_seconds;
  double backoff = 0.5;
  for (int i = 0; i < policy.notify_retries; ++i) {
    total += backoff;
    backoff = std::min(backoff * 2, 10.0);
  }
  return total;
}

double EpilogVerifySeconds(const Policy& policy, double elapsed, bool* limited) {
  const double after = kEpilogManifestSeconds + kEpilogStoreSeconds + NotifyWorstCaseSeconds(policy);
  const double left = policy.epilog_timeout_seconds - elapsed - after;
  const double limit = std::max(1.0, std::min<double>(policy.verify_timeout_seconds, left));
  if (limited) *limited = limit < policy.verify_timeout_seconds;
  return limit;
}

bool EpilogCanPost(const Policy& policy, double elapsed) {
  return policy.epilog_timeout_seconds - elapsed - kEpilogStoreSeconds >=
         NotifyWorstCaseSeconds(policy);
}

Policy DefaultPolicy() {
  Policy p;
  p.hardware_catalog = std::string(PILOT_SYSCONFDIR) + "/hardware.toml";
  return p;
}

std::string DefaultPolicyPath() { return std::string(PILOT_SYSCONFDIR) + "/pilot.conf"; }

const std::vector<RecordKey>& PolicyKeys() {
  static const std::vector<RecordKey> k = RecordKeys<Policy>();
  return k;
}

const std::vector<std::string>& KnownPolicyKeys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> names;
    for (const RecordKey& key : PolicyKeys()) names.push_back(key.name);
    return names;
  }();
  return k;
}

Result<Policy> ParsePolicy(std::string_view text, const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(toml::table t, ParseTomlText(text, path));
  Policy p = DefaultPolicy();
  p.path = path;
  TomlReader r(t, path, "");
  ReadTomlRecord(r, &p);
  PILOT_RETURN_IF_ERROR(r.Finish());
  std::string_view work = p.work_root;
  while (work.size() > 1 && work.back() == '/') work.remove_suffix(1);
  std::string_view state = p.state_dir;
  while (state.size() > 1 && state.back() == '/') state.remove_suffix(1);
  if (!work.empty() && work == state) {
    return Status::Invalid(path, "work_root: must not be state_dir itself")
        .WithHint("give the work folders a folder of their own, best on another file system");
  }
  // The lists' elements, which the key table checks only as strings.
  for (const std::string& rt : p.container.allowed_runtimes) {
    if (rt != "none" && rt != "pyxis" && rt != "apptainer" && rt != "podman") {
      return Status::Invalid(path, "container.allowed_runtimes: unknown runtime " + Quote(rt))
          .WithHint("choose from \"none\", \"pyxis\", \"apptainer\", \"podman\"");
    }
  }
  for (const std::string& m : p.container.allowed_mounts) {
    if (m.empty() || m.front() != '/') {
      return Status::Invalid(path, "container.allowed_mounts: " + Quote(m) +
                                       " must be an absolute path");
    }
  }
  return p;
}

Result<Policy> LoadPolicy(const std::string& path, bool missing_ok) {
  auto text = ReadFileLimited(path, kMaxPolicyBytes);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound && missing_ok) return DefaultPolicy();
    return text.status();
  }
  return ParsePolicy(*text, path);
}

namespace {
std::string BesideSelf(const std::string& name) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return name;
  std::string self(buf, static_cast<size_t>(n));
  return DirName(self) + "/" + name;
}
}  // namespace

std::string ResolveRunnerPath(const Policy& policy) {
  if (!policy.runner_path.empty()) return policy.runner_path;
  // A build folder or a copy of the programs keeps the runner beside the
  // prolog; an installation puts it in bindir and the prolog in sbindir.
  const std::string beside = BesideSelf("pilot-runner");
  if (::access(beside.c_str(), X_OK) == 0) return beside;
  return std::string(PILOT_BINDIR) + "/pilot-runner";
}

std::string ResolveProbePath(const Policy& policy) {
  if (!policy.probe_path.empty()) return policy.probe_path;
  const std::string bin = BesideSelf("");
  return bin + "../share/slurm-pilot/python";
}

OciOptions OciOptionsFrom(const RegistryPolicy& registry) {
  OciOptions o;
  o.insecure_registries = registry.insecure;
  o.ca_file = registry.ca_file;
  o.connect_timeout = std::chrono::seconds(registry.connect_timeout_seconds);
  o.total_timeout = std::chrono::seconds(registry.timeout_seconds);
  o.retries = registry.retries;
  return o;
}

}  // namespace pilot
