#include "core/decide/pin_checks.h"

#include <map>
#include <string_view>

#include "core/base/strings.h"
#include "core/decide/checks.h"

namespace pilot {
namespace {

// The versions the ranks of one run must share on every node.
constexpr const char* kSharedVersions[] = {"runner", "libtorch", "cuda_runtime", "cuda_driver",
                                           "cudnn",  "nccl",     "rocm"};

std::string GpuInventory(const std::vector<LockGpu>& gpus) {
  std::map<std::string, int> count;
  for (const LockGpu& g : gpus) ++count[g.name];
  std::string out;
  for (const auto& [name, n] : count)
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " x " + name;
  return out.empty() ? "no GPU" : out;
}

// What `other` pinned that differs from the lock's node (`first`), or "".
std::string PinsDiffer(const Lock& first, const Lock& other) {
  std::vector<std::string> why;
  for (const LockProblem& p : other.problems) why.push_back(p.code + ": " + p.detail);
  for (const char* key : kSharedVersions) {
    auto a = first.versions.find(key), b = other.versions.find(key);
    const std::string va = a == first.versions.end() ? "none" : a->second;
    const std::string vb = b == other.versions.end() ? "none" : b->second;
    if (va != vb)
      why.push_back(std::string(key) + " " + vb + " (" + first.job.host + ": " + va + ")");
  }
  if (GpuInventory(first.gpus) != GpuInventory(other.gpus)) {
    why.push_back(GpuInventory(other.gpus) + " (" + first.job.host + ": " +
                  GpuInventory(first.gpus) + ")");
  }
  // Another node pins the job's container image (pyxis) only: the config's
  // is the first node's to read.
  if (!other.container.reference.empty() && other.container.digest != first.container.digest) {
    why.push_back("container " +
                  (other.container.digest.empty() ? "not pinned" : other.container.digest) + " (" +
                  first.job.host + ": " +
                  (first.container.digest.empty() ? "not pinned" : first.container.digest) + ")");
  }
  return Join(why, "; ");
}

}  // namespace

void CheckPinning(const DecideInput& in, std::vector<Check>* out) {
  if (in.lock.problems.empty()) {
    std::string pinned =
        in.lock.container.method == "none" ? "no container" : in.lock.container.digest;
    out->push_back(MakeCheck(CheckName("pinning"), CheckStatus::kPass,
                             std::to_string(in.lock.files.size()) + " files, " + pinned,
                             "no problems", "config, seeds, container, files and versions pinned",
                             VerifiedBy::kProlog));
    return;
  }
  for (const auto& p : in.lock.problems) {
    out->push_back(MakeCheck(CheckName("pinning"), CheckStatus::kFail, p.code, "no problems",
                             p.detail, VerifiedBy::kProlog));
  }
}

void CheckConfig(const DecideInput& in, std::vector<Check>* out) {
  const LockConfig& c = in.lock.config;
  auto fail = [&](std::string measured, std::string detail) {
    out->push_back(MakeCheck(CheckName("config_unchanged"), CheckStatus::kFail, std::move(measured),
                             "sha256 at submit = copy = run", std::move(detail),
                             VerifiedBy::kProlog));
  };
  if (c.sha256_submitted.empty() || c.sha256_copied.empty()) {
    return fail("not recorded", "the config's sha256 was not recorded at submit and copy");
  }
  if (c.sha256_submitted != c.sha256_copied) {
    return fail(c.sha256_copied.substr(0, 12) + " != " + c.sha256_submitted.substr(0, 12),
                "the config " + c.path + " changed between submit and job start");
  }
  if (!in.config) {
    return fail("unreadable", "the copied config could not be read: " + in.config_error);
  }
  if (in.results && !in.results->config_sha256.empty() &&
      in.results->config_sha256 != c.sha256_copied) {
    return fail("runner used " + in.results->config_sha256.substr(0, 12),
                "the runner ran a different config than the one pinned");
  }
  out->push_back(MakeCheck(CheckName("config_unchanged"), CheckStatus::kPass,
                           c.sha256_copied.substr(0, 12), "sha256 at submit = copy = run",
                           "config unchanged since submit", VerifiedBy::kProlog));
}

// The program's pins at job start against those at submit (lock.h).
void CheckPins(const DecideInput& in, std::vector<Check>* out) {
  const Lock& l = in.lock;
  const std::string want = "at submit = at job start";
  if (l.pins.empty() && (!l.pins_submitted || l.pins_submitted->empty())) {
    out->push_back(MakeCheck(CheckName("pins_unchanged"), CheckStatus::kSkip, "nothing pinned",
                             want, "no program.pin file or hub revision to compare",
                             VerifiedBy::kProlog));
    return;
  }
  if (!l.pins_submitted) {
    out->push_back(MakeCheck(CheckName("pins_unchanged"), CheckStatus::kFail, "not recorded", want,
                             "the pins were not recorded at submit, so a change since cannot be "
                             "ruled out",
                             VerifiedBy::kProlog));
    return;
  }
  const std::vector<std::string> moved = MovedPins(*l.pins_submitted, PinSummary(l.pins));
  for (const std::string& m : moved) {
    out->push_back(MakeCheck(CheckName("pins_unchanged"), CheckStatus::kFail,
                             m.substr(0, m.find(':')), want,
                             "moved between submit and job start: " + m, VerifiedBy::kProlog));
  }
  if (moved.empty()) {
    out->push_back(MakeCheck(
        CheckName("pins_unchanged"), CheckStatus::kPass, std::to_string(l.pins.size()) + " pinned",
        want, "program files and hub revisions unchanged since submit", VerifiedBy::kProlog));
  }
}

void CheckContainerTag(const DecideInput& in, std::vector<Check>* out) {
  const LockContainer& c = in.lock.container;
  if (in.container_digest_now.empty() || c.method != "registry") return;
  bool same = in.container_digest_now == c.digest;
  out->push_back(MakeCheck(
      CheckName("container_tag"), same ? CheckStatus::kPass : CheckStatus::kWarn,
      in.container_digest_now, "= " + c.digest,
      same ? "the tag still points at the pinned image"
           : "the tag " + c.reference + " moved during the job; the pilot ran the pinned " +
                 c.digest + ": use the pinned reference for the long run",
      VerifiedBy::kEpilog));
}

// What ran against what was pinned: the supervisor read the digest back
// from the runtime after the program's processes ran in it.
void CheckContainerRan(const DecideInput& in, std::vector<Check>* out) {
  if (!in.results || !in.results->program || !in.results->program->container) return;
  const ProgramContainer& ran = *in.results->program->container;
  const std::string& pinned = in.lock.container.digest;
  const bool same = !ran.digest.empty() && !pinned.empty() && ran.digest == pinned;
  std::string detail;
  if (same && ran.digest_source == "reference") {
    detail = "every process was started in " + ran.image + " (" + ran.runtime + ", by digest; " +
             ran.runtime + " does not report the digest it ran, so it was not read back)";
  } else if (same && ran.digest_source == "file") {
    detail = "every process ran in " + ran.image + " (" + ran.runtime +
             "); the file hashed again after they ran is the one the prolog pinned";
  } else if (same) {
    detail = "every process ran in " + ran.image + " (" + ran.runtime + ")";
  } else if (!ran.digest.empty() && ran.digest_source == "file") {
    detail = "the image file " + ran.image + " changed while the pilot ran: it hashes to " +
             ran.digest + " after the processes ran, the prolog pinned " +
             (pinned.empty() ? std::string("(none)") : pinned);
  } else if (ran.digest.empty()) {
    detail = "the digest that ran was not read back from " + ran.runtime +
             (ran.problem.empty() ? "" : ": " + ran.problem);
  } else {
    detail = "the image that ran, " + ran.digest + ", is not the pinned " +
             (pinned.empty() ? std::string("(none)") : pinned);
  }
  out->push_back(MakeCheck(CheckName("container"), same ? CheckStatus::kPass : CheckStatus::kFail,
                           ran.digest.empty() ? "not read back" : ran.digest,
                           "= " + (pinned.empty() ? std::string("(not pinned)") : pinned), detail,
                           VerifiedBy::kSupervisor));
}

// A job of several nodes: every node must have pinned what the first
// node's lock holds (the versions the ranks share, the GPUs, the container).
void CheckNodesPinned(const DecideInput& in, std::vector<Check>* out) {
  if (in.lock.job.nodes <= 1) return;
  const std::string first = in.lock.job.host.empty() ? "the first node" : in.lock.job.host;
  const std::string want = "the same pins as " + first;
  const std::string nodes = std::to_string(in.lock.job.nodes) + " nodes";
  if (in.other_nodes.empty()) {
    out->push_back(
        MakeCheck(CheckName("nodes_pinned"), CheckStatus::kSkip, nodes, want,
                  "the other nodes' pins are in their own state directories: not compared here",
                  VerifiedBy::kProlog));
    return;
  }
  std::vector<std::string> differ, missing;
  for (const OtherNodePins& n : in.other_nodes) {
    if (!n.pins) {
      missing.push_back(n.node + " (" + n.problem + ")");
      continue;
    }
    const std::string d = PinsDiffer(in.lock, *n.pins);
    if (!d.empty()) differ.push_back(n.node + ": " + d);
  }
  if (!differ.empty()) {
    out->push_back(MakeCheck(CheckName("nodes_pinned"), CheckStatus::kFail,
                             nodes + ", " + std::to_string(differ.size()) + " different", want,
                             Join(differ, "; ") +
                                 ": the run's ranks would not run the same software on the same "
                                 "hardware",
                             VerifiedBy::kProlog));
  } else if (!missing.empty()) {
    out->push_back(MakeCheck(CheckName("nodes_pinned"), CheckStatus::kWarn,
                             nodes + ", " + std::to_string(missing.size()) + " without a record",
                             want, "no pins of " + Join(missing, ", "), VerifiedBy::kProlog));
  } else {
    out->push_back(MakeCheck(CheckName("nodes_pinned"), CheckStatus::kPass, nodes + ", same pins",
                             want,
                             "every node pinned the same versions, GPUs and container as " + first,
                             VerifiedBy::kProlog));
  }
}

}  // namespace pilot
