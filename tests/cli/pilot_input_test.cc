// `pilot report` and `pilot plan` on a job whose work folder holds links:
// what the links point at stays out of the output, and the refusal is said.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "job/job_user_file.h"
#include "job/state_layout.h"

namespace {

namespace fs = std::filesystem;

constexpr char kSecret[] = "SECRET-ROOT-ONLY-7f3a";

struct RanPilotInput {
  int rc = -1;
  std::string out;  // standard output
  std::string err;  // standard error
};

std::string SlurpPilotInput(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void WritePilotInput(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << text;
  chmod(path.c_str(), mode);
}

// `text` with every `from` replaced by `to`.
std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

class PilotInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-input-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    job_ = dir_ + "/state/jobs/12";
    work_ = job_ + "/work";
    fs::create_directories(work_);
    fs::create_directories(dir_ + "/state/verdicts");
    WritePilotInput(dir_ + "/pilot.conf", "state_dir = \"" + dir_ + "/state\"\nhardware_catalog = \"" +
                                    PILOT_SOURCE_DIR + "/etc/hardware.toml\"\n");
    const std::string src = PILOT_SOURCE_DIR;
    fs::copy_file(src + "/configs/tiny-cpu.toml", dir_ + "/state/jobs/12/config.toml");
    results_ = SlurpPilotInput(src + "/tests/report/fixtures/results.json");
    metrics_ = SlurpPilotInput(src + "/tests/report/fixtures/metrics.jsonl");
    ASSERT_NE(results_.find("\"AMD EPYC\""), std::string::npos);
    ASSERT_NE(metrics_.find("\"reference\""), std::string::npos);
    // A file only root may read, in forms the report would show: a
    // results.json whose device name is the secret, metrics whose process
    // name is.
    WritePilotInput(dir_ + "/secret-results.json",
          Replace(results_, "\"AMD EPYC\"", std::string("\"") + kSecret + "\""), 0600);
    WritePilotInput(dir_ + "/secret-metrics.jsonl",
          Replace(metrics_, "\"reference\"", std::string("\"") + kSecret + "\""), 0600);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `prefix` runs it as someone else ("setpriv --reuid=... -- ").
  RanPilotInput Pilot(const std::string& args, const std::string& prefix = "") {
    RanPilotInput r;
    const std::string out = dir_ + "/out", err = dir_ + "/err";
    const std::string cmd = prefix + PILOT_BINARY + " " + args + " --policy " + dir_ +
                            "/pilot.conf >" + out + " 2>" + err + " </dev/null";
    const int st = std::system(cmd.c_str());
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = SlurpPilotInput(out);
    r.err = SlurpPilotInput(err);
    return r;
  }

  std::string dir_;
  std::string job_;   // the job's folder: the supervisor's results.json
  std::string work_;  // the user's: metrics
  std::string results_;
  std::string metrics_;
};

TEST_F(PilotInputTest, ReportOfAJobReadsItsFiles) {
  WritePilotInput(job_ + "/results.json", results_);
  // The workload's own results.json in work/ is never the job's results.
  WritePilotInput(work_ + "/results.json", Replace(results_, "\"AMD EPYC\"", "\"forged\""));
  WritePilotInput(work_ + "/metrics.jsonl", metrics_);
  RanPilotInput r = Pilot("report 12 -o -");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("AMD EPYC"), std::string::npos);
  EXPECT_EQ(r.out.find("forged"), std::string::npos);
  EXPECT_NE(r.out.find("id=\"loss-steps\""), std::string::npos);
  EXPECT_EQ(r.err, "");
}

