// pilot.conf: the site's policy, owned by the administrators.
//
// TOML, read strictly like pilot.toml: unknown keys or sections, wrong types
// and out-of-range values are errors "FILE:LINE: key: problem". Every key
// and its default is documented in pilot.conf(5); the shipped etc/pilot.conf
// lists them all, commented. A missing key takes its default.
//
// Thread-safety: plain values.
#pragma once

#include <string>
#include <vector>

#include "core/base/oci.h"
#include "core/base/status.h"

namespace pilot {

struct RecordKey;  // core/records/record.h

// [thresholds]: what a pilot must show for a GO.
struct Thresholds {
  double memory_headroom = 0.10;           // free fraction of GPU memory required
  double restore_tolerance = 1e-3;         // max relative loss diff after restore (GPU)
  // Where kernels are not deterministic (core/decide/restore_check.h): the
  // first step after the resume within this relative difference, and a
  // later step past restore_tolerance within this many times the spread
  // of a second resumed process.
  double restore_first_tolerance = 1e-4;
  double restore_noise_margin = 10;
  int min_pilot_steps = 10;                // optimizer steps the pilot must complete
  int verdict_lifetime_days = 14;          // a verdict expires this long after issue
  int max_unpiloted_days = 7;              // longest job allowed without a GO verdict
  double precision_loss_tolerance = 0.05;  // max rel loss diff bf16/fp16 vs fp32
  double budget_buffer = 0.15;             // operational buffer added to the budget
  double min_scaling_efficiency = 0.70;    // node stage vs single (warn below)
  // A program's resumed process must open checkpoint files holding at
  // least this fraction of the listed bytes (check checkpoint_read).
  double min_checkpoint_read_fraction = 0.9;
  // While a program reported steps, its processes must have kept at least
  // this many CPU cores busy, or its GPUs this busy (check busy).
  double min_busy_cpu_cores = 0.1;
  double min_busy_device_utilization = 0.05;
};

// [planning]: assumptions of the throughput projection and the budget
// (core/models/throughput.h, core/models/budget.h), used where the pilot measured nothing.
struct PlanningPolicy {
  double assumed_mfu = 0.40;        // model FLOP utilisation assumed for a CPU pilot
  double download_gb_per_s = 1.0;   // dataset download / copy-in rate (GB = 1e9 B)
  double export_gb_per_s = 1.0;     // rate of copying outputs off the node
  double network_gb_per_s = 25.0;   // inter-node bandwidth per GPU (200 Gb/s)
  double network_latency_us = 10.0; // per ring hop and gradient bucket
  int max_nodes = 64;               // largest node count the scaling scan tries
};

// [registry]: how the prolog talks to OCI registries.
struct RegistryPolicy {
  std::vector<std::string> insecure;  // "host:port" reached over plain http
  std::string ca_file;                // extra CA bundle ("" = system)
  int connect_timeout_seconds = 5;
  int timeout_seconds = 20;  // per request
  int retries = 2;           // extra attempts after the first
};

// [container]: the runtimes a site lets a program run in (config
// [container] runtime) and how they are started (launch/container.h).
// Runtime flags come from here only, never from a user's config.
struct ContainerPolicy {
  // Of "none", "pyxis", "apptainer", "podman": what container.runtime may be.
  std::vector<std::string> allowed_runtimes = {"none"};
  // Folders whose trees container.mounts may bind (their sources); the
  // job's work folder, checkpoint folder and the probe are bound always.
  std::vector<std::string> allowed_mounts;
  // Arguments the site adds: podman's after `run`, apptainer's after
  // `exec`, pyxis's to srun (e.g. "--shm-size=16g", "--tls-verify=false").
  std::vector<std::string> podman_args;
  std::vector<std::string> apptainer_args;
  std::vector<std::string> pyxis_args;
  std::string podman_path = "podman";        // PATH lookup without '/'
  std::string apptainer_path = "apptainer";
  // podman's containers.conf (CONTAINERS_CONF; "" = podman's own): where a
  // node needs default_ulimits = [] or another OCI runtime (spank_pilot(8)).
  std::string containers_conf;
  // Where images are kept between jobs: podman's --root, Apptainer's
  // APPTAINER_CACHEDIR ("" = the runtime's default). pyxis's cache is
  // enroot's own (ENROOT_CACHE_PATH in enroot.conf).
  std::string image_cache;
};

struct Policy {
  std::string path;  // file read ("" = built-in defaults)
  std::string state_dir = "/var/lib/slurm-pilot";
  // The folder holding each job's work folder (WORK/JOBID, the user's);
  // "" = STATE/jobs/JOBID/work. Best on another file system than state_dir,
  // so a user who fills it cannot stop locks and verdicts being written.
  std::string work_root;
  bool keep_work = false;  // the epilog leaves the work folder after the verdict
  // Run as root after the prolog made the work folder: COMMAND WORK_DIR UID
  // JOBID ("" = none); a failure is a problem in the lock (NO-GO).
  std::string work_quota_command;
  // Size of STATE/reserve, released when the state directory's file system
  // is full so the lock or the verdict can still be written (0 = none).
  int state_reserve_mb = 8;
  // Free space the state directory's file system must have (beyond the
  // reserve) for the prolog to admit a new pilot; below it the pilot is
  // refused with the lock problem state_space_low (NO-GO), the node stays
  // up (0 = no floor).
  int state_floor_mb = 64;
  std::string key_file = "/etc/slurm-pilot/verdict.key";
  std::string signing_key_file = "/etc/slurm-pilot/verdict-ed25519.key";  // private, root only
  std::string public_key_file = "/etc/slurm-pilot/verdict-ed25519.pub";   // world-readable
  std::string notify_url;            // "" = do not post verdicts
  int notify_timeout_seconds = 10;   // per attempt (connect: min(5, this))
  int notify_retries = 3;            // extra attempts after the first
  std::string hardware_catalog;      // default: <sysconfdir>/slurm-pilot/hardware.toml
  std::string runner_path;           // "" = pilot-runner beside the calling program
  std::string supervisor_path;       // "" = the plugin's built-in <sbindir>/pilot-supervisor
  std::string probe_path;            // folder holding the slurm_pilot Python package;
                                     // "" = ../share/slurm-pilot/python beside the program
  // PILOT_RUNNER_TEST_* switches reach the workload only when true (test
  // clusters); otherwise the supervisor drops them from its environment.
  bool allow_test_switches = false;
  // A node whose kernel.yama.ptrace_scope is below 1 (or that has no Yama)
  // fails the verdict's ptrace_scope check; false: the check warns.
  bool require_ptrace_scope = true;
  // Checks that pass only when something other than the workload itself
  // established them (verified_by supervisor, epilog or prolog).
  std::vector<std::string> independent_checks = {"completed", "restore", "checkpoint"};
  // The same for a user's program ([program]), whose losses are always its
  // own word: the restore comparison is the program's figures compared by
  // the supervisor, so a GO rests on what root established itself.
  std::vector<std::string> program_independent_checks = {"completed", "checkpoint",
                                                         "checkpoint_read"};
  int verify_timeout_seconds = 600;  // epilog's `pilot-runner verify`
  // The epilog's whole time, from its start to its exit; keep it below
  // slurm.conf's PrologEpilogTimeout (pilot-epilog(8), TIME BUDGET).
  int epilog_timeout_seconds = 840;
  int prolog_timeout_seconds = 120;  // total pinning time in the prolog
  std::string scontrol_path = "scontrol";  // run by `pilot grant` (PATH lookup without '/')
  Thresholds thresholds;
  PlanningPolicy planning;
  RegistryPolicy registry;
  ContainerPolicy container;
};

// The epilog's time budget (pilot-epilog(8), TIME BUDGET). What it keeps
// for the steps after verify: hashing the manifest (kEpilogManifestSeconds),
// deciding, signing and storing (kEpilogStoreSeconds), and one post with
// all its retries (NotifyWorstCaseSeconds).
inline constexpr double kEpilogManifestSeconds = 10;
inline constexpr double kEpilogStoreSeconds = 5;
// Seconds one post of a verdict can take under the policy: every attempt
// at notify_timeout_seconds plus the backoff between them; 0 without
// notify_url.
double NotifyWorstCaseSeconds(const Policy& policy);
// The time limit of the epilog's `pilot-runner verify` when `elapsed`
// seconds of the epilog have passed: verify_timeout_seconds, or less so
// that what follows verify still ends inside epilog_timeout_seconds; at
// least 1 s. `*limited` (optional) is set when the budget is what limits it.
double EpilogVerifySeconds(const Policy& policy, double elapsed, bool* limited = nullptr);
// Whether a post still fits: the epilog's remaining time covers
// NotifyWorstCaseSeconds. When it does not, the verdict is queued instead.
bool EpilogCanPost(const Policy& policy, double elapsed);

// The built-in defaults (hardware_catalog filled in).
Policy DefaultPolicy();
// <sysconfdir>/slurm-pilot/pilot.conf of this build.
std::string DefaultPolicyPath();

// Reads and validates. Errors: kNotFound (no file; unless missing_ok, in
// which case the defaults are returned with path ""), kIoError, kInvalid
// ("FILE:LINE: key: problem").
Result<Policy> LoadPolicy(const std::string& path, bool missing_ok = false);
// Same from text (`path` in messages only).
Result<Policy> ParsePolicy(std::string_view text, const std::string& path);

// Every key as its dotted name ("state_dir", "thresholds.memory_headroom"),
// in documentation order, with its one-line hint: the key table in
// policy.cc, which ParsePolicy reads by.
const std::vector<RecordKey>& PolicyKeys();
// The names of PolicyKeys().
const std::vector<std::string>& KnownPolicyKeys();

// policy.runner_path; when it is empty, "pilot-runner" in the directory of
// the running executable (/proc/self/exe) if one is there, else in the
// installation's bindir (pilot-prolog and pilot-epilog live in sbindir).
std::string ResolveRunnerPath(const Policy& policy);
// policy.probe_path, or share/slurm-pilot/python of the installation the
// running program belongs to.
std::string ResolveProbePath(const Policy& policy);

// The registry client options a site's [registry] section sets (pilot.conf(5)).
OciOptions OciOptionsFrom(const RegistryPolicy& registry);

}  // namespace pilot
