// pilot-epilog: the verdict of a pilot job.
//
// Runs as root on every node after a job (Slurm Epilog=). For a pilot job it
//  1. reads the job's lock.json (written by the prolog; root's, trusted);
//  2. reads STATE/jobs/JOBID/results.json, written by pilot-supervisor
//     (root) into the job's root-owned folder, and parses it strictly;
//     missing, invalid, not the supervisor's, or of another instance of
//     the job (lock.json's "instance") gives NO-GO with the reason;
//     everything in work/ is the user's and is never taken as results;
//  3. otherwise runs `pilot-runner verify --checkpoint DIR --config COPY
//     --expect RESULTS --json` as the job's user (setgid, initgroups,
//     setuid; clean environment; policy verify_timeout_seconds, then
//     SIGTERM/SIGKILL of its process group), and hashes the checkpoint's
//     manifest.json as the user: it must be the one the supervisor hashed
//     when the workload reported the checkpoint complete;
//  4. decides (a pure core function), signs with the policy's key_file
//     (HMAC-SHA256) and signing_key_file (Ed25519), each when readable,
//     stores STATE/verdicts/JOBID.json atomically (root, 0644; the folder
//     root's, 0755) through job::StoreVerdict, which moves a verdict of an
//     earlier instance into verdicts/history/ and keeps one of the same
//     instance (then nothing is posted);
//  5. POSTs the verdict to the policy's notify_url with
//     "X-Pilot-Signature-256: sha256=<hex HMAC of the body>", and queues it
//     in STATE/outbox/ when that fails (`pilot flush` delivers later).
//  6. once the verdict is stored (or queued, below), removes the job's work
//     folder (job/remove_tree.h: no link followed, no other file system
//     entered) unless the policy says keep_work.
// A verdict write that fails for want of space releases the state
// directory's reserve and tries again (job/reserve.h); a store that still
// fails queues the signed verdict in STATE/outbox/unstored/ for `pilot
// flush` to store, and when even that fails the report says `lost` and its
// note carries the decision and the failed checks for the log.
// On a job of several nodes, only the job's first node (the first host of
// SLURM_JOB_NODELIST, the batch host: job::FirstNodeIfOther) decides,
// whether the pilot started or not. Every other node skips: it leaves the
// job's folder and work folder alone, and removes its own pins
// (STATE/nodes/JOBID/NODE.json) unless the first node's job folder is in
// sight (a state directory the nodes share), where the first node's epilog
// compares and keeps them. Only when the first node is unknown (no node
// list that expands, or no SLURMD_NODENAME) does runner.started choose: a
// node without it skips.
// RunEpilog fails only when the node is broken (the state directory cannot
// be made, or the decision cannot be made); every problem of the job is a
// NO-GO verdict instead, and a full disk is no error.
//
// Thread-safety: single-threaded (forks helpers).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/decide/decide.h"
#include "core/records/lock.h"
#include "core/records/policy.h"
#include "core/records/results.h"
#include "core/base/status.h"
#include "core/records/verdict.h"
#include "job/job_env.h"
#include "job/state_layout.h"
#include "job/subprocess.h"

