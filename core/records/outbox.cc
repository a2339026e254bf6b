#include "core/records/outbox.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/crypto.h"
#include "core/base/strings.h"

namespace pilot {
namespace {

constexpr size_t kMaxEntryBytes = 8u << 20;

}  // namespace

Outbox::Outbox(std::string dir, FileOps& fs) : dir_(std::move(dir)), fs_(&fs) {}

Status Outbox::Enqueue(const std::string& name, const std::string& body) {
  // 1 to 128 characters of A-Z a-z 0-9 . _ -, not hidden.
  if (!IsSimpleName(name, 128) || name[0] == '.') {
    return Status::Invalid("outbox: " + name, "bad entry name");
  }
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IoError(dir_, std::strerror(errno));
  }
  return WriteFileAtomic(dir_ + "/" + name + ".json", body, 0600, *fs_);
}

Result<std::vector<std::string>> Outbox::List() const {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return Status::IoError(dir_, std::strerror(errno));
  }
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    // Temporary files of an interrupted Enqueue start with '.'.
    if (name.empty() || name[0] == '.' || name.size() <= 5 ||
        name.compare(name.size() - 5, 5, ".json") != 0) {
      continue;
    }
    out.push_back(dir_ + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

Result<Outbox::FlushReport> Outbox::Flush(
    const std::function<Status(const std::string& body)>& post) {
  PILOT_ASSIGN_OR_RETURN(std::vector<std::string> files, List());
  FlushReport report;
  for (const auto& path : files) {
    auto body = ReadFileLimited(path, kMaxEntryBytes);
    Status s = body.ok() ? post(*body) : body.status();
    if (s.ok()) s = fs_->Remove(path);
    if (s.ok()) {
      ++report.sent;
    } else {
      ++report.kept;
      report.errors.push_back(s.Context(path));
    }
  }
  return report;
}

Status PostSigned(HttpClient& client, const NotifyTarget& target, const std::string& body) {
  return PostJson(client, target.url, body,
                  {{kSignatureHeader, SignatureHeaderValue(target.key, body)}}, target.http,
                  target.retry);
}

Status DeliverOrQueue(HttpClient& client, const NotifyTarget& target, Outbox& outbox,
                      const std::string& name, const std::string& body) {
  if (target.url.empty()) return Status::Ok();
  Status posted = PostSigned(client, target, body);
  if (posted.ok()) return posted;
  PILOT_RETURN_IF_ERROR(outbox.Enqueue(name, body));
  return Status::Unavailable(posted.Message(), "queued in " + outbox.dir())
      .WithHint("deliver it later with 'pilot flush'");
}

}  // namespace pilot
