// lock.json: the field lists below (core/records/record.h) drive both LockToJson and
// ParseLock.
#include "core/records/lock.h"

#include "core/base/atomic_file.h"
#include "core/base/json_util.h"
#include "core/records/record.h"

namespace pilot {

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockJob>) {
  v("id", s.id);
  v("user", s.user);
  v("uid", s.uid);
  v("gid", s.gid);
  v("nodes", s.nodes);
  v("node_list", s.node_list, kMayBeAbsent);
  v("host", s.host, kMayBeAbsent);
  v("submit_dir", s.submit_dir, kMayBeAbsent);
  v("gpus", s.gpus, kOmitIfUnset);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockConfig>) {
  v("path", s.path);
  v("copy", s.copy, kMayBeAbsent);
  v("sha256_submitted", s.sha256_submitted);
  v("sha256_copied", s.sha256_copied);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockSeeds>) {
  v("training", s.training);
  v("source", s.source, OneOf{{"config", "job_id"}});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockContainer>) {
  v("reference", s.reference);
  v("digest", s.digest);
  v("pinned", s.pinned, kMayBeAbsent);
  v("method", s.method, OneOf{{"registry", "file", "none"}});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockFile>) {
  v("role", s.role, OneOf{{"init_weights", "train", "eval"}});
  v("path", s.path);
  v("sha256_expected", s.sha256_expected);
  v("sha256_actual", s.sha256_actual);
  v("bytes", s.bytes);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockGpu>) {
  v("index", s.index);
  v("name", s.name);
  v("uuid", s.uuid, kMayBeAbsent);
  v("memory_bytes", s.memory_bytes);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockProblem>) {
  v("code", s.code);
  v("detail", s.detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Lock>) {
  v("schema", s.schema);
  // Locks written before instances existed have none.
  v("instance", s.instance, kMayBeAbsent);
  v("job", s.job);
  v("config", s.config);
  v("seeds", s.seeds);
  v("container", s.container);
  v("files", s.files);
  v("versions", s.versions);
  v("gpus", s.gpus);
  v("problems", s.problems);
  v("created", s.created, Validate{&CheckRfc3339});
}

std::string LockToJson(const Lock& l) { return DumpJson(RecordToJson(l), 2) + "\n"; }

Result<Lock> ParseLock(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxLockBytes));
  PILOT_RETURN_IF_ERROR(CheckJsonSchema(j, label, kLockSchema));
  Lock l;
  PILOT_RETURN_IF_ERROR(RecordFromJson(j, &l).Context(label));
  // Beyond the field list: a lock belongs to a real job.
  if (l.job.id <= 0) return Status::Corrupt(label + ": job.id", "must be > 0");
  return l;
}

Result<Lock> ReadLock(const std::string& path) {
  auto text = ReadFileLimited(path, kMaxLockBytes);
  if (!text.ok()) return text.status();
  return ParseLock(*text, path);
}

}  // namespace pilot
