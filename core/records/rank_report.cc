// Rank reports: the field lists below (core/records/record.h) drive both
// RankReportToJson and ParseRankReport.
#include "core/records/rank_report.h"

#include <nlohmann/json.hpp>

#include "core/base/atomic_file.h"
#include "core/base/json_util.h"
#include "core/records/memory_fields.h"
#include "core/records/record.h"

namespace pilot {

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RankMemory>) {
  MemoryFields(v, s, kRankMemoryKeys);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RankLoad>) {
  v("path", s.path);
  v("bytes", s.bytes);
  v("seconds", s.seconds);
  v("from_world_size", s.from_world_size);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RankCheckpoint>) {
  v("path", s.path);
  v("step", s.step);
  v("bytes", s.bytes);
  v("seconds", s.seconds);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RankCommProbe>) {
  v("bytes", s.bytes);
  v("nodes", s.nodes);
  v("intra_size", s.intra_size, kOmitIfUnset);
  v("intra_ms", s.intra_ms, kOmitIfUnset);
  v("inter_size", s.inter_size, kOmitIfUnset);
  v("inter_ms", s.inter_ms, kOmitIfUnset);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RankFailure>) {
  v("phase", s.phase);
  v("step", s.step);
  v("out_of_memory", s.out_of_memory);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RankReport>) {
  v("rank", s.rank);
  v("world_size", s.world_size);
  v("local_rank", s.local_rank);
  v("node_id", s.node_id);
  v("launcher", s.launcher);
  v("phase", s.phase, OneOf{{"train", "resume"}});
  v("host", s.host);
  v("backend", s.backend, kOmitIfUnset);
  v("mode", s.mode, kOmitIfUnset);
  v("data_ranks", s.data_ranks, kOmitIfUnset);
  v("buckets", s.buckets, kOmitIfUnset);
  v("units", s.units, kOmitIfUnset);
  v("skipped", s.skipped, kOmitIfUnset);
  v("load", s.load, kOmitIfUnset);
  v("memory", s.memory, kOmitIfUnset);
  v("checkpoint", s.checkpoint, kOmitIfUnset);
  v("first_step", s.first_step, kOmitIfUnset);
  v("losses", s.losses, kOmitIfUnset);
  v("grad_norms", s.grad_norms, kOmitIfUnset);
  v("timed_steps", s.timed_steps, kOmitIfUnset);
  v("step_ms", s.step_ms, kOmitIfUnset);
  v("tokens_per_second", s.tokens_per_second, kOmitIfUnset);
  v("data_wait_ms", s.data_wait_ms, kOmitIfUnset);
  v("compute_ms", s.compute_ms, kOmitIfUnset);
  v("comm_total_ms", s.comm_total_ms, kOmitIfUnset);
  v("comm_exposed_ms", s.comm_exposed_ms, kOmitIfUnset);
  v("optimizer_ms", s.optimizer_ms, kOmitIfUnset);
  v("collectives_per_step", s.collectives_per_step, kOmitIfUnset);
  v("comm_probe", s.comm_probe, kOmitIfUnset);
  v("max_abs_param_diff", s.max_abs_param_diff, kOmitIfUnset);
  v("max_rel_param_diff", s.max_rel_param_diff, kOmitIfUnset);
  v("params_compared", s.params_compared, kOmitIfUnset);
  v("failure", s.failure, kOmitIfUnset);
  v("status", s.status, OneOf{{"ok", "error"}});
  v("exit_code", s.exit_code);
  v("message", s.message, kOmitIfUnset);
}

std::string RankReportToJson(const RankReport& r) {
  return DumpJson(RecordToJson<nlohmann::ordered_json>(r, kMeasuredStyle), 2) + "\n";
}

Result<RankReport> ParseRankReport(std::string_view text, const std::string& label) {
  auto fail = [&](const Status& s) { return s.Context(label); };
  if (text.size() > kMaxRankReportBytes) {
    return fail(Status::Invalid("", "larger than " + std::to_string(kMaxRankReportBytes) + " bytes"));
  }
  // A sorted map: ordered_json's inserts scan the object (quadratic in keys).
  Result<Json> parsed = ParseJsonText(text, "", kMaxRankReportBytes);
  if (!parsed.ok()) return fail(Status::Invalid("", parsed.status().detail()));
  const Json& j = *parsed;
  RankReport r;
  PILOT_RETURN_IF_ERROR(fail(RecordFromJson(j, &r, kMeasuredStyle)));
  return r;
}

Result<RankReport> ReadRankReport(const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxRankReportBytes));
  return ParseRankReport(text, path);
}

bool PeerFailed(const std::optional<RankReport>& r) {
  return r && r->message && r->message->find(kPeerFailedMessage) != std::string::npos;
}

}  // namespace pilot
