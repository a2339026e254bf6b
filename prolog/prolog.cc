#include "prolog/prolog.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/base/rfc3339.h"
#include "core/base/strings.h"
#include "core/config/config.h"
#include "core/config/load.h"
#include "job/job_user_file.h"
#include "job/reserve.h"
#include "job/state_dir.h"
#include "job/state_layout.h"
#include "job/verdict_history.h"
#include "prolog/pin_parts.h"
#include "prolog/pin_session.h"

namespace pilot::prolog {
namespace {

using job::CleanEnvironment;
using job::CommandResult;
using job::CommandSpec;
using job::JobEnv;

// A pilot's prolog on one node: the job's folder and work folder made
// (an earlier start's moved aside), the lock pinned (pin_parts.h) and
// written; on another node of the job, that node's record.
class Pinner {
 public:
  Pinner(const PrologOptions& opts, const JobEnv& job, const PrologDeps& deps)
      : s_(opts, job, deps) {}

  Status Run() {
    const job::StateLayout layout(s_.opts().state_dir, s_.opts().work_root);
    if (std::optional<std::string> first = job::FirstNodeIfOther(s_.job())) {
      return RunOnOtherNode(layout, *first);
    }
    job::JobPaths paths = layout.Job(s_.job().job_id);
    PILOT_ASSIGN_OR_RETURN(std::string instance, NewInstance());
    RetireEarlierVerdicts(layout, instance);
    Status made = MoveAsideEarlier(layout, paths);
    if (made.ok()) made = job::MakeRootDir(paths.dir, 0755);
    if (!made.ok()) {
      // A full file system is no broken node (a user may have filled it):
      // without a lock the task refuses and the epilog issues NO-GO.
      if (!job::IsOutOfSpace(made)) return made;
      s_.Log("cannot make the job's folder: " + made.Message() +
             "; no lock: the task will not run the pilot and the verdict is NO-GO");
      return Status::Ok();
    }
    RefuseBelowFloor(layout);
    SetAsideVerdictSpace(paths.verdict_space);
    PILOT_RETURN_IF_ERROR(PrepareWork(layout, paths.work));

    s_.lock().instance = instance;
    s_.FillJob();
    s_.lock().config.path = s_.job().config_path;
    s_.lock().config.copy = paths.config;
    s_.lock().config.sha256_submitted = s_.job().config_sha256;

    std::optional<Config> cfg = CopyConfig(paths.config);
    PinSeed(s_, cfg);
    PinIdentityParts(s_, cfg);
    PinVersions(s_);
    PinGpus(s_);
    s_.lock().identity = RunIdentity(s_.lock());
    s_.lock().created = FormatRfc3339(s_.deps().now_unix());
    Status w = job::WriteWithReserve(layout, paths.lock, LockToJson(s_.lock()), 0644, s_.LogTo());
    if (!w.ok() && job::IsOutOfSpace(w)) {
      s_.Log("cannot write the lock: " + w.Message() +
             "; no lock: the task will not run the pilot and the verdict is NO-GO");
      return Status::Ok();
    }
    return w;
  }

  // What a run of the job's config (its config_path) pins now, with the job's
  // user's rights, as Run() pins a pilot: the lock's parts its identity is
  // made of (a long job's binding check, prolog/binding.cc). Nothing is
  // written; what could not be pinned is in the lock's problems.
  Lock PinForIdentity() {
    s_.FillJob();
    Result<std::string> text = s_.ReadConfigAsUser(s_.job().config_path);
    if (!text.ok()) {
      s_.Problem("config_unreadable", text.status().Message());
      return s_.lock();
    }
    s_.lock().config.path = s_.job().config_path;
    s_.lock().config.sha256_copied = Sha256Hex(*text);
    PinIdentityParts(s_, s_.ParseJobConfig(*text));
    return s_.lock();
  }

