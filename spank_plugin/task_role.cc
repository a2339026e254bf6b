#include "spank_plugin/task_role.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "job/reserve.h"

namespace pilot::spank {
namespace {

// A record of the prolog's (`sb` its lstat, `lock` its contents): root's, a
// plain file, naming this job and uid. Empty when it is; else what is wrong.
std::string NotThisJobs(const struct stat& sb, const Result<Lock>& lock, int64_t job_id,
                        uid_t uid) {
  if (!S_ISREG(sb.st_mode) || sb.st_uid != 0) return "not a plain file of root's";
  if (!lock.ok()) return lock.status().Message();
  if (lock->job.id != job_id || lock->job.uid != uid) {
    return "job " + std::to_string(lock->job.id) + ", uid " + std::to_string(lock->job.uid);
  }
  return "";
}

// This node holds its own record of the job: it is another node of a job
// of several, not the one its pilot runs on.
bool AnotherNodeOfTheJob(const job::StateLayout& layout, int64_t job_id, uid_t uid,
                         const std::string& node) {
  if (node.empty()) return false;
  const std::string record = layout.NodeRecordFile(job_id, node);
  struct stat sb {};
  if (::lstat(record.c_str(), &sb) != 0) return false;
  return NotThisJobs(sb, ReadLock(record), job_id, uid).empty();
}

}  // namespace

TaskDecision DecideTask(const job::StateLayout& layout, int64_t job_id, uid_t uid, bool asked,
                        const std::string& node) {
  TaskDecision d;
  if (!asked) return d;
  const std::string job = "job " + std::to_string(job_id) + ": ";
  const std::string path = layout.Job(job_id).lock;
  struct stat sb {};
  if (::lstat(path.c_str(), &sb) != 0) {
    const int err = errno;
    if (err == ENOENT && AnotherNodeOfTheJob(layout, job_id, uid, node)) return d;
    d.role = TaskRole::kRefuse;
    d.message = job + "no lock for this pilot job (" + path + ": " + std::strerror(err) +
                "): its prolog could not pin it (a full state file system, or no pilot-prolog "
                "as this node's Prolog=; the prolog's log says which); neither the pilot nor "
                "the job's command runs, and the verdict is NO-GO (lock_missing)";
    return d;
  }
  Result<Lock> lock = ReadLock(path);
  if (std::string wrong = NotThisJobs(sb, lock, job_id, uid); !wrong.empty()) {
    d.role = TaskRole::kRefuse;
    d.message = job + "the pilot lock " + path + " is not this job's (" + wrong +
                "); not starting a pilot, nor the job's command";
    return d;
  }
  const auto low =
      std::find_if(lock->problems.begin(), lock->problems.end(),
                   [](const LockProblem& p) { return p.code == job::kProblemStateSpaceLow; });
  if (low != lock->problems.end()) {
    d.role = TaskRole::kRefuse;
    d.message = job + "pilot refused: " + low->detail;
    return d;
  }
  d.role = TaskRole::kPilot;
  d.lock = std::move(lock).value();
  return d;
}

}  // namespace pilot::spank
