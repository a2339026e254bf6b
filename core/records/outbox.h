// The outbox: verdicts that could not be posted, kept until `pilot flush`.
//
// Each queued verdict is one file DIR/<name>.json (mode 0600, written
// atomically), holding exactly the body to POST. Flushing posts each file in
// name order, removes it on success and keeps it on failure, so nothing is
// lost when the receiver is down.
//
// Thread-safety: an Outbox holds only paths; concurrent Flush() calls may
// post a file twice (the receiver should treat posts as idempotent per
// job id) but never lose one.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/base/atomic_file.h"
#include "core/base/http.h"
#include "core/base/status.h"

namespace pilot {

class Outbox {
 public:
  // `dir` is the outbox directory. Where it lies is the callers' business
  // (the state directory's layout, job/state_layout.h); core does not
  // know it.
  explicit Outbox(std::string dir, FileOps& fs = RealFileOps());

  const std::string& dir() const { return dir_; }

  // Queues `body` under `name` ([A-Za-z0-9._-]+, e.g. the job id); creates
  // the directory (0700) if needed; replaces an entry of the same name.
  // Errors: kInvalid (bad name), kIoError, kPermission.
  Status Enqueue(const std::string& name, const std::string& body);

  // Paths of the queued files, sorted. A missing directory is an empty
  // outbox. Errors: kIoError.
  Result<std::vector<std::string>> List() const;

  struct FlushReport {
    int sent = 0;                // posted and removed
    int kept = 0;                // failed, still queued
    std::vector<Status> errors;  // one per kept file
  };
  // Posts every queued file with `post(body)`; removes it when post returns
  // OK. Files that cannot be read are kept and reported.
  Result<FlushReport> Flush(const std::function<Status(const std::string& body)>& post);

 private:
  std::string dir_;
  FileOps* fs_;
};

// Everything needed to deliver a verdict body to the site's receiver.
struct NotifyTarget {
  std::string url;  // "" = nothing to post
  std::string key;  // signing key bytes for the X-Pilot-Signature-256 header
  HttpOptions http;
  RetryOptions retry;
};

// POSTs `body` to target.url with the signature header; returns OK or the
// posting error.
Status PostSigned(HttpClient& client, const NotifyTarget& target, const std::string& body);

// The epilog's path: post `body`; on failure queue it as `name` in `outbox`.
// Returns OK when posted (or when no URL is configured), kUnavailable
// (with "queued in DIR") when queued, or the queueing error when even that
// failed.
Status DeliverOrQueue(HttpClient& client, const NotifyTarget& target, Outbox& outbox,
                      const std::string& name, const std::string& body);

}  // namespace pilot