namespace pilot::epilog {

// What the epilog learned about the job, handed to the decision.
struct EpilogInputs {
  job::JobEnv job;
  std::optional<Lock> lock;
  std::string lock_problem;      // why `lock` is missing
  std::optional<Results> results;
  std::string results_problem;   // why `results` is missing or invalid
  std::string results_path;
  std::string config_copy;       // the prolog's copy of the config
  // `pilot-runner verify`, when it ran.
  bool verify_ran = false;
  int verify_exit_code = -1;     // core/records/exit_codes.h: kExitOk verified, kExitFailed
                                 // failed a check, kExitUsage usage/IO
  std::string verify_output;     // its stdout (JSON), at most 1 MiB
  std::string verify_problem;    // timed out, killed, could not start
  // The checkpoint's manifest.json now against the supervisor's hash of it
  // when the workload reported the checkpoint ("" = unchanged).
  std::string manifest_problem;
  // The container tag resolved again after the job (registry images pinned
  // from a tag only): Decide's container_tag check warns when it moved.
  std::string container_digest_now;
  std::string container_problem;  // the second lookup failed
  // A job of several nodes whose pilot did not finish: the job's nodes that
  // slurmctld reports down or not responding ("pn2 (Not responding)"),
  // which is why a job ends that no one cancelled (NodesDown below).
  std::vector<std::string> nodes_down;
  // A job of several nodes: the other nodes' records where this state
  // directory holds any (OtherNodesPins below).
  std::vector<OtherNodePins> other_nodes;
  int64_t now_unix = 0;
};

// The nodes of `scontrol show node -o` output whose State is DOWN,
// NOT_RESPONDING or FAIL, as "NAME (REASON)" (or "NAME (STATE)" without a
// reason); at most 64.
std::vector<std::string> NodesDownIn(const std::string& scontrol_output);

// The records the prologs of the job's other nodes wrote into
// STATE/nodes/JOBID/, one per node of the job's node list but this one
// (nullopt pins with the reason where a node's is missing or unreadable);
// empty when that folder does not exist here (the nodes do not share the
// state directory) or the job has one node.
std::vector<OtherNodePins> OtherNodesPins(const job::StateLayout& layout, const job::JobEnv& job);

// Moves those records beside the lock (JobPaths::nodes) and removes the
// emptied STATE/nodes/JOBID; a note for each that could not be moved.
std::string KeepNodeRecords(const job::StateLayout& layout, const job::JobEnv& job);

struct EpilogDeps {
  std::function<Result<job::CommandResult>(const job::CommandSpec&)> run = job::RunCommand;
  // The decision (core::Decide and the site's catalog behind it).
  std::function<Result<Verdict>(const EpilogInputs&, const Policy&)> decide;
  // POSTs body to policy.notify_url, signed for the receiver with `key`
  // (header X-Pilot-Signature-256; "" = unsigned).
  std::function<Status(const Policy&, const std::string& body, const std::string& key)> post;
  // Queues body for `pilot flush`.
  std::function<Status(const Policy&, int64_t job_id, const std::string& body)> enqueue;
  std::function<int64_t()> now_unix;
  // Seconds since the epilog started (a monotonic clock; null: 0), against
  // policy.epilog_timeout_seconds.
  std::function<double()> elapsed_seconds;
  // Registry reference -> digest (null: no second lookup).
  std::function<Result<std::string>(const std::string& reference)> resolve_digest;
};
EpilogDeps RealEpilogDeps(const Policy& policy);

// What happened, for the log line and tests.
struct EpilogReport {
  std::string verdict_path;
  Decision decision = Decision::kNoGo;
  bool signed_ok = false;      // HMAC-SHA256 (key_file)
  bool signed_ed25519 = false;  // Ed25519 (signing_key_file)
  std::string history_path;     // where the replaced verdict went ("" = none)
  bool posted = false;
  bool queued = false;
  bool skipped = false;  // a node of a multi-node job that did not run the pilot
  // The verdict could not be stored: queued here for `pilot flush` ("" = it
  // was stored, or `lost`).
  std::string unstored_path;
  bool lost = false;          // neither stored nor queued: only the log line holds it
  bool work_removed = false;  // the job's work folder is gone (not keep_work)
  std::string note;  // problems that did not change the verdict (post, key)
};

// REQUIRES: job.is_pilot; root. Errors: kIoError/kPermission when the
// state directory cannot be made (the node is broken).
Result<EpilogReport> RunEpilog(const Policy& policy, const job::JobEnv& job,
                               const EpilogDeps& deps);

// Gathers EpilogInputs (steps 1-3 above) without deciding.
EpilogInputs GatherInputs(const Policy& policy, const job::JobEnv& job, const EpilogDeps& deps);

}  // namespace pilot::epilog