// A job's results.json and config copy are readable by root and the job's
// user only (job/job_user_file.h): the job's user reads the report through
// the ACL, another user's `pilot report` is refused by the system, and the
// message says why and where the public verdict is.
TEST_F(PilotInputTest, OnlyTheJobsUserReadsItsReport) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root: runs pilot as other users";
  const std::string as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups -- ";
  const std::string as_other = "setpriv --reuid=65533 --regid=65533 --clear-groups -- ";
  if (std::system((as_user + PILOT_BINARY + " --version >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "uid 65534 cannot run " << PILOT_BINARY;
  }
  fs::permissions(dir_, fs::perms(0755));  // the state directory's folders are 0755
  // The catalog where the other users can read it (a checkout may be private).
  fs::copy_file(std::string(PILOT_SOURCE_DIR) + "/etc/hardware.toml", dir_ + "/hardware.toml",
                fs::copy_options::overwrite_existing);
  fs::permissions(dir_ + "/hardware.toml", fs::perms(0644));
  WritePilotInput(dir_ + "/pilot.conf", "state_dir = \"" + dir_ + "/state\"\nhardware_catalog = \"" + dir_ +
                                  "/hardware.toml\"\n");
  ASSERT_TRUE(pilot::job::WriteJobUserFile(pilot::job::StateLayout(dir_ + "/state"),
                                           job_ + "/results.json", results_, 65534, 65534,
                                           nullptr)
                  .ok());
  RanPilotInput mine = Pilot("report 12 -o -", as_user);
  EXPECT_EQ(mine.rc, 0) << mine.err;
  EXPECT_NE(mine.out.find("AMD EPYC"), std::string::npos);
  RanPilotInput r = Pilot("report 12 -o -", as_other);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(r.out.find("AMD EPYC"), std::string::npos);
  EXPECT_NE(r.err.find("pilot: " + job_ + "/results.json: Permission denied\n"
                       "HINT: a job's results.json and config copy are readable by root and the "
                       "job's user only (pilot-files(5)); anyone can read its verdict: pilot "
                       "verdict 12"),
            std::string::npos)
      << r.err;
}

TEST_F(PilotInputTest, ReportRefusesLinkedResultsAndMetrics) {
  fs::create_symlink(dir_ + "/secret-results.json", job_ + "/results.json");
  fs::create_symlink(dir_ + "/secret-metrics.jsonl", work_ + "/metrics.jsonl");
  RanPilotInput r = Pilot("report 12 -o -");
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_EQ(r.out.find(kSecret), std::string::npos);
  EXPECT_EQ(r.err.find(kSecret), std::string::npos);
  EXPECT_NE(r.err.find("pilot: " + job_ +
                       "/results.json: is a symbolic link (not followed: the job's folder "
                       "belongs to its user)"),
            std::string::npos)
      << r.err;
  RanPilotInput p = Pilot("plan 12");
  EXPECT_EQ(p.rc, 1) << p.err;
  EXPECT_EQ(p.out.find(kSecret), std::string::npos);
  EXPECT_NE(p.err.find(job_ + "/results.json: is a symbolic link"), std::string::npos) << p.err;
}

TEST_F(PilotInputTest, ReportLeavesOutLinkedMetrics) {
  WritePilotInput(job_ + "/results.json", results_);
  fs::create_symlink(dir_ + "/secret-metrics.jsonl", work_ + "/metrics.jsonl");
  RanPilotInput r = Pilot("report 12 -o " + dir_ + "/r.html");
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string html = SlurpPilotInput(dir_ + "/r.html");
  EXPECT_EQ(html.find(kSecret), std::string::npos);
  EXPECT_EQ(r.err, "pilot: report: " + work_ +
                       "/metrics.jsonl: is a symbolic link (not followed: the job's folder "
                       "belongs to its user) (per-step plots left out)\n");
}

// With work_root the job's metrics lie there, and root reads them there
// the same way: through the layout, no link followed.
TEST_F(PilotInputTest, UnderAWorkRootTheMetricsAreReadThereWithoutLinks) {
  const std::string work_root = dir_ + "/scratch";
  fs::create_directories(work_root + "/12");
  WritePilotInput(dir_ + "/pilot.conf", "state_dir = \"" + dir_ + "/state\"\nwork_root = \"" + work_root +
                                  "\"\nhardware_catalog = \"" + PILOT_SOURCE_DIR +
                                  "/etc/hardware.toml\"\n");
  WritePilotInput(job_ + "/results.json", results_);
  WritePilotInput(work_ + "/metrics.jsonl", "not read: the old place");
  fs::create_symlink(dir_ + "/secret-metrics.jsonl", work_root + "/12/metrics.jsonl");
  RanPilotInput r = Pilot("report 12 -o " + dir_ + "/r.html");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(SlurpPilotInput(dir_ + "/r.html").find(kSecret), std::string::npos);
  EXPECT_EQ(r.err, "pilot: report: " + work_root +
                       "/12/metrics.jsonl: is a symbolic link (not followed: the job's folder "
                       "belongs to its user) (per-step plots left out)\n");
}

TEST_F(PilotInputTest, ReportRefusesALinkedWorkFolderAndAFifo) {
  WritePilotInput(job_ + "/results.json", results_);
  fs::remove_all(work_);
  fs::create_directories(dir_ + "/elsewhere");
  fs::copy_file(dir_ + "/secret-metrics.jsonl", dir_ + "/elsewhere/metrics.jsonl");
  fs::create_directory_symlink(dir_ + "/elsewhere", work_);
  RanPilotInput r = Pilot("report 12 -o -");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find(kSecret), std::string::npos);
  EXPECT_NE(r.err.find(work_ + ": is a symbolic link"), std::string::npos) << r.err;
  fs::remove(job_ + "/results.json");
  ASSERT_EQ(mkfifo((job_ + "/results.json").c_str(), 0644), 0);
  r = Pilot("report 12 -o -");  // returns rather than waiting for a writer
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(job_ + "/results.json: not a regular file (a FIFO)"), std::string::npos)
      << r.err;
}

