#include "core/lock.h"

#include "core/atomic_file.h"
#include "core/json_util.h"

namespace pilot {

std::string LockToJson(const Lock& l) {
  Json j;
  j["schema"] = l.schema;
  j["job"] = {{"id", l.job.id},       {"user", l.job.user},
              {"uid", l.job.uid},     {"gid", l.job.gid},
              {"nodes", l.job.nodes}, {"node_list", l.job.node_list},
              {"host", l.job.host},   {"submit_dir", l.job.submit_dir}};
  j["config"] = {{"path", l.config.path},
                 {"copy", l.config.copy},
                 {"sha256_submitted", l.config.sha256_submitted},
                 {"sha256_copied", l.config.sha256_copied}};
  j["seeds"] = {{"training", l.seeds.training}, {"source", l.seeds.source}};
  j["container"] = {{"reference", l.container.reference},
                    {"digest", l.container.digest},
                    {"pinned", l.container.pinned},
                    {"method", l.container.method}};
  j["files"] = Json::array();
  for (const auto& f : l.files) {
    j["files"].push_back({{"role", f.role},
                          {"path", f.path},
                          {"sha256_expected", f.sha256_expected},
                          {"sha256_actual", f.sha256_actual},
                          {"bytes", f.bytes}});
  }
  j["versions"] = l.versions;
  j["gpus"] = Json::array();
  for (const auto& g : l.gpus) {
    j["gpus"].push_back(
        {{"index", g.index}, {"name", g.name}, {"uuid", g.uuid}, {"memory_bytes", g.memory_bytes}});
  }
  j["problems"] = Json::array();
  for (const auto& p : l.problems)
    j["problems"].push_back({{"code", p.code}, {"detail", p.detail}});
  j["created"] = l.created;
  return DumpJson(j, 2) + "\n";
}

Result<Lock> ParseLock(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxLockBytes));
  Lock l;
  using R = ObjectReader;
  R r(j, label, "");
  r.Str("schema", &l.schema);
  if (r.ok()) PILOT_RETURN_IF_ERROR(CheckSchema(label, l.schema, kLockSchema));
  r.Object("job", [&](R& o) {
    o.Int("id", &l.job.id).Str("user", &l.job.user).Uint("uid", &l.job.uid);
    o.Uint("gid", &l.job.gid).Int("nodes", &l.job.nodes);
    o.Str("node_list", &l.job.node_list, R::kOptional).Str("host", &l.job.host, R::kOptional);
    o.Str("submit_dir", &l.job.submit_dir, R::kOptional);
    if (o.ok() && l.job.id <= 0) o.Fail("id", "must be > 0");
  });
  r.Object("config", [&](R& o) {
    o.Str("path", &l.config.path).Str("copy", &l.config.copy, R::kOptional);
    o.Str("sha256_submitted", &l.config.sha256_submitted);
    o.Str("sha256_copied", &l.config.sha256_copied);
  });
  r.Object("seeds", [&](R& o) {
    o.Int("training", &l.seeds.training);
    o.Enum("source", &l.seeds.source, {"config", "job_id"});
  });
  r.Object("container", [&](R& o) {
    o.Str("reference", &l.container.reference).Str("digest", &l.container.digest);
    o.Str("pinned", &l.container.pinned, R::kOptional);
    o.Enum("method", &l.container.method, {"registry", "file", "none"});
  });
  r.Array<LockFile>("files", &l.files, [](R& o, LockFile* f) {
    o.Enum("role", &f->role, {"init_weights", "train", "eval"}).Str("path", &f->path);
    o.Str("sha256_expected", &f->sha256_expected).Str("sha256_actual", &f->sha256_actual);
    o.Int("bytes", &f->bytes);
  });
  r.StrMap("versions", &l.versions);
  r.Array<LockGpu>("gpus", &l.gpus, [](R& o, LockGpu* g) {
    o.Int("index", &g->index).Str("name", &g->name).Str("uuid", &g->uuid, R::kOptional);
    o.Int("memory_bytes", &g->memory_bytes);
  });
  r.Array<LockProblem>("problems", &l.problems, [](R& o, LockProblem* p) {
    o.Str("code", &p->code).Str("detail", &p->detail);
  });
  r.Str("created", &l.created);
  if (r.ok() && !ParseRfc3339(l.created).ok()) r.Fail("created", "expected RFC 3339 time");
  PILOT_RETURN_IF_ERROR(r.Finish());
  return l;
}

Result<Lock> ReadLock(const std::string& path) {
  auto text = ReadFileLimited(path, kMaxLockBytes);
  if (!text.ok()) return text.status();
  return ParseLock(*text, path);
}

}  // namespace pilot
