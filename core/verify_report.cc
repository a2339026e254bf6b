// The verify report: the field list below (core/record.h) drives both
// VerifyReportToJson and ParseVerifyReport.
#include "core/verify_report.h"

#include "core/json_util.h"
#include "core/record.h"

namespace pilot {

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
