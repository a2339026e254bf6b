#include "epilog/epilog.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/base/atomic_file.h"
#include "core/records/checkpoint_meta.h"
#include "core/records/exit_codes.h"
#include "core/base/crypto.h"
#include "core/base/strings.h"
#include "core/records/verify_report.h"
#include "job/remove_tree.h"
#include "job/reserve.h"
#include "job/state_dir.h"
#include "job/state_layout.h"
#include "job/subprocess.h"
#include "job/verdict_history.h"
#include "core/records/hostlist.h"

namespace pilot::epilog {
namespace {

using job::CleanEnvironment;
using job::CommandResult;
using job::CommandSpec;
using job::JobEnv;
using job::RunAs;
using job::StateLayout;

RunAs UserOf(const JobEnv& job, std::string* home) {
  RunAs as{job.uid, job.gid, job.user};
  if (struct passwd* pw = getpwuid(job.uid)) {
    if (as.user.empty()) as.user = pw->pw_name;
    *home = pw->pw_dir;
  }
  return as;
}

double Elapsed(const EpilogDeps& deps) { return deps.elapsed_seconds ? deps.elapsed_seconds() : 0; }

}  // namespace

std::vector<std::string> NodesDownIn(const std::string& out) {
  std::vector<std::string> down;
  for (std::string_view text : SplitLines(out)) {
    if (down.size() >= 64) break;
    const std::string line = " " + std::string(text);
    // KEY=VALUE up to the next space.
    auto field = [&line](const std::string& key) -> std::string {
      const size_t k = line.find(" " + key + "=");
      if (k == std::string::npos) return "";
      const size_t v = k + key.size() + 2;
      return line.substr(v, line.find(' ', v) - v);
    };
    const std::string name = field("NodeName"), state = field("State");
    if (name.empty() || (state.find("DOWN") == std::string::npos && state.find("NOT_RESPONDING") == std::string::npos &&
                         state.find("FAIL") == std::string::npos)) {
      continue;
    }
    // Reason= runs to its " [user@time]" stamp (it may hold spaces).
    std::string reason;
    if (size_t k = line.find(" Reason="); k != std::string::npos) {
      reason = line.substr(k + 8);
      reason = reason.substr(0, std::min(reason.find(" ["), size_t{200}));
    }
    down.push_back(name + " (" + (reason.empty() ? state : reason) + ")");
  }
  return down;
}

namespace {

// The job's nodes slurmctld has taken down (scontrol, 5 s at most; nothing
// when it cannot be asked).
std::vector<std::string> NodesDown(const JobEnv& job, const EpilogDeps& deps) {
  static const std::string kScontrol = job::FindExecutable("scontrol");
  if (kScontrol.empty() || job.node_list.empty()) return {};
  CommandSpec spec;
  spec.argv = {kScontrol, "show", "node", "-o", job.node_list};
  spec.env = CleanEnvironment();
  if (const char* conf = std::getenv("SLURM_CONF")) spec.env.push_back(std::string("SLURM_CONF=") + conf);
  spec.timeout_seconds = 5;
  spec.max_output_bytes = 1 << 20;
  Result<CommandResult> r = deps.run(spec);
  if (!r.ok() || !r->Succeeded()) return {};
  return NodesDownIn(r->out);
}

}  // namespace

std::vector<OtherNodePins> OtherNodesPins(const StateLayout& layout, const JobEnv& job) {
  std::vector<OtherNodePins> out;
  struct stat sb {};
  if (job.nodes <= 1 || lstat(layout.NodeRecordsDir(job.job_id).c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    return out;
  }
  Result<std::vector<std::string>> hosts = pilot::ExpandHostlist(job.node_list);
  if (!hosts.ok()) return out;
  for (const std::string& host : *hosts) {
    if (host == job.host || out.size() >= 4096) continue;
    OtherNodePins n;
    n.node = host;
    const std::string file = layout.NodeRecordFile(job.job_id, host);
    Result<Lock> pins = ReadLock(file);
    if (!pins.ok()) {
      n.problem = pins.status().code() == Code::kNotFound ? "its prolog left no record" : pins.status().Message();
    } else if (pins->job.id != job.job_id) {
      n.problem = file + " is job " + std::to_string(pins->job.id) + "'s";
    } else {
      n.pins = std::move(pins).value();
    }
    out.push_back(std::move(n));
  }
  return out;
}

std::string KeepNodeRecords(const StateLayout& layout, const JobEnv& job) {
  const std::string dir = layout.NodeRecordsDir(job.job_id);
  struct stat sb {};
  if (lstat(dir.c_str(), &sb) != 0) return "";
  const std::string kept = layout.Job(job.job_id).nodes;
  std::vector<std::string> notes;
  Status made = job::MakeRootDir(kept, 0755);
  Result<std::vector<std::string>> hosts = pilot::ExpandHostlist(job.node_list);
  for (const std::string& host : hosts.ok() ? *hosts : std::vector<std::string>{}) {
    const std::string from = layout.NodeRecordFile(job.job_id, host);
    if (lstat(from.c_str(), &sb) != 0) continue;
    const std::string to = layout.KeptNodeRecordFile(job.job_id, host);
    if (!made.ok() || rename(from.c_str(), to.c_str()) != 0) {
      notes.push_back("cannot keep " + from + " in " + kept + ": " + (made.ok() ? std::strerror(errno) : made.Message()));
      unlink(from.c_str());
    }
  }
  if (rmdir(dir.c_str()) != 0 && errno != ENOENT) notes.push_back("cannot remove " + dir + ": " + std::strerror(errno));
  return Join(notes, "; ");
}

EpilogInputs GatherInputs(const Policy& policy, const JobEnv& job, const EpilogDeps& deps) {
  EpilogInputs in;
  in.job = job;
  in.now_unix = deps.now_unix();
  const StateLayout layout(policy.state_dir, policy.work_root);
  job::JobPaths paths = layout.Job(job.job_id);
  in.config_copy = paths.config;

  Result<Lock> lock = ReadLock(paths.lock);
  if (lock.ok()) {
    in.lock = std::move(lock).value();
  } else {
    in.lock_problem = "no usable lock.json (the prolog did not pin this job): " +
                      lock.status().Message();
  }

  std::string home;
  RunAs as = UserOf(job, &home);
  std::string why_ended = job.exit_code.empty() ? "" : " (job exit " + job.exit_code + ")";

  // results.json is pilot-supervisor's, in the job's root-owned folder: the
  // user cannot write it. A results.json in work/ is the user's and is not
  // read at all.
  in.results_path = paths.results;
  Result<Results> r = ReadResultsFile(paths.results);
  const bool refused = in.lock && std::any_of(in.lock->problems.begin(), in.lock->problems.end(),
                                              [](const LockProblem& p) {
                                                return p.code == job::kProblemStateSpaceLow;
                                              });
  if (!r.ok() && r.status().code() == Code::kNotFound && refused) {
    in.results_problem = "no results: the pilot was not started, the state directory's file "
                         "system being below the site's floor (state_space_low)";
  } else if (!r.ok() && r.status().code() == Code::kNotFound) {
    in.results_problem = "no results.json from the supervisor: the pilot did not finish "
                         "(crashed, killed, out of time or cancelled)" + why_ended;
  } else if (!r.ok()) {
    in.results_problem = "results.json is invalid: " + r.status().Message();
  } else if (!r->supervisor) {
    in.results_problem = "results.json was not written by pilot-supervisor";
  } else if (in.lock && r->instance != in.lock->instance) {
    in.results_problem = "results.json belongs to pilot instance \"" + r->instance.substr(0, 40) +
                         "\", not to this start of the job (\"" + in.lock->instance + "\")";
  } else {
    in.results = std::move(r).value();
  }
  if (in.lock && in.lock->container.method == "registry" && !in.lock->container.digest.empty() &&
      in.lock->container.reference.find('@') == std::string::npos && deps.resolve_digest) {
    Result<std::string> now = deps.resolve_digest(in.lock->container.reference);
    if (now.ok()) {
      in.container_digest_now = *now;
    } else {
      in.container_problem = now.status().Message();
    }
  }
  if (job.nodes > 1 && (!in.results || (in.results->supervisor && in.results->supervisor->stopped))) {
    in.nodes_down = NodesDown(job, deps);
  }
  in.other_nodes = OtherNodesPins(layout, job);
  if (!in.results || !in.lock) return in;

  std::string checkpoint = in.results->single ? in.results->single->checkpoint.path : "";
  if (checkpoint.empty()) {
    in.verify_problem = in.results->program
                            ? "no checkpoint of the program to verify: its reference process did "
                              "not finish"
                            : "results.json names no checkpoint to verify";
    return in;
  }
  CommandSpec verify;
  // A program's checkpoint (any format) is read file by file and compared
  // with the list the supervisor made, as the user, when the reference
  // process ended; the list lies in the job's root-owned folder.
  const bool program = in.results->program.has_value();
  if (program && in.results->program->checkpoint_files.empty()) {
    in.verify_problem = "the supervisor listed no checkpoint of the program";
    return in;
  }
  if (program) {
    verify.argv = {policy.runner_path, "verify", "--program-checkpoint", checkpoint,
                   "--expect-manifest", in.results->program->checkpoint_files, "--json"};
  } else {
    verify.argv = {policy.runner_path, "verify", "--checkpoint", checkpoint,
                   "--config",         paths.config, "--expect", in.results_path,
                   "--json"};
  }
  verify.env = CleanEnvironment(as.user, home);
  verify.run_as = as;
  verify.cwd = home.empty() ? "/" : home;
  bool budget_limited = false;
  verify.timeout_seconds = EpilogVerifySeconds(policy, Elapsed(deps), &budget_limited);
  verify.max_output_bytes = kMaxVerifyBytes;
  Result<CommandResult> v = deps.run(verify);
  if (!v.ok()) {
    in.verify_problem = "pilot-runner verify could not start: " + v.status().Message();
    return in;
  }
  in.verify_ran = !v->timed_out && !v->stopped && v->signal == 0 && v->exit_code <= kExitUsage;
  in.verify_exit_code = v->exit_code;
  in.verify_output = v->out;
  if (!in.verify_ran) {
    in.verify_problem = "pilot-runner verify " + v->Describe(verify.timeout_seconds);
    if (v->timed_out && budget_limited) {
      in.verify_problem += " (what was left of the epilog's epilog_timeout_seconds = " +
                           std::to_string(policy.epilog_timeout_seconds) + ")";
    }
    if (!v->err.empty()) in.verify_problem += ": " + FirstLine(v->err);
  } else if (v->exit_code == kExitUsage) {
    in.verify_problem = "pilot-runner verify could not check: " + FirstLine(v->err);
  }
  // A program's files were compared with the supervisor's list by verify.
  if (program) return in;
  const std::string manifest_now = job::Sha256AsUser(
      deps.run, checkpoint + "/" + kManifestFileName, as, as.user, home, kEpilogManifestSeconds);
  const std::string& manifest_then = in.results->supervisor->checkpoint_manifest_sha256;
  if (manifest_then.empty()) {
    in.manifest_problem = "the supervisor recorded no manifest for the checkpoint";
  } else if (manifest_now != manifest_then) {
    in.manifest_problem = "the checkpoint's manifest.json changed after the workload reported "
                          "it complete (sha256 " + manifest_then.substr(0, 12) + "... then, " +
                          (manifest_now.empty() ? "unreadable" : manifest_now.substr(0, 12) + "...") +
                          " now)";
  }
  return in;
}

namespace {

// After the verdict is safe (stored, or queued for `pilot flush`): the
// job's work folder goes unless the policy keeps it (keep_work). It is the
// user's: removed from descriptors, no link followed, no other file system
// entered (job/remove_tree.h).
void RemoveWork(const Policy& policy, const std::string& work, EpilogReport* report) {
  if (policy.keep_work) return;
  Result<job::RemovedTree> removed = job::RemoveTree(work);
  if (!removed.ok()) {
    report->note += (report->note.empty() ? "" : "; ") + std::string("work folder kept: ") +
                    removed.status().Message();
    return;
  }
  report->work_removed = removed->left.empty();
  if (!removed->left.empty()) {
    report->note += (report->note.empty() ? "" : "; ") + std::string("work folder only partly "
                    "removed: ") + removed->left;
  }
}

// One line for a verdict that could be kept nowhere: its decision and the
// checks that did not pass, so the log holds what the job's user is owed.
std::string VerdictSummary(const Verdict& v) {
  std::string out = std::string(DecisionName(v.decision));
  for (const Check& c : v.checks) {
    if (c.status == CheckStatus::kPass || c.status == CheckStatus::kSkip) continue;
    out += "; " + c.name + ": " + FirstLine(c.detail);
  }
  return out;
}

}  // namespace

Result<EpilogReport> RunEpilog(const Policy& policy, const JobEnv& job, const EpilogDeps& deps) {
  const StateLayout layout(policy.state_dir, policy.work_root);
  PILOT_RETURN_IF_ERROR(job::EnsureStateDir(layout));
  EpilogReport report;
  auto add_note = [&report](const std::string& n) {
    report.note += (report.note.empty() ? "" : "; ") + n;
  };
  const job::LogLine log = add_note;
  // Made again whenever there is room (released by an earlier write).
  Result<bool> reserve = job::EnsureReserve(layout, int64_t{policy.state_reserve_mb} << 20);
  if (!reserve.ok()) add_note(reserve.status().Message());
  // A job of several nodes runs its pilot on its first (the batch host),
  // whose epilog makes the verdict, the pilot started or not. The others
  // have nothing to judge and must not write a second verdict into a
  // shared state folder. Where the first node's job folder is in sight
  // (a state directory the nodes share) their record (the prolog's) stays
  // for that epilog to compare and keep; elsewhere they remove it.
  const job::JobPaths paths = layout.Job(job.job_id);
  if (std::optional<std::string> first = job::FirstNodeIfOther(job)) {
    struct stat jb {};
    const bool shared = lstat(paths.dir.c_str(), &jb) == 0 && S_ISDIR(jb.st_mode);
    const std::string record = layout.NodeRecordFile(job.job_id, job.host);
    if (!shared) {
      if (unlink(record.c_str()) != 0 && errno != ENOENT) {
        add_note("cannot remove " + record + ": " + std::strerror(errno));
      }
      rmdir(layout.NodeRecordsDir(job.job_id).c_str());  // the last node's removes it
    }
    add_note("node " + job.host + ": the pilot ran on the job's first node, " + *first +
             ", whose epilog makes the verdict" + (shared ? " and keeps this node's pins" : ""));
    report.skipped = true;
    return report;
  }
  struct stat sb {};
  if (job.nodes > 1 && !job::FirstNode(job) && stat(paths.started.c_str(), &sb) != 0) {
    // Which node is first is unknown (no node list or node name): the one
    // where the pilot started judges it.
    report.note = "the pilot did not run on this node";
    report.skipped = true;
    return report;
  }
  EpilogInputs in = GatherInputs(policy, job, deps);
  PILOT_ASSIGN_OR_RETURN(Verdict v, deps.decide(in, policy));

  report.decision = v.decision;
  // A verdict without one of its signatures is stored all the same (the
  // user learns the outcome); `pilot grant` needs one that verifies.
  Result<std::string> key = ReadKeyFile(policy.key_file);
  if (!key.ok()) add_note("verdict not signed: " + key.status().Message());
  Result<std::string> ed25519 = ReadEd25519PrivateKeyFile(policy.signing_key_file);
  if (!ed25519.ok()) add_note("no ed25519 signature: " + ed25519.status().Message());
  Status sign = SignVerdict(&v, key.ok() ? *key : "", ed25519.ok() ? *ed25519 : "");
  if (!sign.ok()) add_note("verdict not signed: " + sign.Message());
  report.signed_ok = sign.ok() && !v.signature.empty();
  report.signed_ed25519 = sign.ok() && !v.signature_ed25519.empty();
  std::string body = VerdictToJson(v);
  // A store that fails (a full file system even after the reserve) is no
  // broken node: the verdict waits in the outbox's unstored/ folder for
  // `pilot flush`, or, when even that fails, its decision goes to the log.
  Result<job::StoredVerdictFile> stored =
      job::StoreVerdict(layout, job.job_id, job::VerdictInstance(v), body, log,
                        paths.verdict_space);
  if (stored.ok()) {
    report.verdict_path = stored->path;
    report.history_path = stored->moved_to;
    if (!stored->note.empty()) add_note(stored->note);
  } else {
    add_note("cannot store the verdict: " + stored.status().Message());
    Result<std::string> queued = job::QueueUnstoredVerdict(layout, job.job_id, body, log);
    if (queued.ok()) {
      report.unstored_path = *queued;
      add_note("queued in " + *queued + " for `pilot flush` to store");
    } else {
      report.lost = true;
      add_note("cannot queue it either: " + queued.status().Message() +
               "; the verdict was " + VerdictSummary(v));
    }
  }
  if (!report.lost) RemoveWork(policy, paths.work, &report);
  if (const std::string kept = KeepNodeRecords(layout, job); !kept.empty()) add_note(kept);
  if (stored.ok() && stored->kept) return report;  // the first run posted what is stored

  if (policy.notify_url.empty()) return report;
  // Why the verdict waits in the outbox for `pilot flush` ("" = posted).
  std::string unsent;
  if (job::StopSignal() != 0) {
    unsent = "not posted: the epilog was asked to stop";
  } else if (!EpilogCanPost(policy, Elapsed(deps))) {  // no time for a post and its retries
    unsent = "not posted: too little of epilog_timeout_seconds left";
  } else if (Status posted = deps.post(policy, body, key.ok() ? *key : ""); !posted.ok()) {
    unsent = "post failed: " + posted.Message();
  } else {
    report.posted = true;
    return report;
  }
  Status queued = deps.enqueue(policy, job.job_id, body);
  report.queued = queued.ok();
  add_note(unsent + (queued.ok() ? " (queued in outbox)" : "; outbox: " + queued.Message()));
  return report;
}

}  // namespace pilot::epilog
