#include "job/binding.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "core/base/atomic_file.h"
#include "core/base/json_util.h"
#include "core/base/strings.h"

namespace pilot::job {
namespace {

// "config", "container", "file ROLE PATH", "pin NAME", "hub_model NAME":
// the text before the line's first " sha256:" or " commit " (a
// container's: its first word); "" for the node count.
std::string PartOf(const std::string& line) {
  if (StartsWith(line, "nodes ")) return "";
  if (StartsWith(line, "container ")) return "container";
  size_t cut = std::min(line.find(" sha256:"), line.find(" commit "));
  return cut == std::string::npos ? line : line.substr(0, cut);
}

// A value with its long hex runs cut to 12 characters.
std::string Short(const std::string& value) {
  std::string out;
  size_t run = 0;
  for (char c : value) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    run = hex ? run + 1 : 0;
    if (run == 13) out += "...";
    if (run <= 12) out += c;
  }
  return out;
}

std::map<std::string, std::string> Parts(const std::vector<std::string>& lines) {
  std::map<std::string, std::string> out;
  for (const std::string& line : lines) {
    const std::string part = PartOf(line);
    if (part.empty()) continue;
    std::string value = line.substr(std::min(part.size() + 1, line.size()));
    out[part] = value;
  }
  return out;
}

}  // namespace

std::vector<std::string> IdentityDifferences(const std::vector<std::string>& piloted,
                                             const std::vector<std::string>& now) {
  const std::map<std::string, std::string> was = Parts(piloted), is = Parts(now);
  std::vector<std::string> out;
  for (const auto& [part, value] : is) {
    auto it = was.find(part);
    if (it == was.end()) {
      out.push_back(part + ": " + Short(value) + ", not in the piloted run");
    } else if (it->second != value) {
      out.push_back(part + ": " + Short(value) + ", piloted " + Short(it->second));
    }
  }
  for (const auto& [part, value] : was) {
    if (!is.count(part)) out.push_back(part + ": not in this run, piloted " + Short(value));
  }
  return out;
}

Json RunRecordJson(const RunRecord& r) {
  return {{"schema", kRunSchema},
            {"job_id", r.job_id},
            {"pilot_job", r.pilot_job},
            {"user", r.user},
            {"uid", static_cast<int64_t>(r.uid)},
            {"host", r.host},
            {"decision", r.decision},
            {"reasons", r.reasons},
            {"identity", {{"sha256", r.identity_sha256}, {"lines", r.identity_lines}}},
            {"piloted_sha256", r.piloted_sha256},
            {"checked_at", r.checked_at}};
}

std::string RunRecordToJson(const RunRecord& r) { return DumpJson(RunRecordJson(r), 2) + "\n"; }

Result<RunRecord> ParseRunRecord(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, 1 << 20));
  auto bad = [&](const std::string& what) { return Status::Corrupt(label, what); };
  if (!j.is_object()) return bad("not a JSON object");
  auto str = [&](const char* key, std::string* out) {
    if (!j.contains(key) || !j[key].is_string()) return false;
    *out = j[key].get<std::string>();
    return true;
  };
  auto num = [&](const char* key, int64_t* out) {
    if (!j.contains(key) || !j[key].is_number_integer()) return false;
    *out = j[key].get<int64_t>();
    return true;
  };
  auto strings = [&](const Json& a, std::vector<std::string>* out) {
    if (!a.is_array()) return false;
    for (const Json& s : a) {
      if (!s.is_string()) return false;
      out->push_back(s.get<std::string>());
    }
    return true;
  };
  std::string schema;
  if (!str("schema", &schema)) return bad("no schema");
  PILOT_RETURN_IF_ERROR(CheckSchema(label, schema, kRunSchema));
  RunRecord r;
  int64_t uid = -1;
  if (!num("job_id", &r.job_id) || !num("pilot_job", &r.pilot_job) || !num("uid", &uid) ||
      uid < 0) {
    return bad("job_id, pilot_job and uid: expected integers");
  }
  r.uid = static_cast<uid_t>(uid);
  if (!str("user", &r.user) || !str("host", &r.host) || !str("decision", &r.decision) ||
      !str("piloted_sha256", &r.piloted_sha256) || !str("checked_at", &r.checked_at)) {
    return bad("user, host, decision, piloted_sha256 and checked_at: expected strings");
  }
  if (r.decision != kRunAdmitted && r.decision != kRunRefused) {
    return bad("decision: expected \"admitted\" or \"refused\", got " + Quote(r.decision));
  }
  if (!j.contains("reasons") || !strings(j["reasons"], &r.reasons))
    return bad("reasons: expected strings");
  if (!j.contains("identity") || !j["identity"].is_object())
    return bad("identity: expected an object");
  const Json& id = j["identity"];
  if (!id.contains("sha256") || !id["sha256"].is_string() || !id.contains("lines") ||
      !strings(id["lines"], &r.identity_lines)) {
    return bad("identity: expected {\"sha256\": string, \"lines\": [strings]}");
  }
  r.identity_sha256 = id["sha256"].get<std::string>();
  return r;
}

