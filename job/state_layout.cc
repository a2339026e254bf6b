#include "job/state_layout.h"

#include <utility>

namespace pilot::job {
namespace {

// The only spelling of these names in the project's code (see the header).
constexpr std::string_view kJobs = "jobs";
constexpr std::string_view kVerdicts = "verdicts";
constexpr std::string_view kHistory = "history";  // under verdicts/
constexpr std::string_view kOutbox = "outbox";
constexpr std::string_view kGrants = "grants";
constexpr std::string_view kRuns = "runs";
constexpr std::string_view kRefusals = "refusals";
constexpr std::string_view kAttic = "attic";
constexpr std::string_view kConfigCopy = "config.toml";
constexpr std::string_view kLock = "lock.json";
constexpr std::string_view kRunnerStarted = "runner.started";
constexpr std::string_view kWork = "work";
constexpr std::string_view kResults = "results.json";
constexpr std::string_view kVerdictSpace = "verdict.space";
constexpr std::string_view kReserve = "reserve";
constexpr std::string_view kUnstored = "unstored";  // under outbox/
constexpr std::string_view kNodes = "nodes";
constexpr std::string_view kMetrics = "metrics";
constexpr std::string_view kCheckpointFiles = "checkpoint-files-";  // + STAGE + ".json"
constexpr std::string_view kRecordSuffix = ".json";  // verdicts/ and grants/
constexpr size_t kMaxJobIdDigits = 12;
constexpr size_t kMaxInstanceChars = 64;

std::string Join(const std::string& dir, std::string_view name) {
  std::string path = dir;
  path += '/';
  path += name;
  return path;
}

// `word` with every byte but [A-Za-z0-9._-] replaced by '_', at most
// kMaxInstanceChars of them: a file name that stays inside its folder
// whatever was recorded.
std::string PlainName(std::string_view word) {
  std::string name(word.substr(0, kMaxInstanceChars));
  for (char& c : name) {
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (!plain) c = '_';
  }
  return name;
}

std::string Record(const std::string& dir, int64_t job_id) {
  return Join(dir, std::to_string(job_id)) + std::string(kRecordSuffix);
}

}  // namespace

StateLayout::StateLayout(std::string state_dir, std::string work_root)
    : root_(std::move(state_dir)), work_root_(std::move(work_root)) {}

std::string StateLayout::JobsDir() const { return Join(root_, kJobs); }
std::string StateLayout::VerdictsDir() const { return Join(root_, kVerdicts); }
std::string StateLayout::VerdictHistoryDir() const { return Join(VerdictsDir(), kHistory); }
std::string StateLayout::OutboxDir() const { return Join(root_, kOutbox); }
std::string StateLayout::GrantsDir() const { return Join(root_, kGrants); }
std::string StateLayout::RunsDir() const { return Join(root_, kRuns); }
std::string StateLayout::RefusalsDir() const { return Join(root_, kRefusals); }
std::string StateLayout::AtticDir() const { return Join(root_, kAttic); }
std::string StateLayout::AtticFor(int64_t job_id, const std::string& instance) const {
  return Join(AtticDir(), std::to_string(job_id) + "-" + instance);
}

std::string StateLayout::WorkAtticDir() const {
  return work_root_.empty() ? "" : Join(work_root_, kAttic);
}
std::string StateLayout::WorkAtticFor(int64_t job_id, const std::string& instance) const {
  return work_root_.empty() ? "" : Join(WorkAtticDir(), std::to_string(job_id) + "-" + instance);
}
std::string StateLayout::ReserveFile() const { return Join(root_, kReserve); }
std::string StateLayout::NodesDir() const { return Join(root_, kNodes); }
std::string StateLayout::NodeRecordsDir(int64_t job_id) const {
  return Join(NodesDir(), std::to_string(job_id));
}
namespace {
std::string NodeRecordName(std::string_view node) {
  std::string name = PlainName(node);
  if (name.empty() || name == "." || name == "..") name = "_";
  return name + std::string(kRecordSuffix);
}
}  // namespace
std::string StateLayout::NodeRecordFile(int64_t job_id, std::string_view node) const {
  return Join(NodeRecordsDir(job_id), NodeRecordName(node));
}
std::string StateLayout::KeptNodeRecordFile(int64_t job_id, std::string_view node) const {
  return Join(Job(job_id).nodes, NodeRecordName(node));
}
std::string StateLayout::UnstoredDir() const { return Join(OutboxDir(), kUnstored); }
std::string StateLayout::UnstoredFile(int64_t job_id) const {
  return Record(UnstoredDir(), job_id);
}

JobPaths StateLayout::Job(int64_t job_id) const {
  JobPaths p;
  p.dir = Join(JobsDir(), std::to_string(job_id));
  p.config = Join(p.dir, kConfigCopy);
  p.lock = Join(p.dir, kLock);
  p.started = Join(p.dir, kRunnerStarted);
  p.results = Join(p.dir, kResults);
  p.work = work_root_.empty() ? Join(p.dir, kWork) : Join(work_root_, std::to_string(job_id));
  p.nodes = Join(p.dir, kNodes);
  p.metrics = Join(p.dir, kMetrics);
  p.verdict_space = Join(p.dir, kVerdictSpace);
  return p;
}

std::string JobPaths::CheckpointFiles(std::string_view stage) const {
  return Join(dir, std::string(kCheckpointFiles) + std::string(stage) + ".json");
}

std::string StateLayout::VerdictFile(int64_t job_id) const { return Record(VerdictsDir(), job_id); }

std::string StateLayout::VerdictHistoryFile(int64_t job_id, std::string_view instance,
                                            int clash) const {
  std::string name = std::to_string(job_id) + "-" + (instance.empty() ? "none" : PlainName(instance));
  if (clash > 0) name += "." + std::to_string(clash);
  return Join(VerdictHistoryDir(), name) + std::string(kRecordSuffix);
}

std::string StateLayout::GrantFile(int64_t job_id) const { return Record(GrantsDir(), job_id); }
std::string StateLayout::RefusalFile(int64_t job_id) const { return Record(RefusalsDir(), job_id); }
std::string StateLayout::RunFile(int64_t job_id) const { return Record(RunsDir(), job_id); }

std::string StateLayout::ResultsIn(const std::string& out_dir) { return Join(out_dir, kResults); }

std::optional<int64_t> StateLayout::ParseJobId(std::string_view word) {
  if (word.empty() || word.size() > kMaxJobIdDigits) return std::nullopt;
  int64_t id = 0;
  for (char c : word) {
    if (c < '0' || c > '9') return std::nullopt;
    id = id * 10 + (c - '0');
  }
  return id;
}

std::optional<int64_t> StateLayout::JobOfVerdictFile(std::string_view file_name) {
  if (file_name.size() <= kRecordSuffix.size() ||
      file_name.substr(file_name.size() - kRecordSuffix.size()) != kRecordSuffix) {
    return std::nullopt;
  }
  return ParseJobId(file_name.substr(0, file_name.size() - kRecordSuffix.size()));
}

std::optional<int64_t> StateLayout::JobOfHistoryFile(std::string_view file_name) {
  const size_t dash = file_name.find('-');
  if (dash == std::string_view::npos ||
      file_name.size() <= dash + 1 + kRecordSuffix.size() ||
      file_name.substr(file_name.size() - kRecordSuffix.size()) != kRecordSuffix) {
    return std::nullopt;
  }
  return ParseJobId(file_name.substr(0, dash));
}

}  // namespace pilot::job
