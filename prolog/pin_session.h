// The state a pilot-prolog's pinning shares (prolog.cc's Pinner and the pins
// of pin_parts.h): the options, the job and its user, the prolog's time
// limit, and the lock being filled, with the problems found on the way.
// Internal to pilot_prolog.
//
// Thread-safety: one session per prolog run, used by one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/records/lock.h"
#include "job/job_env.h"
#include "job/reserve.h"
#include "job/subprocess.h"
#include "prolog/prolog.h"

namespace pilot::prolog {

// Everything the prolog needs about the user, resolved once.
struct User {
  job::RunAs as;
  std::string home;
};

// Running helpers as the job's user within the prolog's time limit, and the
// lock they fill.
class PinSession {
 public:
  PinSession(const PrologOptions& opts, const job::JobEnv& job, const PrologDeps& deps);

  const PrologOptions& opts() const { return opts_; }
  const job::JobEnv& job() const { return job_; }
  const PrologDeps& deps() const { return deps_; }
  const User& user() const { return user_; }
  Lock& lock() { return lock_; }

  // `limit` cut to the time left; 0 when none is left (recorded once).
  double Budget(double limit);

  // Runs `spec` within the time left (kUnavailable "skipped" when none is).
  Result<job::CommandResult> RunBounded(job::CommandSpec spec);

  // A problem of the lock: what could not be pinned, and why.
  void Problem(const std::string& code, const std::string& detail);

  // Runs `argv` as the job's user with a clean environment.
  Result<job::CommandResult> RunAsUser(std::vector<std::string> argv, double timeout,
                                       size_t max_out = 1 << 20);

  // sha256 of a file, read with the user's permissions.
  Result<std::string> HashAsUser(const std::string& path, int64_t* bytes);

  // Reads the submitted config as the user, at most max_config_bytes.
  Result<std::string> ReadConfigAsUser(const std::string& path);

  // The lock's job section from the job's environment.
  void FillJob();

  // The config's text read as the job's (its user's $HOME, the job's
  // variables); nullopt, with the problem recorded, when it does not parse.
  std::optional<Config> ParseJobConfig(const std::string& text);

  // "pilot-prolog: job JOBID: LINE" on stderr (slurmd's log), and the same
  // as a callback for job/'s writers.
  void Log(const std::string& line) const;
  job::LogLine LogTo() const;

 private:
  const PrologOptions& opts_;
  const job::JobEnv& job_;
  const PrologDeps& deps_;
  User user_;
  std::chrono::steady_clock::time_point deadline_;
  bool timed_out_ = false;
  Lock lock_;
};

}  // namespace pilot::prolog