 private:
  // Another node of a job of several. The job's folder, its lock and its
  // work folder are the first node's, whose prolog may run after this one
  // (and, in a state directory the nodes share, would take a folder made
  // here for an earlier instance): this node touches none of them. It pins
  // what it has (versions, GPUs) into its own record and never fails the
  // job for it.
  Status RunOnOtherNode(const job::StateLayout& layout, const std::string& first) {
    s_.FillJob();
    PinSeed(s_, std::nullopt);  // the config is the first node's to read
    PinContainer(s_, OtherNodeImage());
    PinVersions(s_);
    PinGpus(s_);
    s_.lock().created = FormatRfc3339(s_.deps().now_unix());
    const std::string file = layout.NodeRecordFile(s_.job().job_id, s_.job().host);
    Status s = job::MakeRootDir(layout.NodesDir(), 0755);
    if (s.ok()) s = job::MakeRootDir(layout.NodeRecordsDir(s_.job().job_id), 0755);
    if (s.ok()) s = job::WriteWithReserve(layout, file, LockToJson(s_.lock()), 0644, s_.LogTo());
    s_.Log(
        std::string("node ") + s_.job().host + " of " + std::to_string(s_.job().nodes) +
        "; the pilot runs on the first, " + first +
        (s.ok() ? "; this node pinned into " + file : "; cannot record this node: " + s.Message()));
    return Status::Ok();
  }

  // The image another node pins: the config's (read as the user, and only
  // the text submitted), else pyxis' --container-image. A task of the
  // pilot's srun step on this node runs in no other
  // (supervisor/program/container_task.h).
  std::string OtherNodeImage() {
    const JobEnv& j = s_.job();
    if (j.config_path.empty() || j.config_sha256.empty()) return j.container_image;
    Result<std::string> text = s_.ReadConfigAsUser(j.config_path);
    if (!text.ok() || Sha256Hex(*text) != j.config_sha256) return j.container_image;
    Result<Config> cfg = ParseConfig(*text, j.config_path,
                                     job::JobConfigOptions(j, s_.user().as.user, s_.user().home));
    return cfg.ok() && !cfg->container.image.empty() ? cfg->container.image : j.container_image;
  }

  static Result<std::string> NewInstance() {
    PILOT_ASSIGN_OR_RETURN(std::string bytes, RandomBytes(16));
    return HexEncode(bytes);
  }

  // Below the policy's floor of free space on the state directory's file
  // system a new pilot is refused: the lock problem state_space_low (the
  // task does not start it, the verdict is NO-GO), never a failed prolog.
  void RefuseBelowFloor(const job::StateLayout& layout) {
    Result<std::optional<int64_t>> below = job::FreeBelowFloor(layout, s_.opts().floor_bytes);
    if (!below.ok()) {
      s_.Log("cannot measure the state directory's free space: " + below.status().Message());
      return;
    }
    if (!*below) return;
    constexpr int64_t kMiB = int64_t{1} << 20;
    const std::string detail =
        "the state directory's file system (" + layout.root() + ") has " +
        std::to_string(**below / kMiB) + " MiB free, below the site's floor of " +
        std::to_string(s_.opts().floor_bytes / kMiB) +
        " MiB (state_floor_mb): pilots are refused, and their jobs' commands not run, until "
        "space is freed there";
    s_.Problem(job::kProblemStateSpaceLow, detail);
    s_.Log("refusing the pilot: " + detail);
  }

  // The blocks the verdict will be written into, taken now, before the
  // job's work (or another user's) can take them (job/reserve.h). Without
  // them the epilog writes the verdict anew, from free space or the reserve.
  void SetAsideVerdictSpace(const std::string& path) {
    Status s = job::SetAsideVerdictSpace(path);
    if (!s.ok()) {
      s_.Log("cannot set space aside for the verdict: " + s.Message() +
             "; the epilog will need free space to store it");
    }
  }

  // A verdict stored (or queued for `pilot flush`) under this job id is an
  // earlier start's: it goes to the history now, before this start can be
  // read as having it. One that cannot be moved is logged; the job runs.
  void RetireEarlierVerdicts(const job::StateLayout& layout, const std::string& instance) {
    job::RetiredVerdicts r = job::RetireEarlierVerdicts(layout, s_.job().job_id, instance);
    for (const std::string& to : r.moved_to) s_.Log("an earlier start's verdict moved to " + to);
    if (!r.error.ok()) {
      s_.Log("cannot move an earlier start's verdict aside: " + r.error.Message() +
             "; it reads as this job's until this job's verdict replaces it");
    }
  }

