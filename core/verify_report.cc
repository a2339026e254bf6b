#include "core/verify_report.h"

#include "core/atomic_file.h"
#include "core/json_util.h"

namespace pilot {

std::string VerifyReportToJson(const VerifyReport& v) {
  Json j = {{"schema", v.schema},
            {"ran", v.ran},
            {"error", v.error},
            {"checkpoint", v.checkpoint},
            {"step", v.step},
            {"complete_marker", v.complete_marker},
            {"files_checked", v.files_checked},
            {"manifest_ok", v.manifest_ok},
            {"manifest_detail", v.manifest_detail},
            {"params", v.params},
            {"params_with_optimizer_state", v.params_with_optimizer_state},
            {"eval_recomputed", v.eval_recomputed},
            {"eval_loss_recorded", v.eval_loss_recorded},
            {"eval_loss_recomputed", v.eval_loss_recomputed},
            {"eval_rel_diff", v.eval_rel_diff},
            {"eval_tolerance", v.eval_tolerance},
            {"eval_within", v.eval_within}};
  return DumpJson(j, 2) + "\n";
}

Result<VerifyReport> ParseVerifyReport(std::string_view text, const std::string& label) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, kMaxVerifyBytes));
  VerifyReport v;
  ObjectReader r(j, label, "");
  r.Str("schema", &v.schema);
  if (r.ok()) PILOT_RETURN_IF_ERROR(CheckSchema(label, v.schema, kVerifySchema));
  r.Bool("ran", &v.ran).Str("error", &v.error).Str("checkpoint", &v.checkpoint);
  r.Int("step", &v.step).Bool("complete_marker", &v.complete_marker);
  r.Int("files_checked", &v.files_checked).Bool("manifest_ok", &v.manifest_ok);
  r.Str("manifest_detail", &v.manifest_detail).Int("params", &v.params);
  r.Int("params_with_optimizer_state", &v.params_with_optimizer_state);
  r.Bool("eval_recomputed", &v.eval_recomputed).Num("eval_loss_recorded", &v.eval_loss_recorded);
  r.Num("eval_loss_recomputed", &v.eval_loss_recomputed).Num("eval_rel_diff", &v.eval_rel_diff);
  r.Num("eval_tolerance", &v.eval_tolerance).Bool("eval_within", &v.eval_within);
  PILOT_RETURN_IF_ERROR(r.Finish());
  return v;
}

Result<VerifyReport> ReadVerifyReport(const std::string& path) {
  auto text = ReadFileLimited(path, kMaxVerifyBytes);
  if (!text.ok()) return text.status();
  return ParseVerifyReport(*text, path);
}

}  // namespace pilot
