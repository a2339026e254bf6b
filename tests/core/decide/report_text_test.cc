// pilot report against a program's bytes: the page shows them inert, and
// metrics.jsonl's lines with a key named twice are skipped like any
// unreadable line. Each test names what it proves.
#include <gtest/gtest.h>

#include "core/base/utf8.h"
#include "core/decide/report.h"

namespace pilot {
namespace {

// Proves a line of metrics.jsonl that names a key twice is not read (one
// reader would plot the first loss, another the last), and is counted as
// skipped.
TEST(ReportText, MetricsLineWithADuplicateKeyIsSkipped) {
  size_t skipped = 0;
  const std::vector<MetricRow> rows = ParseMetricsJsonl(
      "{\"step\": 1, \"loss\": 2.5}\n{\"step\": 2, \"loss\": 9, \"loss\": 0.1}\n", &skipped);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].step, 1);
  EXPECT_EQ(skipped, 1u);
}

// Proves the page written to a terminal (pilot report -o -) carries no
// control character a program put into its problems or command line: the
// escape and carriage return are spelled out, and so is a byte that is not
// UTF-8.
TEST(ReportText, ProgramTextIsShownInert) {
  ReportInput in;
  in.label = "job 7";
  in.results.workload = "program";
  ProgramInfo p;
  p.command = {"python3", "train.py\x1b[2K\rok", "caf\xE9"};
  p.problems = {"restore fail\x1b[2K\rrestore pass"};
  in.results.program = p;
  SingleStage single;
  single.status = "ok";
  single.device = "cpu";
  in.results.single = single;
  const std::string html = RenderReportHtml(in);
  EXPECT_NE(html.find("restore fail\\x1b[2K\\rrestore pass"), std::string::npos);
  EXPECT_NE(html.find("caf\\xe9"), std::string::npos);
  EXPECT_EQ(html.find('\x1b'), std::string::npos);
  EXPECT_EQ(html.find('\r'), std::string::npos);
  EXPECT_TRUE(IsValidUtf8(html));
}

}  // namespace
}  // namespace pilot