Result<RunRecord> ReadRunRecordOf(const std::string& path, int64_t job_id, uid_t uid) {
  struct stat sb {};
  if (::lstat(path.c_str(), &sb) != 0) {
    const int err = errno;
    const std::string why = path + ": " + std::strerror(err);
    return err == ENOENT ? Status::NotFound("run record", why) : Status::IoError("run record", why);
  }
  if (!S_ISREG(sb.st_mode) || sb.st_uid != 0) {
    return Status::Permission("run record", "the run record " + path + " is not a plain file of root's");
  }
  Result<std::string> text = ReadFileLimited(path, 1 << 20);
  Result<RunRecord> r = text.ok() ? ParseRunRecord(*text, path) : Result<RunRecord>(text.status());
  if (!r.ok()) return Status::Corrupt("run record", "cannot read its run record: " + r.status().Message());
  if (r->job_id != job_id || r->uid != uid) {
    return Status::Corrupt("run record", "the run record " + path + " is another job's (job " +
                                             std::to_string(r->job_id) + ", uid " + std::to_string(r->uid) + ")");
  }
  return r;
}

std::string BoundRunScript(int64_t pilot_job) {
  const std::string p = std::to_string(pilot_job);
  return "#!/bin/sh\n"
         "# slurm-pilot: the run piloted by job " + p + ". Its tasks run the pilot's program.command\n"
         "# in place of this script (spank_pilot(8), BINDING); submitted by `pilot run " + p + "`.\n"
         "echo \"pilot: job $SLURM_JOB_ID: the run of pilot " + p + " needs spank_pilot.so on its node\" >&2\n"
         "exit 1\n";
}

std::string RunRefusal(const std::string& path, int64_t job_id, uid_t uid, bool named_run) {
  const std::string job = "job " + std::to_string(job_id) + ": ";
  Result<RunRecord> r = ReadRunRecordOf(path, job_id, uid);
  if (!r.ok() && r.status().code() == Code::kNotFound) {
    if (!named_run) return "";
    return job +
           "it names a pilot run (--pilot-run), but its prolog left no record of the check (" +
           r.status().detail() +
           "): not the piloted run until checked, so no task runs (the prolog's log says why)";
  }
  if (!r.ok()) return job + r.status().detail() + "; no task runs";
  if (r->decision == kRunAdmitted) return "";
  return job + "refused: not the run piloted by job " + std::to_string(r->pilot_job) + ": " +
         Join(r->reasons, "; ") + " (see 'pilot verdict " + std::to_string(r->pilot_job) + "')";
}

std::vector<RunRecord> RunsOfPilot(const std::string& runs_dir, int64_t pilot_job) {
  std::vector<RunRecord> out;
  DIR* d = ::opendir(runs_dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 6 || name.size() > 24 || name.substr(name.size() - 5) != ".json" ||
        name.find_first_not_of("0123456789") != name.size() - 5) {
      continue;
    }
    const std::string path = runs_dir + "/" + name;
    struct stat sb {};
    if (::lstat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != 0) continue;
    Result<std::string> text = ReadFileLimited(path, 1 << 20);
    if (!text.ok()) continue;
    Result<RunRecord> r = ParseRunRecord(*text, path);
    if (r.ok() && r->pilot_job == pilot_job) out.push_back(std::move(r).value());
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const RunRecord& a, const RunRecord& b) { return a.job_id < b.job_id; });
  return out;
}

}  // namespace pilot::job
