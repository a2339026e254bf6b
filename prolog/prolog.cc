#include "prolog/prolog.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/base/atomic_file.h"
#include "core/config/config.h"
#include "core/config/load.h"
#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/base/rfc3339.h"
#include "core/base/strings.h"
#include "job/job_user_file.h"
#include "job/pins.h"
#include "job/reserve.h"
#include "job/state_dir.h"
#include "job/state_layout.h"
#include "job/verdict_history.h"

namespace pilot::prolog {
namespace {

using job::CleanEnvironment;
using job::CommandResult;
using job::CommandSpec;
using job::FindExecutable;
using job::JobEnv;
using job::RunAs;

// Everything the prolog needs about the user, resolved once.
struct User {
  RunAs as;
  std::string home;
};

User ResolveUser(const JobEnv& job) {
  User u;
  u.as.uid = job.uid;
  u.as.gid = job.gid;
  u.as.user = job.user;
  if (struct passwd* pw = getpwuid(job.uid)) {
    if (u.as.user.empty()) u.as.user = pw->pw_name;
    u.home = pw->pw_dir;
  }
  return u;
}

class Pinner {
 public:
  Pinner(const PrologOptions& opts, const JobEnv& job, const PrologDeps& deps)
      : opts_(opts),
        job_(job),
        deps_(deps),
        user_(ResolveUser(job)),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(
                      static_cast<int64_t>(opts.total_timeout_seconds * 1000))) {}

  // `limit` cut to the time left; 0 when none is left (recorded once).
  double Budget(double limit) {
    double left = std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now())
                      .count();
    if (left <= 0) {
      if (!timed_out_) {
        Problem("prolog_timeout", "pinning took longer than " +
                                      FormatDouble(opts_.total_timeout_seconds) +
                                      " s; the rest was not pinned");
      }
      timed_out_ = true;
      return 0;
    }
    return std::min(limit, left);
  }

  Result<CommandResult> RunBounded(CommandSpec spec) {
    spec.timeout_seconds = Budget(spec.timeout_seconds);
    if (spec.timeout_seconds <= 0) return Status::Unavailable("skipped", "prolog time limit");
    return deps_.run(spec);
  }

  void Problem(const std::string& code, const std::string& detail) {
    lock_.problems.push_back({code, detail});
  }

  // Runs `argv` as the job's user with a clean environment.
  Result<CommandResult> RunAsUser(std::vector<std::string> argv, double timeout,
                                  size_t max_out = 1 << 20) {
    CommandSpec spec;
    spec.argv = std::move(argv);
    spec.env = CleanEnvironment(user_.as.user, user_.home);
    spec.run_as = user_.as;
    spec.timeout_seconds = timeout;
    spec.max_output_bytes = max_out;
    return RunBounded(spec);
  }

  // sha256 of a file, read with the user's permissions.
  Result<std::string> HashAsUser(const std::string& path, int64_t* bytes) {
    static const std::string kSha = FindExecutable("sha256sum");
    if (kSha.empty()) return Status::NotFound("sha256sum", "not installed");
    PILOT_ASSIGN_OR_RETURN(CommandResult r,
                           RunAsUser({kSha, "--", path}, opts_.hash_timeout_seconds));
    if (!r.Succeeded() || r.out.size() < 64 || !IsSha256Hex(r.out.substr(0, 64))) {
      std::string why = std::string(Trim(r.err));
      return Status::NotFound(path, why.empty() ? r.Describe(opts_.hash_timeout_seconds) : why);
    }
    if (bytes != nullptr) {
      struct stat sb {};
      *bytes = stat(path.c_str(), &sb) == 0 ? static_cast<int64_t>(sb.st_size) : 0;
    }
    return r.out.substr(0, 64);
  }

  // Reads the submitted config as the user, at most max_config_bytes.
  Result<std::string> ReadConfigAsUser(const std::string& path) {
    PILOT_ASSIGN_OR_RETURN(CommandResult r, RunAsUser({"/bin/cat", "--", path},
                                                      opts_.command_timeout_seconds,
                                                      opts_.max_config_bytes + 1));
    if (!r.Succeeded()) {
      return Status::NotFound(path, std::string(Trim(r.err)).empty()
                                        ? r.Describe(opts_.command_timeout_seconds)
                                        : std::string(Trim(r.err)));
    }
    if (r.out.size() > opts_.max_config_bytes) {
      return Status::Invalid(path, "larger than " + std::to_string(opts_.max_config_bytes) +
                                       " bytes");
    }
    return r.out;
  }

