#include "prolog/pin_session.h"

#include <pwd.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "core/base/crypto.h"
#include "core/base/strings.h"

namespace pilot::prolog {
namespace {

using job::CleanEnvironment;
using job::CommandResult;
using job::CommandSpec;
using job::HashFileAsUser;
using job::JobEnv;

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

}  // namespace

PinSession::PinSession(const PrologOptions& opts, const JobEnv& job, const PrologDeps& deps)
    : opts_(opts),
      job_(job),
      deps_(deps),
      user_(ResolveUser(job)),
      deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                                       opts.total_timeout_seconds * 1000))) {}

double PinSession::Budget(double limit) {
  double left = std::chrono::duration<double>(deadline_ - std::chrono::steady_clock::now()).count();
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

Result<CommandResult> PinSession::RunBounded(CommandSpec spec) {
  spec.timeout_seconds = Budget(spec.timeout_seconds);
  if (spec.timeout_seconds <= 0) return Status::Unavailable("skipped", "prolog time limit");
  return deps_.run(spec);
}

void PinSession::Problem(const std::string& code, const std::string& detail) {
  lock_.problems.push_back({code, detail});
}

Result<CommandResult> PinSession::RunAsUser(std::vector<std::string> argv, double timeout,
                                            size_t max_out) {
  CommandSpec spec;
  spec.argv = std::move(argv);
  spec.env = CleanEnvironment(user_.as.user, user_.home);
  spec.run_as = user_.as;
  spec.timeout_seconds = timeout;
  spec.max_output_bytes = max_out;
  return RunBounded(spec);
}

Result<std::string> PinSession::HashAsUser(const std::string& path, int64_t* bytes) {
  CommandSpec spec;
  spec.env = CleanEnvironment(user_.as.user, user_.home);
  spec.run_as = user_.as;
  spec.timeout_seconds = opts_.hash_timeout_seconds;
  PILOT_ASSIGN_OR_RETURN(std::string hash,
                         HashFileAsUser([this](const CommandSpec& s) { return RunBounded(s); },
                                        std::move(spec), path));
  if (bytes != nullptr) {
    struct stat sb {};
    *bytes = stat(path.c_str(), &sb) == 0 ? static_cast<int64_t>(sb.st_size) : 0;
  }
  return hash;
}

Result<std::string> PinSession::ReadConfigAsUser(const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(CommandResult r,
                         RunAsUser({"/bin/cat", "--", path}, opts_.command_timeout_seconds,
                                   opts_.max_config_bytes + 1));
  if (!r.Succeeded()) {
    return Status::NotFound(path, std::string(Trim(r.err)).empty()
                                      ? r.Describe(opts_.command_timeout_seconds)
                                      : std::string(Trim(r.err)));
  }
  if (r.out.size() > opts_.max_config_bytes) {
    return Status::Invalid(path,
                           "larger than " + std::to_string(opts_.max_config_bytes) + " bytes");
  }
  return r.out;
}

void PinSession::FillJob() {
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

std::optional<Config> PinSession::ParseJobConfig(const std::string& text) {
  Result<Config> cfg =
      ParseConfig(text, job_.config_path, job::JobConfigOptions(job_, user_.as.user, user_.home));
  if (!cfg.ok()) {
    Problem("config_invalid", cfg.status().Message());
    return std::nullopt;
  }
  return std::move(cfg).value();
}

void PinSession::Log(const std::string& line) const {
  std::fprintf(stderr, "pilot-prolog: job %lld: %s\n", static_cast<long long>(job_.job_id),
               line.c_str());
}

job::LogLine PinSession::LogTo() const {
  return [this](const std::string& line) { Log(line); };
}

}  // namespace pilot::prolog
