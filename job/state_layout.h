// Every path under the pilot state directory (the policy's state_dir, the
// plugin's state_dir= argument) and under the work root (the policy's
// work_root), spelled here and nowhere else:
//
//   STATE/jobs/                      root 0755   one folder per pilot job
//   STATE/jobs/JOBID/                root 0755   made by the prolog
//   STATE/jobs/JOBID/config.toml     root 0600+  the prolog's copy of the config
//   STATE/jobs/JOBID/lock.json       root 0644   what the prolog pinned
//   STATE/jobs/JOBID/runner.started  root 0644   claimed by the task that runs the pilot
//   STATE/jobs/JOBID/results.json    root 0600+  written by pilot-supervisor
//                                    (0600+: readable by root and the job's user
//                                    only, through the ACL entry user:UID:r--, or
//                                    root:GID 0640 without ACLs; job/job_user_file.h)
//   STATE/jobs/JOBID/verdict.space   root 0600   preallocated by the prolog for the verdict;
//                                                the epilog writes the verdict into it and
//                                                renames it to verdicts/JOBID.json
//   STATE/jobs/JOBID/metrics/        root 0711   a user's program's records: the sockets the
//                                                supervisor listens on there, one per phase
//   STATE/jobs/JOBID/checkpoint-files-STAGE.json
//                                    root 0644   a program's checkpoint as the supervisor
//                                                listed it after STAGE (single, node)
//   STATE/jobs/JOBID/work/           user 0700   the workload's default --out folder
//                                                (checkpoints, metrics, logs) when
//                                                work_root is "" (the default)
//   WORK/JOBID/                      user 0700   the same folder when work_root is set
//                                                (WORK = work_root, root 0755, best on
//                                                another file system than STATE)
//   WORK/attic/JOBID-INSTANCE/       root 0700   a kept work folder of an earlier
//                                                instance of the job id (keep_work)
//   STATE/attic/                     root 0700   earlier instances of a job id
//   STATE/attic/JOBID-INSTANCE/                  (a requeue, an id Slurm handed
//                                                out again), moved aside by the
//                                                prolog, never given to a user
//   STATE/verdicts/                  root 0755
//   STATE/verdicts/JOBID.json        root 0644   the latest signed verdict (epilog)
//   STATE/verdicts/history/          root 0755   made when a verdict is replaced
//   STATE/verdicts/history/JOBID-INSTANCE.json
//                                    root 0644   a replaced verdict, never overwritten
//                                                (JOBID-INSTANCE.N.json for the Nth clash);
//                                                an earlier start's moves here when the
//                                                prolog of a new start of JOBID runs
//   STATE/outbox/                    root 0700   verdicts not yet posted (core/records/outbox.h)
//   STATE/grants/                    root 0755   made by `pilot grant`
//   STATE/grants/JOBID.json          root 0644   one granted reservation
//   STATE/runs/                      root 0755   made by the prolog of a job with --pilot-run
//   STATE/runs/JOBID.json            root 0644   that long job's binding check (job/binding.h)
//   STATE/refusals/                  SlurmUser 0755  made by the site (job_submit.lua's
//                                                REFUSALS_DIR), written by slurmctld
//   STATE/refusals/JOBID.json        SlurmUser 0644  the last change to JOBID that
//                                                job_submit.lua refused (job/refusal.h)
//   STATE/reserve                    root 0600   space kept free for locks and verdicts
//                                                (job/reserve.h)
//   STATE/outbox/unstored/           root 0700   signed verdicts the epilog could not
//   STATE/outbox/unstored/JOBID.json root 0600   store; `pilot flush` stores them
//   STATE/nodes/JOBID/NODE.json      root 0644   what the prolog of another node of a
//                                                job of several pinned there (the
//                                                first node holds the job's folder);
//                                                where the nodes share STATE the first
//                                                node's epilog compares it with the
//                                                lock and moves it to
//   STATE/jobs/JOBID/nodes/NODE.json root 0644   (beside the lock); elsewhere that
//                                                node's epilog removes it
//
// JOBID/ holds one instance of the job (lock.json's "instance"): the prolog
// moves an older one into the attic before it makes a new one. The
// supervisor writes the instance's results.json next to the lock; the
// workload writes its metrics and checkpoints into the folder it is given
// with --out (ResultsIn() names the results.json a runner started by hand
// writes there). That work folder is the only place under either root a
// user can write: with work_root set it lies outside STATE, so a user who
// fills its file system cannot keep the prolog from writing a lock or the
// epilog from storing a verdict. The runner spells its own names: it learns every path on
// its command line.
//
// A layout is a value: it never touches the disk (EnsureStateDir in
// job/state_dir.h makes the folders). The state directory is used as given,
// so every path is STATE + "/" + something (WORK + "/" + something for the
// work folders); callers pass absolute paths (the policy and the plugin
// arguments insist on them).
//
// Job ids are Slurm's, written in decimal without leading zeros.
// REQUIRES: job_id >= 0 for every function taking one.
//
// Thread-safety: immutable after construction; safe to share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pilot::job {