  Status Run() {
    const job::StateLayout layout(opts_.state_dir, opts_.work_root);
    if (std::optional<std::string> first = job::FirstNodeIfOther(job_)) {
      return RunOnOtherNode(layout, *first);
    }
    job::JobPaths paths = layout.Job(job_.job_id);
    PILOT_ASSIGN_OR_RETURN(std::string instance, NewInstance());
    RetireEarlierVerdicts(layout, instance);
    Status made = MoveAsideEarlier(layout, paths);
    if (made.ok()) made = job::MakeRootDir(paths.dir, 0755);
    if (!made.ok()) {
      // A full file system is no broken node (a user may have filled it):
      // without a lock the task refuses and the epilog issues NO-GO.
      if (!job::IsOutOfSpace(made)) return made;
      Log("cannot make the job's folder: " + made.Message() +
          "; no lock: the task will not run the pilot and the verdict is NO-GO");
      return Status::Ok();
    }
    RefuseBelowFloor(layout);
    SetAsideVerdictSpace(paths.verdict_space);
    PILOT_RETURN_IF_ERROR(PrepareWork(layout, paths.work));

    lock_.instance = instance;
    FillJob();
    lock_.config.path = job_.config_path;
    lock_.config.copy = paths.config;
    lock_.config.sha256_submitted = job_.config_sha256;

    std::optional<Config> cfg = CopyConfig(paths.config);
    PinSeed(cfg);
    PinIdentityParts(cfg);
    PinVersions();
    PinGpus();
    lock_.identity = RunIdentity(lock_);
    lock_.created = FormatRfc3339(deps_.now_unix());
    Status w = job::WriteWithReserve(layout, paths.lock, LockToJson(lock_), 0644, LogTo());
    if (!w.ok() && job::IsOutOfSpace(w)) {
      Log("cannot write the lock: " + w.Message() +
          "; no lock: the task will not run the pilot and the verdict is NO-GO");
      return Status::Ok();
    }
    return w;
  }

  // What a run of the config at job_.config_path pins now, with the job's
  // user's rights, as Run() pins a pilot: the lock's parts its identity is
  // made of (a long job's binding check, prolog/binding.cc). Nothing is
  // written; what could not be pinned is in the lock's problems.
  Lock PinForIdentity() {
    FillJob();
    Result<std::string> text = ReadConfigAsUser(job_.config_path);
    if (!text.ok()) {
      Problem("config_unreadable", text.status().Message());
      return lock_;
    }
    lock_.config.path = job_.config_path;
    lock_.config.sha256_copied = Sha256Hex(*text);
    PinIdentityParts(ParseJobConfig(*text));
    return lock_;
  }

 private:
  void Log(const std::string& line) const {
    std::fprintf(stderr, "pilot-prolog: job %lld: %s\n", static_cast<long long>(job_.job_id),
                 line.c_str());
  }
  job::LogLine LogTo() const {
    return [this](const std::string& line) { Log(line); };
  }

  // Another node of a job of several. The job's folder, its lock and its
  // work folder are the first node's, whose prolog may run after this one
  // (and, in a state directory the nodes share, would take a folder made
  // here for an earlier instance): this node touches none of them. It pins
  // what it has (versions, GPUs) into its own record and never fails the
  // job for it.
  Status RunOnOtherNode(const job::StateLayout& layout, const std::string& first) {
    FillJob();
    PinSeed(std::nullopt);  // the config is the first node's to read
    PinContainer(OtherNodeImage());
    PinVersions();
    PinGpus();
    lock_.created = FormatRfc3339(deps_.now_unix());
    const std::string file = layout.NodeRecordFile(job_.job_id, job_.host);
    Status s = job::MakeRootDir(layout.NodesDir(), 0755);
    if (s.ok()) s = job::MakeRootDir(layout.NodeRecordsDir(job_.job_id), 0755);
    if (s.ok()) s = job::WriteWithReserve(layout, file, LockToJson(lock_), 0644, LogTo());
    Log(std::string("node ") + job_.host + " of " + std::to_string(job_.nodes) +
        "; the pilot runs on the first, " + first +
        (s.ok() ? "; this node pinned into " + file : "; cannot record this node: " + s.Message()));
    return Status::Ok();
  }