  // A folder for this job id from an earlier start (a requeue, or an id
  // Slurm hands out again after its state was reset) is never reused: it
  // goes into the root-only attic, named after its instance, with
  // everything in it (the earlier user's work/ included).
  Status MoveAsideEarlier(const job::StateLayout& layout, const job::JobPaths& paths) {
    struct stat sb {};
    if (lstat(paths.dir.c_str(), &sb) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return Status::IoError(paths.dir, std::strerror(errno));
    }
    std::string& name = earlier_;
    Result<Lock> old = ReadLock(paths.lock);
    if (old.ok() && !old->instance.empty() &&
        old->instance.find_first_not_of("0123456789abcdef") == std::string::npos) {
      name = old->instance;
    } else {
      name = "t" + std::to_string(static_cast<int64_t>(sb.st_mtime));
    }
    std::string target = layout.AtticFor(s_.job().job_id, name);
    for (int i = 0; i < 8 && lstat(target.c_str(), &sb) == 0; ++i) {
      Result<std::string> more = RandomBytes(4);
      target = layout.AtticFor(s_.job().job_id, name + "-" + HexEncode(more.ok() ? *more : "x"));
    }
    if (rename(paths.dir.c_str(), target.c_str()) != 0) {
      return Status::IoError(paths.dir, std::string("cannot move an earlier instance aside to ") +
                                            target + ": " + std::strerror(errno));
    }
    s_.Log("earlier instance moved to " + target);
    return Status::Ok();
  }

  // The job's work folder, the user's: moves a kept one of an earlier start
  // of the job id aside (under a work root; inside the job's folder it moved
  // with it), makes it, warns when it shares the state directory's file
  // system, runs the site's quota command. A full file system or a failed
  // quota command is the job's problem (in the lock), never the node's.
  Status PrepareWork(const job::StateLayout& layout, const std::string& work) {
    Status s = MoveAsideEarlierWork(layout, work);
    if (s.ok()) s = MakeWork(work);
    if (!s.ok()) {
      if (!job::IsOutOfSpace(s)) return s;
      s_.Problem("work_unavailable", s.Message());
      return Status::Ok();
    }
    if (!layout.work_root().empty()) {
      struct stat state_sb {}, work_sb {};
      if (stat(layout.root().c_str(), &state_sb) == 0 &&
          stat(layout.work_root().c_str(), &work_sb) == 0 && state_sb.st_dev == work_sb.st_dev) {
        s_.Log("warning: work_root " + layout.work_root() + " is on the same file system as " +
               "state_dir " + layout.root() + ": a user who fills it can keep locks and verdicts " +
               "from being written (pilot.conf(5))");
      }
    }
    RunQuotaCommand(work);
    return Status::Ok();
  }

  Status MoveAsideEarlierWork(const job::StateLayout& layout, const std::string& work) {
    if (layout.work_root().empty()) return Status::Ok();
    struct stat sb {};
    if (lstat(work.c_str(), &sb) != 0) {
      if (errno == ENOENT) return Status::Ok();
      return Status::IoError(work, std::strerror(errno));
    }
    PILOT_RETURN_IF_ERROR(job::MakeRootDir(layout.WorkAtticDir(), 0700));
    const std::string name =
        earlier_.empty() ? "t" + std::to_string(static_cast<int64_t>(sb.st_mtime)) : earlier_;
    std::string target = layout.WorkAtticFor(s_.job().job_id, name);
    for (int i = 0; i < 8 && lstat(target.c_str(), &sb) == 0; ++i) {
      Result<std::string> more = RandomBytes(4);
      target =
          layout.WorkAtticFor(s_.job().job_id, name + "-" + HexEncode(more.ok() ? *more : "x"));
    }
    if (rename(work.c_str(), target.c_str()) != 0) {
      return Status::IoError(work, std::string("cannot move an earlier work folder aside to ") +
                                       target + ": " + std::strerror(errno));
    }
    s_.Log("earlier work folder moved to " + target);
    return Status::Ok();
  }

