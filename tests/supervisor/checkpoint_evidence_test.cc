// What root establishes about a program's checkpoint, without the program:
// the listing pilot-runner verify makes as the user read with the report's
// strict reader (a stand-in runner prints a report here), step K's files
// told from the reference's later saves by their ctime, a listing that is
// not a report refused, and which listed files the resumed phase opened.
#include "supervisor/program/checkpoint_evidence.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/records/verify_report.h"

namespace pilot::supervisor {
namespace {

class CheckpointEvidenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-evidence-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ckpt_ = dir_ + "/ckpt";
    std::filesystem::create_directory(ckpt_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A runner that prints `out` for `verify --program-checkpoint DIR --json`.
  std::string Runner(const std::string& out) {
    std::ofstream(dir_ + "/report.json") << out;
    const std::string path = dir_ + "/runner";
    std::ofstream(path) << "#!/bin/sh\ncat " << dir_ << "/report.json\n";
    chmod(path.c_str(), 0755);
    return path;
  }
  static std::string Report(const std::vector<ProgramFile>& files) {
    VerifyReport v;
    v.mode = "program";
    v.ran = true;
    v.files = files;
    return VerifyReportToJson(v);
  }
  ListCheckpointInput Input(const std::string& runner) {
    ListCheckpointInput in;
    in.dir = ckpt_;
    in.at_step = 4;
    in.runner = runner;
    in.timeout_seconds = 30;
    in.list_file = dir_ + "/checkpoint-files-single.json";
    return in;
  }
  static ProgramFile File(const std::string& path, int64_t size, const std::string& format = "torch") {
    ProgramFile f;
    f.path = path;
    f.size = size;
    f.format = format;
    return f;
  }

  std::string dir_, ckpt_;
};

TEST_F(CheckpointEvidenceTest, ListsStepKsFilesAndKeepsTheListing) {
  std::ofstream(ckpt_ + "/model.pt") << "x";
  const std::string report = Report({File("model.pt", 10), File("link", 0, "symlink")});
  Result<CheckpointListing> l = ListCheckpoint(Input(Runner(report)));
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->files, 2);
  EXPECT_EQ(l->bytes, 10);
  ASSERT_EQ(l->at_step.size(), 1u);  // a link is listed, never watched
  EXPECT_EQ(l->at_step[0].first, ckpt_ + "/model.pt");
  EXPECT_EQ(l->saves.at_step_files, 1);
  EXPECT_FALSE(l->saves.rewritten);
  std::ifstream kept(dir_ + "/checkpoint-files-single.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), report);
}

TEST_F(CheckpointEvidenceTest, FilesChangedAfterStepKAreLaterSaves) {
  std::ofstream(ckpt_ + "/step4.pt") << "x";
  const double before = static_cast<double>(time(nullptr)) - 100;
  ListCheckpointInput in = Input(Runner(Report({File("step4.pt", 5)})));
  in.saved_by = before;  // saved "before" the file's ctime: a later save
  Result<CheckpointListing> l = ListCheckpoint(in);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  // Every file later: the reference rewrote them, and all are counted.
  EXPECT_TRUE(l->saves.rewritten);
  EXPECT_EQ(l->saves.later_files, 1);
  EXPECT_EQ(l->saves.later_example, "step4.pt");
  EXPECT_EQ(l->at_step.size(), 1u);
  in.saved_by = static_cast<double>(time(nullptr)) + 100;
  l = ListCheckpoint(in);
  ASSERT_TRUE(l.ok());
  EXPECT_FALSE(l->saves.rewritten);
  EXPECT_EQ(l->saves.later_files, 0);
}

TEST_F(CheckpointEvidenceTest, AMissingFolderAnEmptyOneAndANonReport) {
  ListCheckpointInput in = Input(Runner(Report({})));
  Result<CheckpointListing> empty = ListCheckpoint(in);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->files, 0);
  EXPECT_NE(EmptyCheckpoint(ckpt_).find("is empty after the reference process"), std::string::npos);
  in.dir = dir_ + "/nowhere";
  Result<CheckpointListing> missing = ListCheckpoint(in);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().detail().find("does not exist after the reference process (PILOT_CHECKPOINT_STEP = 4)"),
            std::string::npos);
  // A listing that is not verify's strict report (a key twice, another
  // mode) is no listing.
  in = Input(Runner("{\"schema\": \"slurm-pilot/verify/1\", \"schema\": \"x\"}"));
  EXPECT_FALSE(ListCheckpoint(in).ok());
  in = Input(Runner(VerifyReportToJson(VerifyReport{})));
  Result<CheckpointListing> builtin = ListCheckpoint(in);
  ASSERT_FALSE(builtin.ok());
  EXPECT_NE(builtin.status().detail().find("could not be listed"), std::string::npos);
}

TEST(CheckpointReadOf, CountsTheListedFilesTheResumedPhaseOpened) {
  GroupResult resumed;
  resumed.watch.opened = {true, false, true};
  resumed.watch.read_measured = true;
  // Read-ahead past a file's end counts as the file, no more.
  resumed.watch.read = {10, 0, 4096};
  resumed.watch.first_record_seconds = 2.5;
  const CheckpointRead r = CheckpointReadOf({{"/c/a", 10}, {"/c/b", 20}, {"/c/c", 30}}, resumed);
  EXPECT_TRUE(r.watched);
  EXPECT_EQ(r.files, 3);
  EXPECT_EQ(r.bytes, 60);
  EXPECT_EQ(r.opened_files, 2);
  EXPECT_EQ(r.opened_bytes, 40);
  EXPECT_TRUE(r.read_measured);
  EXPECT_EQ(r.read_files, 2);
  EXPECT_EQ(r.read_bytes, 40);
  EXPECT_DOUBLE_EQ(r.first_record_seconds, 2.5);
  resumed.watch.problem = "fanotify: Operation not permitted";
  EXPECT_FALSE(CheckpointReadOf({{"/c/a", 10}}, resumed).watched);
}

TEST(SavedBy, TheLatestRanksFirstRecordPastK) {
  GroupResult g;
  g.started_unix = 1000;
  auto rec = [](int rank, int64_t step, double arrived) {
    MetricRecord r;
    r.rank = rank;
    r.step = step;
    r.arrived = arrived;
    return r;
  };
  g.records = {rec(0, 4, 1), rec(1, 4, 1.5), rec(0, 5, 2), rec(1, 5, 3), rec(0, 6, 4)};
  EXPECT_DOUBLE_EQ(*SavedBy(g, 4), 1003);
  EXPECT_FALSE(SavedBy(g, 6).has_value());
}

}  // namespace
}  // namespace pilot::supervisor
