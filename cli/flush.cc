// pilot flush: post the verdicts queued in the outbox (root).
#include <memory>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/crypto.h"
#include "core/base/http.h"
#include "core/records/outbox.h"
#include "job/state_layout.h"
#include "job/verdict_history.h"

namespace pilot::cli {

int RunFlush(const Invocation& inv) {
  CommandLine cl("pilot flush [--policy FILE]",
                 "Store every verdict queued in STATE/outbox/unstored/ (verdicts the\n"
                 "epilog could not store, a full disk) in STATE/verdicts/; then post every\n"
                 "verdict queued in STATE/outbox/ (verdicts the epilog could not deliver)\n"
                 "to the policy's notify_url, signed like the epilog does. Each stored or\n"
                 "delivered one is removed from its queue, the others stay. Exit 0 when\n"
                 "both queues are empty afterwards, 1 when some remain.");
  cl.options.add_options()("policy", PolicyValue(), PolicyHelp().c_str());
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  Result<Policy> policy = LoadCliPolicy(vm["policy"].as<std::string>());
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  const job::StateLayout layout(policy->state_dir, policy->work_root);
  Result<job::StoredQueued> unstored = job::StoreQueuedVerdicts(layout);
  if (!unstored.ok()) {
    inv.err << unstored.status().ToString() << "\n";
    return kExitNo;
  }
  const bool had_unstored = unstored->stored + unstored->kept > 0;
  if (had_unstored) {
    inv.out << "pilot: flush: " << unstored->stored << " unstored verdicts stored, "
            << unstored->kept << " still unstored\n";
    for (const Status& s : unstored->errors) inv.err << s.ToString() << "\n";
  }
  if (policy->notify_url.empty() && had_unstored) {
    return unstored->kept == 0 ? kExitOk : kExitNo;
  }
  if (policy->notify_url.empty()) {
    inv.err << Status::Invalid(policy->path.empty() ? "policy" : policy->path,
                               "notify_url is not set: nowhere to post")
                   .ToString()
            << "\n";
    return kExitUsage;
  }
  Result<std::string> key = ReadKeyFile(policy->key_file);
  if (!key.ok()) {
    inv.err << key.status().ToString() << "\n";
    return kExitNo;
  }
  NotifyTarget target;
  target.url = policy->notify_url;
  target.key = *key;
  target.http.connect_timeout = std::chrono::seconds(std::min(5, policy->notify_timeout_seconds));
  target.http.total_timeout = std::chrono::seconds(policy->notify_timeout_seconds);
  target.retry.retries = policy->notify_retries;
  std::unique_ptr<HttpClient> client = NewCurlHttpClient();
  Outbox outbox(layout.OutboxDir());
  Result<Outbox::FlushReport> report =
      outbox.Flush([&](const std::string& body) { return PostSigned(*client, target, body); });
  if (!report.ok()) {
    inv.err << report.status().ToString() << "\n";
    return kExitNo;
  }
  inv.out << "pilot: flush: " << report->sent << " delivered, " << report->kept
          << " still queued\n";
  for (const Status& s : report->errors) inv.err << s.ToString() << "\n";
  return report->kept == 0 && unstored->kept == 0 ? kExitOk : kExitNo;
}

}  // namespace pilot::cli
