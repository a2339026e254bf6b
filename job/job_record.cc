#include "job/job_record.h"

#include <cerrno>
#include <cstring>

namespace pilot::job {

std::string JobRecordProblem(const struct stat& sb, const Result<Lock>& lock, int64_t job_id,
                             uid_t uid) {
  if (!S_ISREG(sb.st_mode) || sb.st_uid != 0) return "not a plain file of root's";
  if (!lock.ok()) return lock.status().Message();
  if (lock->job.id != job_id || lock->job.uid != uid) {
    return "job " + std::to_string(lock->job.id) + ", uid " + std::to_string(lock->job.uid);
  }
  return "";
}

Result<Lock> ReadJobRecord(const std::string& path, int64_t job_id, uid_t uid) {
  struct stat sb {};
  if (::lstat(path.c_str(), &sb) != 0) return Status::NotFound(path, std::strerror(errno));
  // Not read unless it is root's plain file.
  Result<Lock> lock = S_ISREG(sb.st_mode) && sb.st_uid == 0
                          ? ReadLock(path)
                          : Result<Lock>(Status::Invalid(path, "not a plain file of root's"));
  const std::string problem = JobRecordProblem(sb, lock, job_id, uid);
  if (!problem.empty()) return Status::Invalid(path, problem);
  return lock;
}

}  // namespace pilot::job
