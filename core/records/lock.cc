// lock.json: the field lists below (core/records/record.h) drive both LockToJson and
// ParseLock.
#include "core/records/lock.h"

#include <algorithm>
#include <tuple>

#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/base/strings.h"
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
void Fields(V& v, S& s, std::type_identity<LockPin>) {
  v("kind", s.kind, OneOf{{"file", "folder", "hub_model", "hub_dataset"}});
  v("name", s.name);
  v("path", s.path);
  v("sha256", s.sha256);
  v("files", s.files);
  v("bytes", s.bytes);
  v("commit", s.commit);
  v("dirty", s.dirty, OneOf{{"", "yes", "no"}});
  v("error", s.error);
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
  // Locks written before pins existed have none.
  v("pins", s.pins, kMayBeAbsent);
  v("pins_submitted", s.pins_submitted, kOmitIfUnset);
  v("identity", s.identity, kOmitIfUnset);
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

std::string LockPinsToJson(const std::vector<LockPin>& pins) {
  Json arr = Json::array();
  for (const LockPin& p : pins) arr.push_back(RecordToJson(p));
  return DumpJson(arr);
}

Result<std::vector<LockPin>> ParseLockPins(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxLockBytes));
  if (!j.is_array()) return Status::Corrupt(label, "not a JSON array");
  std::vector<LockPin> out;
  for (size_t i = 0; i < j.size(); ++i) {
    LockPin p;
    PILOT_RETURN_IF_ERROR(
        RecordFromJson(j[i], &p).Context(label + ": [" + std::to_string(i) + "]"));
    out.push_back(std::move(p));
  }
  return out;
}

namespace {

std::string Short(const std::string& v) {
  // "sha256 <64 hex>" and bare commits read shorter in a sentence.
  if (StartsWith(v, "sha256 ") && v.size() == 7 + 64) return "sha256 " + v.substr(7, 12) + "...";
  if (v.size() == 40 || v.size() == 64) {
    if (v.find_first_not_of("0123456789abcdef") == std::string::npos) return v.substr(0, 12) + "...";
  }
  return v;
}

}  // namespace

std::map<std::string, std::string> PinSummary(const std::vector<LockPin>& pins) {
  std::map<std::string, std::string> m;
  for (const LockPin& p : pins) {
    const bool hub = p.kind == "hub_model" || p.kind == "hub_dataset";
    const std::string key = hub ? (p.kind == "hub_model" ? "hub model " : "hub dataset ") + p.name
                                : p.name;
    if (!p.error.empty()) {
      m[key] = "error: " + p.error;
      continue;
    }
    if (hub) {
      m[key] = p.commit;
      m[key + " (files)"] = "sha256 " + p.sha256;
      continue;
    }
    m[key] = "sha256 " + p.sha256;
    if (!p.commit.empty()) m[key + " (git HEAD)"] = p.commit;
    if (!p.dirty.empty()) m[key + " (git dirty)"] = p.dirty;
  }
  return m;
}

std::vector<std::string> MovedPins(const std::map<std::string, std::string>& submitted,
                                   const std::map<std::string, std::string>& now) {
  std::vector<std::string> out;
  for (const auto& [key, value] : now) {
    auto it = submitted.find(key);
    if (it == submitted.end()) {
      out.push_back(key + ": " + Short(value) + ", not pinned at submit");
    } else if (it->second != value) {
      out.push_back(key + ": " + Short(value) + ", at submit " + Short(it->second));
    }
  }
  for (const auto& [key, value] : submitted) {
    if (now.count(key) == 0) out.push_back(key + ": gone, at submit " + Short(value));
  }
  return out;
}

LockIdentity RunIdentity(const Lock& l) {
  LockIdentity id;
  id.lines.push_back("config sha256:" + l.config.sha256_copied);
  id.lines.push_back("container " + (l.container.method == "none" || l.container.digest.empty()
                                         ? std::string("none")
                                         : l.container.digest));
  for (const LockFile& f : l.files) {
    id.lines.push_back("file " + f.role + " " + f.path + " sha256:" + f.sha256_actual);
  }
  std::vector<const LockPin*> pins;
  for (const LockPin& p : l.pins) pins.push_back(&p);
  std::stable_sort(pins.begin(), pins.end(), [](const LockPin* a, const LockPin* b) {
    return std::tie(a->kind, a->name) < std::tie(b->kind, b->name);
  });
  for (const LockPin* p : pins) {
    const bool hub = p->kind == "hub_model" || p->kind == "hub_dataset";
    std::string line = (hub ? p->kind : std::string("pin")) + " " + p->name;
    if (hub) line += " commit " + p->commit;
    line += " sha256:" + p->sha256;
    if (!hub && !p->commit.empty()) line += " commit " + p->commit;
    if (!hub && p->dirty == "yes") line += " dirty";
    id.lines.push_back(line);
  }
  id.lines.push_back("nodes " + std::to_string(l.job.nodes));
  std::string text;
  for (const std::string& line : id.lines) text += line + "\n";
  id.sha256 = Sha256Hex(text);
  return id;
}

}  // namespace pilot
