#include "core/verify_report.h"

#include <gtest/gtest.h>

#include "core/json_util.h"

namespace pilot {
namespace {

TEST(VerifyReport, RoundTripAndStrict) {
  VerifyReport v;
  v.ran = true;
  v.checkpoint = "/w/ckpt/step-000010";
  v.step = 10;
  v.complete_marker = true;
  v.files_checked = 4;
  v.manifest_ok = true;
  v.params = 150;
  v.params_with_optimizer_state = 150;
  v.eval_recomputed = true;
  v.eval_loss_recorded = 3.25;
  v.eval_loss_recomputed = 3.2500001;
  v.eval_rel_diff = 3.1e-8;
  v.eval_tolerance = 1e-3;
  v.eval_within = true;
  auto back = ParseVerifyReport(VerifyReportToJson(v));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v);

  Json j = Json::parse(VerifyReportToJson(v));
  j["manifest_ok"] = "yes";
  EXPECT_EQ(ParseVerifyReport(j.dump()).status().ToString(),
            "pilot: verify.json: manifest_ok: expected boolean, got string");
  j = Json::parse(VerifyReportToJson(v));
  j["schema"] = "slurm-pilot/verify/9";
  EXPECT_EQ(ParseVerifyReport(j.dump()).status().code(), Code::kCorrupt);
}

}  // namespace
}  // namespace pilot