  // The image another node pins: the config's (read as the user, and only
  // the text submitted), else pyxis' --container-image. A task of the
  // pilot's srun step on this node runs in no other
  // (supervisor/program/container_task.h).
  std::string OtherNodeImage() {
    if (job_.config_path.empty() || job_.config_sha256.empty()) return job_.container_image;
    Result<std::string> text = ReadConfigAsUser(job_.config_path);
    if (!text.ok() || Sha256Hex(*text) != job_.config_sha256) return job_.container_image;
    Result<Config> cfg = ParseConfig(*text, job_.config_path,
                                     job::JobConfigOptions(job_, user_.as.user, user_.home));
    return cfg.ok() && !cfg->container.image.empty() ? cfg->container.image : job_.container_image;
  }

  void FillJob() {
    lock_.job.id = job_.job_id;
    lock_.job.user = user_.as.user;
    lock_.job.uid = job_.uid;
    lock_.job.gid = job_.gid;
    lock_.job.nodes = job_.nodes;
    lock_.job.node_list = job_.node_list;
    lock_.job.host = job_.host;
    lock_.job.submit_dir = job_.work_dir;
    lock_.job.gpus = job_.gpus;
  }

  static Result<std::string> NewInstance() {
    PILOT_ASSIGN_OR_RETURN(std::string bytes, RandomBytes(16));
    return HexEncode(bytes);
  }

  // Below the policy's floor of free space on the state directory's file
  // system a new pilot is refused: the lock problem state_space_low (the
  // task does not start it, the verdict is NO-GO), never a failed prolog.
  void RefuseBelowFloor(const job::StateLayout& layout) {
    Result<std::optional<int64_t>> below = job::FreeBelowFloor(layout, opts_.floor_bytes);
    if (!below.ok()) {
      Log("cannot measure the state directory's free space: " + below.status().Message());
      return;
    }
    if (!*below) return;
    constexpr int64_t kMiB = int64_t{1} << 20;
    const std::string detail =
        "the state directory's file system (" + layout.root() + ") has " +
        std::to_string(**below / kMiB) + " MiB free, below the site's floor of " +
        std::to_string(opts_.floor_bytes / kMiB) +
        " MiB (state_floor_mb): pilots are refused, and their jobs' commands not run, until "
        "space is freed there";
    Problem(job::kProblemStateSpaceLow, detail);
    Log("refusing the pilot: " + detail);
  }

  // The blocks the verdict will be written into, taken now, before the
  // job's work (or another user's) can take them (job/reserve.h). Without
  // them the epilog writes the verdict anew, from free space or the reserve.
  void SetAsideVerdictSpace(const std::string& path) {
    Status s = job::SetAsideVerdictSpace(path);
    if (!s.ok()) {
      Log("cannot set space aside for the verdict: " + s.Message() +
          "; the epilog will need free space to store it");
    }
  }

