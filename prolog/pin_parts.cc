#include "prolog/pin_parts.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "core/base/json_util.h"
#include "core/base/oci.h"
#include "core/base/strings.h"
#include "job/node_facts.h"
#include "job/pins.h"

namespace pilot::prolog {
namespace {

using job::CleanEnvironment;
using job::CommandResult;
using job::CommandSpec;
using job::FindExecutable;

void PinFile(PinSession& s, const std::string& role, const std::string& path,
             const std::string& expected) {
  if (path.empty()) return;
  LockFile f;
  f.role = role;
  f.path = path;
  f.sha256_expected = expected;
  Result<std::string> h = s.HashAsUser(path, &f.bytes);
  if (!h.ok()) {
    s.Problem("file_missing", role + ": " + h.status().Message());
  } else {
    f.sha256_actual = *h;
    if (!expected.empty() && expected != *h) {
      s.Problem("file_changed", role + ": " + path + ": sha256 " + h->substr(0, 12) +
                                    "..., the config pins " + expected.substr(0, 12) + "...");
    }
  }
  s.lock().files.push_back(f);
}

void PinFiles(PinSession& s, const Config& cfg) {
  PinFile(s, "init_weights", cfg.model.init_weights, cfg.model.init_sha256);
  if (cfg.data.format != "random") {
    PinFile(s, "train", cfg.data.train, cfg.data.train_sha256);
    PinFile(s, "eval", cfg.data.eval, cfg.data.eval_sha256);
  }
}

// program.pin and the hub revisions, read by this program itself run as
// the job's user (pilot-prolog --pins: job/pins.h), so that root reads
// nothing the user could not; what the plugin recorded at submit is kept
// beside them for the verdict's pins_unchanged check.
void PinProgram(PinSession& s, const Config& cfg) {
  const std::string cache =
      !s.job().hub_cache.empty()
          ? s.job().hub_cache
          : job::HubCacheFolder([](const std::string&) { return std::nullopt; }, s.user().home);
  const job::PinRequest req = job::PinRequestFor(cfg, s.job().work_dir, cache);
  if (!job::HasPins(req)) return;
  if (!s.job().pins_submitted.empty()) {
    Result<std::map<std::string, std::string>> sub = job::ParseSummary(s.job().pins_submitted);
    if (sub.ok()) {
      s.lock().pins_submitted = std::move(sub).value();
    } else {
      s.Problem("pins_unverified", sub.status().Message());
    }
  }
  std::string self(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size());
  self.resize(n > 0 ? static_cast<size_t>(n) : 0);
  Result<CommandResult> r = s.RunAsUser({self, "--pins", job::PinRequestToJson(req)},
                                        s.opts().hash_timeout_seconds, kMaxLockBytes);
  if (!r.ok() || !r->Succeeded()) {
    std::string why = r.ok() ? r->Describe(s.opts().hash_timeout_seconds) : r.status().Message();
    if (r.ok() && !Trim(r->err).empty()) why += ": " + std::string(Trim(r->err)).substr(0, 300);
    s.Problem("pins_unreadable",
              "pinning program.pin and the hub revisions as " + s.user().as.user + ": " + why);
    return;
  }
  Result<std::vector<LockPin>> pins = ParseLockPins(r->out, "pilot-prolog --pins");
  if (!pins.ok()) {
    s.Problem("pins_unreadable", pins.status().Message());
    return;
  }
  s.lock().pins = std::move(pins).value();
  for (const LockPin& p : s.lock().pins) {
    if (!p.error.empty()) s.Problem("pin_unreadable", p.error);
  }
}

}  // namespace

void PinSeed(PinSession& s, const std::optional<Config>& cfg) {
  if (cfg && cfg->training.seed >= 0) {
    s.lock().seeds.training = cfg->training.seed;
    s.lock().seeds.source = "config";
  } else {
    s.lock().seeds.training = SeedFromJobId(s.job().job_id);
    s.lock().seeds.source = "job_id";
  }
}

void PinIdentityParts(PinSession& s, const std::optional<Config>& cfg) {
  if (!cfg) {
    PinContainer(s, s.job().container_image);
    return;
  }
  PinContainer(s, cfg->container.image.empty() ? s.job().container_image : cfg->container.image);
  PinFiles(s, *cfg);
  PinProgram(s, *cfg);
}

void PinContainer(PinSession& s, const std::string& image) {
  LockContainer& c = s.lock().container;
  c.reference = image;
  if (image.empty()) {
    c.method = "none";
    return;
  }
  if (IsLocalImageFile(image)) {
    // Hashed with the user's rights: root must not vouch for (or read) a
    // file the user could not.
    c.method = "file";
    Result<std::string> h = s.HashAsUser(image, nullptr);
    if (!h.ok()) {
      s.Problem("container_unreadable", h.status().Message());
      return;
    }
    c.digest = "sha256:" + *h;
    c.pinned = image;
    return;
  }
  c.method = "registry";
  if (s.Budget(1) <= 0) return;
  if (!s.deps().resolve_image) {
    s.Problem("container_unresolved", image + ": no registry client");
    return;
  }
  Result<ResolvedImage> r = s.deps().resolve_image(image);
  if (!r.ok()) {
    s.Problem("container_unresolved", r.status().Message());
    return;
  }
  c.digest = r->digest;
  c.pinned = r->pinned;
}

void PinVersions(PinSession& s) {
  // The runner's own report: a JSON object of name -> version.
  Result<CommandResult> r = s.RunAsUser({s.opts().runner, "--versions", "--json"},
                                        s.opts().command_timeout_seconds, 64 << 10);
  if (r.ok() && r->Succeeded()) {
    Result<Json> j = ParseJsonText(r->out, "pilot-runner --versions", 64 << 10);
    if (j.ok() && j->is_object()) {
      for (auto it = j->begin(); it != j->end(); ++it) {
        if (it.value().is_string()) s.lock().versions[it.key()] = it.value().get<std::string>();
      }
    } else {
      s.Problem("versions_unreadable", "pilot-runner --versions --json: not a JSON object");
    }
  } else {
    s.Problem("runner_unavailable",
              s.opts().runner + " --versions: " +
                  (r.ok() ? r->Describe(s.opts().command_timeout_seconds) : r.status().Message()));
  }
  std::string slurmd = FindExecutable("slurmd");
  if (!slurmd.empty()) {
    CommandSpec spec;
    spec.argv = {slurmd, "-V"};
    spec.env = CleanEnvironment();
    spec.timeout_seconds = s.opts().command_timeout_seconds;
    Result<CommandResult> v = s.RunBounded(spec);
    if (v.ok() && v->Succeeded()) {
      std::string out(Trim(v->out));
      size_t sp = out.rfind(' ');
      s.lock().versions["slurm"] = sp == std::string::npos ? out : out.substr(sp + 1);
    }
  }
  std::ifstream os("/etc/os-release");
  for (std::string line; std::getline(os, line);) {
    if (StartsWith(line, "PRETTY_NAME=")) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
      s.lock().versions["os"] = v;
    }
  }
  struct utsname u {};
  if (uname(&u) == 0) s.lock().versions["kernel"] = u.release;
}

void PinGpus(PinSession& s) {
  Result<job::GpuInventory> inv = job::ReadGpuInventory(
      [&s](const CommandSpec& spec) { return s.RunBounded(spec); },
      s.opts().command_timeout_seconds);
  if (!inv.ok()) {
    // No nvidia-smi: a node without NVIDIA's driver, nothing to pin.
    if (inv.status().code() != Code::kUnavailable) {
      s.Problem("gpu_inventory_failed", inv.status().Message());
    }
    return;
  }
  for (const LockGpu& g : inv->gpus) s.lock().gpus.push_back(g);
  if (!inv->gpus.empty()) s.lock().versions["cuda_driver"] = inv->driver_version;
}

}  // namespace pilot::prolog