// Root naming a results.json inside the state directory's jobs folder gets
// the same refusals; its config is the job's copy, not the config_path the
// user wrote into the results.
TEST_F(PilotInputTest, RootReadingAPathInsideTheJobsFolderFollowsNoLinks) {
  if (geteuid() != 0) GTEST_SKIP() << "the path rule is root's";
  fs::create_symlink(dir_ + "/secret-results.json", work_ + "/results.json");
  RanPilotInput r = Pilot("report -o - " + work_ + "/results.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out.find(kSecret), std::string::npos);
  EXPECT_NE(r.err.find(work_ + "/results.json: is a symbolic link"), std::string::npos) << r.err;
  // Written as a path with "." and "..": the same file, the same refusal.
  r = Pilot("plan " + dir_ + "/state/./jobs/12/work/../work/results.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("is a symbolic link"), std::string::npos) << r.err;
  // --calibrate names a second results.json: read the same way.
  fs::remove(work_ + "/results.json");
  WritePilotInput(work_ + "/results.json", results_);
  fs::create_symlink(dir_ + "/secret-results.json", work_ + "/cal.json");
  r = Pilot("plan --calibrate " + work_ + "/cal.json " + work_ + "/results.json");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(work_ + "/cal.json: is a symbolic link"), std::string::npos) << r.err;
  // A results.json whose config_path names a root-only file: root reads the
  // job's config.toml instead (the plan works and shows nothing of it).
  WritePilotInput(dir_ + "/root-only.toml", std::string("[run]\nname = \"") + kSecret + "\"\n", 0600);
  WritePilotInput(work_ + "/results.json",
        Replace(results_, "\"configs/tiny-cpu.toml\"", "\"" + dir_ + "/root-only.toml\""));
  r = Pilot("plan " + work_ + "/results.json");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.find(kSecret), std::string::npos);
  EXPECT_EQ(r.err.find(kSecret), std::string::npos);
}

// Outside the state directory a path is read as before: a link there is the
// caller's own business.
TEST_F(PilotInputTest, APathOutsideTheStateDirectoryIsReadAsGiven) {
  WritePilotInput(dir_ + "/mine.json", results_);
  fs::create_symlink(dir_ + "/mine.json", dir_ + "/link.json");
  RanPilotInput r = Pilot("report -o - " + dir_ + "/link.json");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("AMD EPYC"), std::string::npos);
}

}  // namespace
