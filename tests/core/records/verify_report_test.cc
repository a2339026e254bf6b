#include "core/records/verify_report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/base/json_util.h"
#include "core/records/record.h"

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

TEST(VerifyReport, ProgramModeRoundTripAndOldReports) {
  VerifyReport v;
  v.ran = true;
  v.mode = "program";
  v.format = "torch";
  v.tensors = 12;
  v.optimizer_state = true;
  v.files.push_back({"ckpt.pt", 4096, std::string(64, 'a'), "torch", true, 12, "dict of 5 keys"});
  v.files.push_back({"link", 0, "", "symlink", false, 0, "a symbolic link"});
  v.not_readable = {"notes.bin"};
  v.problems = {"link: a symbolic link"};
  v.manifest_extra = {"new.txt"};
  auto back = ParseVerifyReport(VerifyReportToJson(v));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, v);

  // A report written before program mode still reads, as a builtin one.
  Json j = Json::parse(VerifyReportToJson(VerifyReport{}));
  for (const char* k : {"mode", "format", "tensors", "optimizer_state", "shards", "files",
                        "not_readable", "problems", "manifest_extra"}) {
    j.erase(k);
  }
  auto old = ParseVerifyReport(j.dump());
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->mode, "builtin");

  j = Json::parse(VerifyReportToJson(v));
  j["files"][0]["format"] = "pickle";
  EXPECT_EQ(ParseVerifyReport(j.dump()).status().code(), Code::kCorrupt);
}

// Every member is named in pilot-files(5)'s VERIFY.JSON section.
TEST(VerifyReport, EveryKeyIsDocumented) {
  std::ifstream in(std::string(PILOT_SOURCE_DIR) + "/man/pilot-files.5");
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string page = ss.str();
  const size_t begin = page.find(".SH VERIFY.JSON");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = page.find("\n.SH ", begin + 1);
  const std::string section = page.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  for (const RecordKey& k : VerifyReportKeys()) {
    EXPECT_NE(section.find("\\fB" + k.name + "\\fR"), std::string::npos)
        << "pilot-files(5), VERIFY.JSON: " << k.name << " is not documented";
  }
  for (const char* k : {"path", "size", "sha256", "format", "readable", "tensors", "detail"}) {
    EXPECT_NE(section.find("\\fB" + std::string(k) + "\\fR"), std::string::npos)
        << "pilot-files(5), VERIFY.JSON: files[]." << k << " is not documented";
  }
}

}  // namespace
}  // namespace pilot
