// The real world behind EpilogDeps: core's decision, libcurl, the outbox.
#include <chrono>
#include <ctime>
#include <memory>

#include "core/base/http.h"
#include "core/base/oci.h"
#include "core/records/outbox.h"
#include "epilog/epilog.h"
#include "job/state_layout.h"

namespace pilot::epilog {

Result<Verdict> DecideForEpilog(const EpilogInputs& in, const Policy& policy);  // decide.cc

EpilogDeps RealEpilogDeps(const Policy& site) {
  EpilogDeps d;
  d.run = job::RunCommand;
  d.decide = DecideForEpilog;
  d.post = [](const Policy& policy, const std::string& body, const std::string& key) {
    std::unique_ptr<HttpClient> client = NewCurlHttpClient();
    NotifyTarget target;
    target.url = policy.notify_url;
    target.key = key;
    target.http.connect_timeout =
        std::chrono::seconds(std::min(5, policy.notify_timeout_seconds));
    target.http.total_timeout = std::chrono::seconds(policy.notify_timeout_seconds);
    target.retry.retries = policy.notify_retries;
    return PostSigned(*client, target, body);
  };
  d.enqueue = [](const Policy& policy, int64_t job_id, const std::string& body) {
    Outbox outbox(job::StateLayout(policy.state_dir).OutboxDir());
    return outbox.Enqueue(std::to_string(job_id), body);
  };
  d.now_unix = [] { return static_cast<int64_t>(std::time(nullptr)); };
  const auto start = std::chrono::steady_clock::now();
  d.elapsed_seconds = [start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const OciOptions oci = OciOptionsFrom(site.registry);
  d.resolve_digest = [oci](const std::string& reference) {
    std::unique_ptr<HttpClient> client = NewCurlHttpClient();
    return ResolveDigest(reference, *client, oci);
  };
  return d;
}

}  // namespace pilot::epilog
