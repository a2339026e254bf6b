#include "supervisor/program/checkpoint_evidence.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/base/atomic_file.h"
#include "core/base/strings.h"
#include "core/records/verify_report.h"
#include "job/safe_read.h"

namespace pilot::supervisor {
namespace {

// DIR/REL's status changed after `t` (seconds since the epoch). A file the
// supervisor cannot look at counts as not changed.
bool ChangedAfter(const std::string& dir, const std::string& rel, std::optional<double> t) {
  if (!t) return false;
  Result<struct stat> st = job::StatBeneath(dir, rel);
  if (!st.ok()) return false;
  const double ctime = static_cast<double>(st->st_ctim.tv_sec) + st->st_ctim.tv_nsec * 1e-9;
  return ctime > *t;
}

}  // namespace

Result<CheckpointListing> ListCheckpoint(const ListCheckpointInput& in) {
  const std::string& dir = in.dir;
  struct stat st{};
  const bool exists = ::lstat(dir.c_str(), &st) == 0;
  if (!exists || !S_ISDIR(st.st_mode)) {
    return Status::NotFound("checkpoint",
                            "no checkpoint: " + dir + " (PILOT_CHECKPOINT_DIR) " +
                                (exists ? "is not a directory" : "does not exist") +
                                " after the reference process (PILOT_CHECKPOINT_STEP = " +
                                std::to_string(in.at_step) + ")");
  }
  job::CommandSpec spec;
  spec.argv = {in.runner, "verify", "--program-checkpoint", dir, "--json"};
  spec.env = job::CleanEnvironment(in.user, in.home);
  spec.run_as = in.run_as;
  spec.timeout_seconds = in.timeout_seconds;
  spec.max_output_bytes = 8u << 20;
  Result<job::CommandResult> r = job::RunCommand(spec);
  if (!r.ok()) {
    return Status::IoError("checkpoint", "the checkpoint could not be listed: " + r.status().Message());
  }
  // The report's own strict reader; a report that lists problems with the
  // files still lists them (verify's exit status is not the listing's).
  Result<VerifyReport> report = ParseVerifyReport(r->out, "pilot-runner verify --program-checkpoint");
  if (!report.ok() || report->mode != "program") {
    return Status::IoError("checkpoint", "the checkpoint could not be listed: pilot-runner verify " +
                                             r->Describe(spec.timeout_seconds) +
                                             (r->err.empty() ? "" : ": " + TailLines(r->err, 1, 300)));
  }
  Status kept = WriteFileAtomic(in.list_file, r->out, 0644);
  if (!kept.ok()) {
    std::fprintf(stderr, "pilot: supervisor: cannot keep the checkpoint's file list: %s\n",
                 kept.ToString().c_str());
  }
  CheckpointListing out;
  std::vector<std::pair<std::string, int64_t>> later;
  for (const ProgramFile& f : report->files) {
    ++out.files;
    out.bytes += f.size;
    if (f.format == "symlink" || f.format == "special") continue;
    (ChangedAfter(dir, f.path, in.saved_by) ? later : out.at_step).emplace_back(dir + "/" + f.path, f.size);
  }
  CheckpointSaves& cs = out.saves;
  cs.saved_by_unix = in.saved_by.value_or(0);
  for (const auto& [path, size] : later) {
    ++cs.later_files;
    cs.later_bytes += size;
    if (cs.later_example.empty()) cs.later_example = path.substr(dir.size() + 1);
  }
  // Every file written after step K: the reference saved again into the
  // same files (or finished an asynchronous save late). Which is the
  // step-K state cannot be told: the read check counts them all.
  cs.rewritten = out.at_step.empty() && !later.empty();
  if (cs.rewritten) out.at_step.swap(later);
  for (const auto& [path, size] : out.at_step) {
    ++cs.at_step_files;
    cs.at_step_bytes += size;
  }
  return out;
}

std::string EmptyCheckpoint(const std::string& dir) {
  return "no checkpoint: " + dir + " (PILOT_CHECKPOINT_DIR) is empty after the reference process";
}

std::optional<double> SavedBy(const GroupResult& g, int64_t k) {
  std::map<int, double> first;
  for (const MetricRecord& r : g.records) {
    if (r.step > k) first.emplace(r.rank.value_or(0), r.arrived);
  }
  if (first.empty()) return std::nullopt;
  double t = 0;
  for (const auto& [rank, at] : first) t = std::max(t, at);
  return g.started_unix + t;
}

CheckpointRead CheckpointReadOf(const std::vector<std::pair<std::string, int64_t>>& at_step,
                                const GroupResult& resumed) {
  const WatchResult& w = resumed.watch;
  CheckpointRead cr;
  cr.watched = !at_step.empty() && w.problem.empty();
  cr.problem = w.problem;
  cr.files = static_cast<int>(at_step.size());
  cr.read_measured = !at_step.empty() && w.read_measured;
  cr.read_problem = w.read_problem;
  cr.first_record_seconds = w.first_record_seconds;
  cr.outside_opens = w.outside_opens;
  cr.outside_example = w.outside_example;
  for (size_t i = 0; i < at_step.size(); ++i) {
    cr.bytes += at_step[i].second;
    if (i < w.opened.size() && w.opened[i]) {
      ++cr.opened_files;
      cr.opened_bytes += at_step[i].second;
    }
    // Read-ahead may cache past what was asked, never past the file.
    const int64_t read = i < w.read.size() ? std::min(w.read[i], at_step[i].second) : 0;
    if (read > 0) ++cr.read_files;
    cr.read_bytes += read;
  }
  return cr;
}

}  // namespace pilot::supervisor
