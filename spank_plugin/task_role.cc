#include "spank_plugin/task_role.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "job/job_record.h"
#include "job/reserve.h"

namespace pilot::spank {
namespace {

// This node holds its own record of the job: it is another node of a job
// of several, not the one its pilot runs on.
bool AnotherNodeOfTheJob(const job::StateLayout& layout, int64_t job_id, uid_t uid,
                         const std::string& node) {
  if (node.empty()) return false;
  return job::ReadJobRecord(layout.NodeRecordFile(job_id, node), job_id, uid).ok();
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
  if (std::string wrong = job::JobRecordProblem(sb, lock, job_id, uid); !wrong.empty()) {
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