// One job's folder and the files in it.
struct JobPaths {
  std::string dir;      // STATE/jobs/JOBID
  std::string config;   // DIR/config.toml
  std::string lock;     // DIR/lock.json
  std::string started;  // DIR/runner.started
  std::string results;  // DIR/results.json (pilot-supervisor's)
  std::string work;     // DIR/work, or WORK/JOBID when the layout has a work root
  std::string nodes;    // DIR/nodes: the other nodes' records, kept by the first node's epilog
  std::string metrics;  // DIR/metrics: the sockets a user's program reports on (program mode)
  // DIR/verdict.space: the blocks the verdict will be written into, set
  // aside by the prolog before the job's work can take them (job/reserve.h)
  std::string verdict_space;

  // DIR/checkpoint-files-STAGE.json: the files of a user's program's
  // checkpoint as the supervisor listed them after `stage` ("single",
  // "node"; the caller passes a name of [a-z] characters).
  std::string CheckpointFiles(std::string_view stage) const;
};

class StateLayout {
 public:
  // `work_root` "" keeps each job's work folder inside its job folder.
  explicit StateLayout(std::string state_dir, std::string work_root = "");

  const std::string& root() const { return root_; }
  // The policy's work_root ("" = work folders under JobsDir()).
  const std::string& work_root() const { return work_root_; }

  // The folders directly under the state directory.
  std::string JobsDir() const;
  std::string VerdictsDir() const;
  std::string VerdictHistoryDir() const;  // VerdictsDir()/history
  std::string OutboxDir() const;
  std::string GrantsDir() const;
  // STATE/runs: the long jobs' run records (job/binding.h).
  std::string RunsDir() const;
  // STATE/refusals: the changes job_submit.lua refused (job/refusal.h).
  std::string RefusalsDir() const;
  std::string AtticDir() const;
  // ATTIC/JOBID-INSTANCE ("JOBID-" + `instance`; the caller passes a name
  // of [0-9a-z] characters).
  std::string AtticFor(int64_t job_id, const std::string& instance) const;
  // WORK/attic and WORK/attic/JOBID-INSTANCE (as AtticFor); "" when the
  // layout has no work root (a work folder then moves with its job folder).
  std::string WorkAtticDir() const;
  std::string WorkAtticFor(int64_t job_id, const std::string& instance) const;
  // STATE/reserve: the preallocated file job/reserve.h releases when the
  // state directory's file system is full.
  std::string ReserveFile() const;
  // OUTBOX/unstored and OUTBOX/unstored/JOBID.json: a signed verdict the
  // epilog could not store in VerdictsDir(); `pilot flush` stores it. Not
  // a file the outbox posts (core/records/outbox.h lists only its own folder).
  std::string UnstoredDir() const;
  std::string UnstoredFile(int64_t job_id) const;

  // STATE/nodes, STATE/nodes/JOBID and STATE/nodes/JOBID/NODE.json: the
  // record of a job's node other than its first. NODE is Slurm's node name
  // with every byte but [A-Za-z0-9._-] replaced by '_', at most 64 of them.
  std::string NodesDir() const;
  std::string NodeRecordsDir(int64_t job_id) const;
  std::string NodeRecordFile(int64_t job_id, std::string_view node) const;
  // JobPaths::nodes/NODE.json, NODE spelled as for NodeRecordFile.
  std::string KeptNodeRecordFile(int64_t job_id, std::string_view node) const;

  JobPaths Job(int64_t job_id) const;
  std::string VerdictFile(int64_t job_id) const;
  // VerdictHistoryDir()/JOBID-INSTANCE.json, or JOBID-INSTANCE.N.json for
  // clash > 0. INSTANCE is `instance` with every byte but [A-Za-z0-9._-]
  // replaced by '_', at most 64 of them ("none" when empty), so the name
  // stays inside the folder whatever the prolog recorded.
  std::string VerdictHistoryFile(int64_t job_id, std::string_view instance, int clash = 0) const;
  std::string GrantFile(int64_t job_id) const;
  std::string RunFile(int64_t job_id) const;      // RunsDir()/JOBID.json
  std::string RefusalFile(int64_t job_id) const;  // RefusalsDir()/JOBID.json

  // OUT/results.json: what the runner writes into its --out folder (the
  // job's work folder unless the user gave --pilot-out).
  static std::string ResultsIn(const std::string& out_dir);

  // The job id a word names: 1 to 12 decimal digits ("4242"); nullopt for
  // anything else (a path, a sign, a space, too many digits).
  static std::optional<int64_t> ParseJobId(std::string_view word);

  // The job whose verdict a file name in VerdictsDir() holds ("4242.json"
  // -> 4242); nullopt for other names (temporary files, stray files).
  static std::optional<int64_t> JobOfVerdictFile(std::string_view file_name);

  // The job whose replaced verdict a file name in VerdictHistoryDir() holds
  // ("4242-abc.json" -> 4242); nullopt for other names.
  static std::optional<int64_t> JobOfHistoryFile(std::string_view file_name);

 private:
  std::string root_;
  std::string work_root_;
};

}  // namespace pilot::job
