// The verify report: the field list below (core/records/record.h) drives both
// VerifyReportToJson and ParseVerifyReport.
#include "core/records/verify_report.h"

#include <limits>

#include "core/base/json_util.h"
#include "core/records/record.h"

namespace pilot {

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ProgramFile>) {
  v("path", s.path);
  v("size", s.size, IntRange{0, std::numeric_limits<int64_t>::max()});
  v("sha256", s.sha256);
  v("format", s.format,
    OneOf{{"safetensors", "torch", "dcp", "torch-legacy", "metadata", "other", "symlink", "special"}});
  v("readable", s.readable);
  v("tensors", s.tensors, IntRange{0, std::numeric_limits<int64_t>::max()});
  v("detail", s.detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<VerifyReport>) {
  v("schema", s.schema);
  v("ran", s.ran);
  v("error", s.error);
  v("checkpoint", s.checkpoint);
  v("step", s.step);
  v("complete_marker", s.complete_marker);
  v("files_checked", s.files_checked);
  v("manifest_ok", s.manifest_ok);
  v("manifest_detail", s.manifest_detail);
  v("params", s.params);
  v("params_with_optimizer_state", s.params_with_optimizer_state);
  v("eval_recomputed", s.eval_recomputed);
  v("eval_loss_recorded", s.eval_loss_recorded);
  v("eval_loss_recomputed", s.eval_loss_recomputed);
  v("eval_rel_diff", s.eval_rel_diff);
  v("eval_tolerance", s.eval_tolerance);
  v("eval_within", s.eval_within);
  // Program mode; absent from reports written before it existed.
  v("mode", s.mode, kMayBeAbsent, OneOf{{"builtin", "program"}});
  v("format", s.format, kMayBeAbsent, OneOf{{"safetensors", "torch", "dcp", "mixed", "unknown", "none"}});
  v("tensors", s.tensors, kMayBeAbsent, IntRange{0, std::numeric_limits<int64_t>::max()});
  v("optimizer_state", s.optimizer_state, kMayBeAbsent);
  v("shards", s.shards, kMayBeAbsent, IntRange{0, std::numeric_limits<int64_t>::max()});
  v("files", s.files, kMayBeAbsent);
  v("not_readable", s.not_readable, kMayBeAbsent);
  v("problems", s.problems, kMayBeAbsent);
  v("manifest_extra", s.manifest_extra, kMayBeAbsent);
}

const std::vector<RecordKey>& VerifyReportKeys() {
  static const std::vector<RecordKey> k = RecordKeys<VerifyReport>();
  return k;
}

std::string VerifyReportToJson(const VerifyReport& v) {
  return DumpJson(RecordToJson(v), 2) + "\n";
}

Result<VerifyReport> ParseVerifyReport(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxVerifyBytes));
  PILOT_RETURN_IF_ERROR(CheckJsonSchema(j, label, kVerifySchema));
  VerifyReport v;
  PILOT_RETURN_IF_ERROR(RecordFromJson(j, &v).Context(label));
  return v;
}

}  // namespace pilot