  // policy work_quota_command WORK_DIR UID JOBID, as root, time-limited.
  void RunQuotaCommand(const std::string& work) {
    if (s_.opts().work_quota_command.empty()) return;
    CommandSpec spec;
    spec.argv = {s_.opts().work_quota_command, work, std::to_string(s_.job().uid),
                 std::to_string(s_.job().job_id)};
    spec.env = CleanEnvironment();
    spec.timeout_seconds = s_.opts().command_timeout_seconds;
    spec.max_output_bytes = 64 << 10;
    Result<CommandResult> r = s_.RunBounded(spec);
    if (r.ok() && r->Succeeded()) return;
    std::string why = r.ok() ? r->Describe(spec.timeout_seconds) : r.status().Message();
    if (r.ok()) {
      const std::string err(Trim(r->err));
      if (!err.empty()) why += ": " + err.substr(0, std::min(err.find('\n'), size_t{300}));
    }
    s_.Problem("work_quota_failed", s_.opts().work_quota_command + " " + work + ": " + why);
  }

  Status MakeWork(const std::string& work) {
    if (mkdir(work.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::IoError(work, std::string("mkdir: ") + std::strerror(errno));
    }
    // The parent is root's, so the user cannot have swapped `work` for a
    // link; lchown anyway so a link is never followed.
    struct stat sb {};
    if (lstat(work.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      return Status::IoError(work, "not a directory");
    }
    if (lchown(work.c_str(), s_.job().uid, s_.job().gid) != 0 || chmod(work.c_str(), 0700) != 0) {
      return Status::Permission(work, std::string("chown: ") + std::strerror(errno));
    }
    return Status::Ok();
  }

  std::optional<Config> CopyConfig(const std::string& copy_path) {
    if (s_.job().config_path.empty()) {
      s_.Problem("config_missing",
                 "the job carries no pilot config path (submitted without "
                 "the spank_pilot plugin?)");
      return std::nullopt;
    }
    Result<std::string> text = s_.ReadConfigAsUser(s_.job().config_path);
    if (!text.ok()) {
      s_.Problem("config_unreadable", text.status().Message());
      return std::nullopt;
    }
    s_.lock().config.sha256_copied = Sha256Hex(*text);
    // Root's, readable by the job's user only: it may carry the user's
    // secrets (program.env), and the runner reads it as the user.
    Status w = job::WriteJobUserFile(job::StateLayout(s_.opts().state_dir), copy_path, *text,
                                     s_.job().uid, s_.job().gid, s_.LogTo());
    if (!w.ok()) {
      s_.Problem("config_copy_failed", w.Message());
      return std::nullopt;
    }
    if (s_.lock().config.sha256_submitted.empty()) {
      s_.Problem("config_unverified", "no sha256 was recorded at submission");
    } else if (s_.lock().config.sha256_submitted != s_.lock().config.sha256_copied) {
      s_.Problem("config_changed",
                 s_.job().config_path + " changed between submission and job start (sha256 " +
                     s_.lock().config.sha256_submitted.substr(0, 12) + "... at submit, " +
                     s_.lock().config.sha256_copied.substr(0, 12) + "... at start)");
    }
    return s_.ParseJobConfig(*text);
  }

  PinSession s_;
  std::string earlier_;  // the name an earlier instance went to the attic under
};

}  // namespace

int64_t SeedFromJobId(int64_t job_id) {
  uint64_t x = static_cast<uint64_t>(job_id) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<int64_t>(x & 0x7FFFFFFFull);
}

Lock PinForIdentity(const PrologOptions& opts, const JobEnv& job, const PrologDeps& deps) {
  Pinner pinner(opts, job, deps);
  return pinner.PinForIdentity();
}

Status RunProlog(const PrologOptions& opts, const JobEnv& job, const PrologDeps& deps) {
  const job::StateLayout layout(opts.state_dir, opts.work_root);
  PILOT_RETURN_IF_ERROR(job::EnsureStateDir(layout));
  // Made again whenever there is room (released by an earlier write).
  Result<bool> reserve = job::EnsureReserve(layout, opts.reserve_bytes);
  if (!reserve.ok()) {
    std::fprintf(stderr, "pilot-prolog: job %lld: %s\n", static_cast<long long>(job.job_id),
                 reserve.status().ToString().c_str());
  }
  if (!job.is_pilot) return BindRun(opts, job, deps);
  Pinner pinner(opts, job, deps);
  return pinner.Run();
}

}  // namespace pilot::prolog
