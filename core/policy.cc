#include "core/policy.h"

#include <unistd.h>

#include <climits>

#include "core/atomic_file.h"
#include "core/toml_reader.h"

#ifndef PILOT_SYSCONFDIR
#define PILOT_SYSCONFDIR "/etc/slurm-pilot"
#endif

namespace pilot {
namespace {

constexpr size_t kMaxPolicyBytes = 1u << 20;

void CheckAbsolute(TomlReader& r, std::string_view key, const std::string& value) {
  if (!value.empty() && value.front() != '/') r.Fail(key, "must be an absolute path");
}

}  // namespace

Policy DefaultPolicy() {
  Policy p;
  p.hardware_catalog = std::string(PILOT_SYSCONFDIR) + "/hardware.toml";
  return p;
}

std::string DefaultPolicyPath() { return std::string(PILOT_SYSCONFDIR) + "/pilot.conf"; }

const std::vector<std::string>& KnownPolicyKeys() {
  static const std::vector<std::string> k = {
      "state_dir",
      "key_file",
      "notify_url",
      "notify_timeout_seconds",
      "notify_retries",
      "hardware_catalog",
      "runner_path",
      "verify_timeout_seconds",
      "prolog_timeout_seconds",
      "scontrol_path",
      "thresholds.memory_headroom",
      "thresholds.restore_tolerance",
      "thresholds.min_pilot_steps",
      "thresholds.verdict_lifetime_days",
      "thresholds.max_unpiloted_days",
      "thresholds.precision_loss_tolerance",
      "thresholds.budget_buffer",
      "thresholds.min_scaling_efficiency",
      "planning.assumed_mfu",
      "planning.download_gb_per_s",
      "planning.export_gb_per_s",
      "planning.network_gb_per_s",
      "planning.network_latency_us",
      "planning.max_nodes",
      "registry.insecure",
      "registry.ca_file",
      "registry.connect_timeout_seconds",
      "registry.timeout_seconds",
      "registry.retries",
  };
  return k;
}

Result<Policy> ParsePolicy(std::string_view text, const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(toml::table t, ParseTomlText(text, path));
  Policy p = DefaultPolicy();
  p.path = path;
  TomlReader r(t, path, "");
  r.Str("state_dir", &p.state_dir).Str("key_file", &p.key_file);
  r.Str("notify_url", &p.notify_url);
  r.Int("notify_timeout_seconds", &p.notify_timeout_seconds, 1, 600);
  r.Int("notify_retries", &p.notify_retries, 0, 10);
  r.Str("hardware_catalog", &p.hardware_catalog).Str("runner_path", &p.runner_path);
  r.Int("verify_timeout_seconds", &p.verify_timeout_seconds, 1, 86400);
  r.Int("prolog_timeout_seconds", &p.prolog_timeout_seconds, 1, 3600);
  r.Str("scontrol_path", &p.scontrol_path);
  if (r.ok()) {
    CheckAbsolute(r, "state_dir", p.state_dir);
    if (p.state_dir.empty()) r.Fail("state_dir", "must not be empty");
    if (p.scontrol_path.empty()) r.Fail("scontrol_path", "must not be empty");
    CheckAbsolute(r, "key_file", p.key_file);
    CheckAbsolute(r, "hardware_catalog", p.hardware_catalog);
    CheckAbsolute(r, "runner_path", p.runner_path);
    if (!p.notify_url.empty() && p.notify_url.rfind("http://", 0) != 0 &&
        p.notify_url.rfind("https://", 0) != 0) {
      r.Fail("notify_url", "must start with http:// or https://");
    }
  }
  Thresholds& th = p.thresholds;
  r.Table("thresholds", [&](TomlReader& s) {
    s.Num("memory_headroom", &th.memory_headroom, 0, 0.9);
    s.Num("restore_tolerance", &th.restore_tolerance, 0, 1);
    s.Int("min_pilot_steps", &th.min_pilot_steps, 1, 1000000);
    s.Int("verdict_lifetime_days", &th.verdict_lifetime_days, 1, 365);
    s.Int("max_unpiloted_days", &th.max_unpiloted_days, 0, 365);
    s.Num("precision_loss_tolerance", &th.precision_loss_tolerance, 0, 10);
    s.Num("budget_buffer", &th.budget_buffer, 0, 10);
    s.Num("min_scaling_efficiency", &th.min_scaling_efficiency, 0, 1);
  });
  PlanningPolicy& pl = p.planning;
  r.Table("planning", [&](TomlReader& s) {
    s.Num("assumed_mfu", &pl.assumed_mfu, 0.01, 1);
    s.Num("download_gb_per_s", &pl.download_gb_per_s, 1e-6, 1e6);
    s.Num("export_gb_per_s", &pl.export_gb_per_s, 1e-6, 1e6);
    s.Num("network_gb_per_s", &pl.network_gb_per_s, 1e-6, 1e6);
    s.Num("network_latency_us", &pl.network_latency_us, 0, 1e6);
    s.Int("max_nodes", &pl.max_nodes, 1, 100000);
  });
  RegistryPolicy& rg = p.registry;
  r.Table("registry", [&](TomlReader& s) {
    s.StrList("insecure", &rg.insecure).Str("ca_file", &rg.ca_file);
    s.Int("connect_timeout_seconds", &rg.connect_timeout_seconds, 1, 300);
    s.Int("timeout_seconds", &rg.timeout_seconds, 1, 600);
    s.Int("retries", &rg.retries, 0, 10);
    if (s.ok()) CheckAbsolute(s, "ca_file", rg.ca_file);
  });
  PILOT_RETURN_IF_ERROR(r.Finish());
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

std::string ResolveRunnerPath(const Policy& policy) {
  if (!policy.runner_path.empty()) return policy.runner_path;
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "pilot-runner";
  std::string self(buf, static_cast<size_t>(n));
  return DirName(self) + "/pilot-runner";
}

}  // namespace pilot