  // A verdict stored (or queued for `pilot flush`) under this job id is an
  // earlier start's: it goes to the history now, before this start can be
  // read as having it. One that cannot be moved is logged; the job runs.
  void RetireEarlierVerdicts(const job::StateLayout& layout, const std::string& instance) {
    job::RetiredVerdicts r = job::RetireEarlierVerdicts(layout, job_.job_id, instance);
    for (const std::string& to : r.moved_to) Log("an earlier start's verdict moved to " + to);
    if (!r.error.ok()) {
      Log("cannot move an earlier start's verdict aside: " + r.error.Message() +
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
    std::string target = layout.AtticFor(job_.job_id, name);
    for (int i = 0; i < 8 && lstat(target.c_str(), &sb) == 0; ++i) {
      Result<std::string> more = RandomBytes(4);
      target = layout.AtticFor(job_.job_id, name + "-" + HexEncode(more.ok() ? *more : "x"));
    }
    if (rename(paths.dir.c_str(), target.c_str()) != 0) {
      return Status::IoError(paths.dir, std::string("cannot move an earlier instance aside to ") +
                                            target + ": " + std::strerror(errno));
    }
    Log("earlier instance moved to " + target);
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
      Problem("work_unavailable", s.Message());
      return Status::Ok();
    }
    if (!layout.work_root().empty()) {
      struct stat state_sb {}, work_sb {};
      if (stat(layout.root().c_str(), &state_sb) == 0 &&
          stat(layout.work_root().c_str(), &work_sb) == 0 && state_sb.st_dev == work_sb.st_dev) {
        Log("warning: work_root " + layout.work_root() + " is on the same file system as " +
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
    std::string target = layout.WorkAtticFor(job_.job_id, name);
    for (int i = 0; i < 8 && lstat(target.c_str(), &sb) == 0; ++i) {
      Result<std::string> more = RandomBytes(4);
      target = layout.WorkAtticFor(job_.job_id, name + "-" + HexEncode(more.ok() ? *more : "x"));
    }
    if (rename(work.c_str(), target.c_str()) != 0) {
      return Status::IoError(work, std::string("cannot move an earlier work folder aside to ") +
                                       target + ": " + std::strerror(errno));
    }
    Log("earlier work folder moved to " + target);
    return Status::Ok();
  }

  // policy work_quota_command WORK_DIR UID JOBID, as root, time-limited.
  void RunQuotaCommand(const std::string& work) {
    if (opts_.work_quota_command.empty()) return;
    CommandSpec spec;
    spec.argv = {opts_.work_quota_command, work, std::to_string(job_.uid),
                 std::to_string(job_.job_id)};
    spec.env = CleanEnvironment();
    spec.timeout_seconds = opts_.command_timeout_seconds;
    spec.max_output_bytes = 64 << 10;
    Result<CommandResult> r = RunBounded(spec);
    if (r.ok() && r->Succeeded()) return;
    std::string why = r.ok() ? r->Describe(spec.timeout_seconds) : r.status().Message();
    if (r.ok()) {
      const std::string err(Trim(r->err));
      if (!err.empty()) why += ": " + err.substr(0, std::min(err.find('\n'), size_t{300}));
    }
    Problem("work_quota_failed", opts_.work_quota_command + " " + work + ": " + why);
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
    if (lchown(work.c_str(), job_.uid, job_.gid) != 0 || chmod(work.c_str(), 0700) != 0) {
      return Status::Permission(work, std::string("chown: ") + std::strerror(errno));
    }
    return Status::Ok();
  }

  std::optional<Config> CopyConfig(const std::string& copy_path) {
    if (job_.config_path.empty()) {
      Problem("config_missing", "the job carries no pilot config path (submitted without "
                                "the spank_pilot plugin?)");
      return std::nullopt;
    }
    Result<std::string> text = ReadConfigAsUser(job_.config_path);
    if (!text.ok()) {
      Problem("config_unreadable", text.status().Message());
      return std::nullopt;
    }
    lock_.config.sha256_copied = Sha256Hex(*text);
    // Root's, readable by the job's user only: it may carry the user's
    // secrets (program.env), and the runner reads it as the user.
    Status w = job::WriteJobUserFile(job::StateLayout(opts_.state_dir), copy_path, *text,
                                     job_.uid, job_.gid, LogTo());
    if (!w.ok()) {
      Problem("config_copy_failed", w.Message());
      return std::nullopt;
    }
    if (lock_.config.sha256_submitted.empty()) {
      Problem("config_unverified", "no sha256 was recorded at submission");
    } else if (lock_.config.sha256_submitted != lock_.config.sha256_copied) {
      Problem("config_changed",
              job_.config_path + " changed between submission and job start (sha256 " +
                  lock_.config.sha256_submitted.substr(0, 12) + "... at submit, " +
                  lock_.config.sha256_copied.substr(0, 12) + "... at start)");
    }
    return ParseJobConfig(*text);
  }

  // The config's text read as the job's (its user's $HOME, the job's
  // variables); nullopt, with the problem recorded, when it does not parse.
  std::optional<Config> ParseJobConfig(const std::string& text) {
    Result<Config> cfg = ParseConfig(text, job_.config_path,
                                     job::JobConfigOptions(job_, user_.as.user, user_.home));
    if (!cfg.ok()) {
      Problem("config_invalid", cfg.status().Message());
      return std::nullopt;
    }
    return std::move(cfg).value();
  }

  // What the run identity holds beside the config's bytes: the container
  // (the config's image, else pyxis' --container-image), the model and
  // data files, the program's pins. One place for a pilot's prolog and a
  // long job's binding check, so that both pin the same way.
  void PinIdentityParts(const std::optional<Config>& cfg) {
    if (!cfg) {
      PinContainer(job_.container_image);
      return;
    }
    PinContainer(cfg->container.image.empty() ? job_.container_image : cfg->container.image);
    PinFiles(*cfg);
    PinProgram(*cfg);
  }

  void PinSeed(const std::optional<Config>& cfg) {
    if (cfg && cfg->training.seed >= 0) {
      lock_.seeds.training = cfg->training.seed;
      lock_.seeds.source = "config";
    } else {
      lock_.seeds.training = SeedFromJobId(job_.job_id);
      lock_.seeds.source = "job_id";
    }
  }

  void PinContainer(const std::string& image) {
    LockContainer& c = lock_.container;
    c.reference = image;
    if (image.empty()) {
      c.method = "none";
      return;
    }
    if (IsLocalImageFile(image)) {
      // Hashed with the user's rights: root must not vouch for (or read) a
      // file the user could not.
      c.method = "file";
      Result<std::string> h = HashAsUser(image, nullptr);
      if (!h.ok()) {
        Problem("container_unreadable", h.status().Message());
        return;
      }
      c.digest = "sha256:" + *h;
      c.pinned = image;
      return;
    }
    c.method = "registry";
    if (Budget(1) <= 0) return;
    if (!deps_.resolve_image) {
      Problem("container_unresolved", image + ": no registry client");
      return;
    }
    Result<ResolvedImage> r = deps_.resolve_image(image);
    if (!r.ok()) {
      Problem("container_unresolved", r.status().Message());
      return;
    }
    c.digest = r->digest;
    c.pinned = r->pinned;
  }

  void PinFile(const std::string& role, const std::string& path, const std::string& expected) {
    if (path.empty()) return;
    LockFile f;
    f.role = role;
    f.path = path;
    f.sha256_expected = expected;
    Result<std::string> h = HashAsUser(path, &f.bytes);
    if (!h.ok()) {
      Problem("file_missing", role + ": " + h.status().Message());
    } else {
      f.sha256_actual = *h;
      if (!expected.empty() && expected != *h) {
        Problem("file_changed", role + ": " + path + ": sha256 " + h->substr(0, 12) +
                                    "..., the config pins " + expected.substr(0, 12) + "...");
      }
    }
    lock_.files.push_back(f);
  }

  void PinFiles(const Config& cfg) {
    PinFile("init_weights", cfg.model.init_weights, cfg.model.init_sha256);
    if (cfg.data.format != "random") {
      PinFile("train", cfg.data.train, cfg.data.train_sha256);
      PinFile("eval", cfg.data.eval, cfg.data.eval_sha256);
    }
  }

  // program.pin and the hub revisions, read by this program itself run as
  // the job's user (pilot-prolog --pins: job/pins.h), so that root reads
  // nothing the user could not; what the plugin recorded at submit is kept
  // beside them for the verdict's pins_unchanged check.
  void PinProgram(const Config& cfg) {
    const std::string cache =
        !job_.hub_cache.empty() ? job_.hub_cache
                                : job::HubCacheFolder([](const std::string&) { return std::nullopt; },
                                                      user_.home);
    const job::PinRequest req = job::PinRequestFor(cfg, job_.work_dir, cache);
    if (!job::HasPins(req)) return;
    if (!job_.pins_submitted.empty()) {
      Result<std::map<std::string, std::string>> sub = job::ParseSummary(job_.pins_submitted);
      if (sub.ok()) {
        lock_.pins_submitted = std::move(sub).value();
      } else {
        Problem("pins_unverified", sub.status().Message());
      }
    }
    std::string self(4096, '\0');
    const ssize_t n = readlink("/proc/self/exe", self.data(), self.size());
    self.resize(n > 0 ? static_cast<size_t>(n) : 0);
    Result<CommandResult> r =
        RunAsUser({self, "--pins", job::PinRequestToJson(req)}, opts_.hash_timeout_seconds,
                  kMaxLockBytes);
    if (!r.ok() || !r->Succeeded()) {
      std::string why = r.ok() ? r->Describe(opts_.hash_timeout_seconds) : r.status().Message();
      if (r.ok() && !Trim(r->err).empty()) why += ": " + std::string(Trim(r->err)).substr(0, 300);
      Problem("pins_unreadable", "pinning program.pin and the hub revisions as " + user_.as.user +
                                     ": " + why);
      return;
    }
    Result<std::vector<LockPin>> pins = ParseLockPins(r->out, "pilot-prolog --pins");
    if (!pins.ok()) {
      Problem("pins_unreadable", pins.status().Message());
      return;
    }
    lock_.pins = std::move(pins).value();
    for (const LockPin& p : lock_.pins) {
      if (!p.error.empty()) Problem("pin_unreadable", p.error);
    }
  }

  void PinVersions() {
    // The runner's own report: a JSON object of name -> version.
    Result<CommandResult> r = RunAsUser({opts_.runner, "--versions", "--json"},
                                        opts_.command_timeout_seconds, 64 << 10);
    if (r.ok() && r->Succeeded()) {
      Result<Json> j = ParseJsonText(r->out, "pilot-runner --versions", 64 << 10);
      if (j.ok() && j->is_object()) {
        for (auto it = j->begin(); it != j->end(); ++it) {
          if (it.value().is_string()) lock_.versions[it.key()] = it.value().get<std::string>();
        }
      } else {
        Problem("versions_unreadable", "pilot-runner --versions --json: not a JSON object");
      }
    } else {
      Problem("runner_unavailable",
              opts_.runner + " --versions: " +
                  (r.ok() ? r->Describe(opts_.command_timeout_seconds) : r.status().Message()));
    }
    std::string slurmd = FindExecutable("slurmd");
    if (!slurmd.empty()) {
      CommandSpec spec;
      spec.argv = {slurmd, "-V"};
      spec.env = CleanEnvironment();
      spec.timeout_seconds = opts_.command_timeout_seconds;
      Result<CommandResult> v = RunBounded(spec);
      if (v.ok() && v->Succeeded()) {
        std::string out(Trim(v->out));
        size_t sp = out.rfind(' ');
        lock_.versions["slurm"] = sp == std::string::npos ? out : out.substr(sp + 1);
      }
    }
    std::ifstream os("/etc/os-release");
    for (std::string line; std::getline(os, line);) {
      if (StartsWith(line, "PRETTY_NAME=")) {
        std::string v = line.substr(12);
        if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
        lock_.versions["os"] = v;
      }
    }
    struct utsname u {};
    if (uname(&u) == 0) lock_.versions["kernel"] = u.release;
  }

  void PinGpus() {
    std::string smi = FindExecutable("nvidia-smi");
    if (smi.empty()) return;
    CommandSpec spec;
    spec.argv = {smi, "--query-gpu=index,name,uuid,memory.total,driver_version",
                 "--format=csv,noheader,nounits"};
    spec.env = CleanEnvironment();
    spec.timeout_seconds = opts_.command_timeout_seconds;
    Result<CommandResult> r = RunBounded(spec);
    if (!r.ok() || !r->Succeeded()) {
      Problem("gpu_inventory_failed",
              "nvidia-smi: " + (r.ok() ? r->Describe(spec.timeout_seconds) : r.status().Message()));
      return;
    }
    std::istringstream in(r->out);
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> f;
      std::istringstream cells(line);
      for (std::string cell; std::getline(cells, cell, ',');) f.emplace_back(Trim(cell));
      if (f.size() < 5) continue;
      LockGpu g;
      g.index = std::atoi(f[0].c_str());
      g.name = f[1];
      g.uuid = f[2];
      g.memory_bytes = std::atoll(f[3].c_str()) * (int64_t{1} << 20);  // MiB
      lock_.gpus.push_back(g);
      lock_.versions["cuda_driver"] = f[4];
    }
  }

  const PrologOptions& opts_;
  const JobEnv& job_;
  const PrologDeps& deps_;
  User user_;
  std::chrono::steady_clock::time_point deadline_;
  bool timed_out_ = false;
  std::string earlier_;  // the name an earlier instance went to the attic under
  Lock lock_;
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
