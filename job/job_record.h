// The prolog's record of a job as the Slurm-side parts trust it: the lock
// (STATE/jobs/JOBID/lock.json) or another node's record
// (STATE/nodes/JOBID/NODE.json, the lock's format), each root's plain file
// naming the job and its uid. The plugin's task decision
// (spank_plugin/task_role.h) and a container task's checks
// (supervisor/program/container_task.h) read them through here.
//
// Thread-safety: reads files; no shared state.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/records/lock.h"

namespace pilot::job {

// "" when a record (`sb` its lstat, `lock` its contents) is root's plain
// file naming `job_id` and `uid`; else what is wrong ("not a plain file of
// root's", the reader's message, "job N, uid M").
std::string JobRecordProblem(const struct stat& sb, const Result<Lock>& lock, int64_t job_id,
                             uid_t uid);

// The record at `path` when it is one of this job's (above). Errors:
// kNotFound when there is none (lstat's reason), kInvalid naming the path
// and what JobRecordProblem says.
Result<Lock> ReadJobRecord(const std::string& path, int64_t job_id, uid_t uid);

}  // namespace pilot::job
