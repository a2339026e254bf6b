// pilot report for a user's program: the page names the program that ran
// and every problem the supervisor found, escaped like everything else.
#include <gtest/gtest.h>

#include "core/decide/report.h"

namespace pilot {
namespace {

TEST(ReportProgram, NamesTheProgramAndItsProblems) {
  ReportInput in;
  in.label = "job 7";
  in.results.workload = "program";
  ProgramInfo p;
  p.command = {"python3", "train.py", "--tag", "<a&b>"};
  p.workdir = "/home/alice/run";
  p.launcher = "pilot";
  p.metrics = "records";
  p.problems = {"the resumed process reported step 1 first, not 7"};
  in.results.program = p;
  SingleStage s;
  s.status = "ok";
  s.device = "cpu";
  in.results.single = s;
  const std::string html = RenderReportHtml(in);
  EXPECT_NE(html.find("python3 train.py --tag &lt;a&amp;b&gt; (in /home/alice/run, launcher pilot"),
            std::string::npos);
  EXPECT_NE(html.find("the resumed process reported step 1 first, not 7"), std::string::npos);
  EXPECT_EQ(html.find("<a&b>"), std::string::npos);
}

TEST(ReportProgram, ABuiltinPilotHasNoProgramRow) {
  ReportInput in;
  in.label = "job 8";
  SingleStage s;
  s.status = "ok";
  s.device = "cpu";
  in.results.single = s;
  EXPECT_EQ(RenderReportHtml(in).find("<th>program</th>"), std::string::npos);
}

// A sharded run's single stage at reduced depth: the page says so.
TEST(ReportProgram, AReducedDepthIsNamed) {
  ReportInput in;
  in.label = "job 9";
  SingleStage s;
  s.status = "ok";
  s.device = "cuda";
  ReducedDepth r;
  r.layers = 9;
  r.full_layers = 32;
  r.detail = "the single stage runs 9 of 32 layers";
  s.reduced_depth = r;
  in.results.single = s;
  EXPECT_NE(RenderReportHtml(in).find("the single stage runs 9 of 32 layers"), std::string::npos);
}

}  // namespace
}  // namespace pilot
