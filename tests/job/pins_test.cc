// job/pins.h: program pins (files, folders, the default script), hostile
// trees (links, FIFOs, limits), git's on-disk layout and index, the hub
// cache's layout, the summary compared between submit and job start.
#include "job/pins.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/base/crypto.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

class PinsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-pins-test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = fs::canonical(tmpl).string();
    work_ = dir_ + "/work";
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
  }
  std::vector<LockPin> Pin(std::vector<std::string> pins, job::PinLimits limits = {}) {
    job::PinRequest req;
    req.workdir = work_;
    req.pins = std::move(pins);
    return job::ComputePins(req, limits);
  }

  std::string dir_;
  std::string work_;
};

TEST_F(PinsTest, HashesAFileAndAFolder) {
  Write(work_ + "/train.py", "print('hi')\n");
  Write(work_ + "/configs/a.yaml", "a: 1\n");
  Write(work_ + "/configs/sub/b.yaml", "b: 2\n");
  Write(work_ + "/configs/__pycache__/x.pyc", "changes at every run");
  std::vector<LockPin> pins = Pin({"train.py", "configs/"});
  ASSERT_EQ(pins.size(), 2u);
  EXPECT_EQ(pins[0].kind, "file");
  EXPECT_EQ(pins[0].error, "");
  EXPECT_EQ(pins[0].sha256, Sha256Hex("print('hi')\n"));
  EXPECT_EQ(pins[0].files, 1);
  EXPECT_EQ(pins[0].path, work_ + "/train.py");
  EXPECT_EQ(pins[1].kind, "folder");
  EXPECT_EQ(pins[1].error, "");
  EXPECT_EQ(pins[1].files, 2);  // __pycache__ left out
  EXPECT_EQ(pins[1].sha256, Sha256Hex("a.yaml " + Sha256Hex("a: 1\n") + "\nsub/b.yaml " +
                                      Sha256Hex("b: 2\n") + "\n"));
  EXPECT_EQ(pins[0].commit, "");  // no work tree around
  EXPECT_EQ(pins[0].dirty, "");
}

TEST_F(PinsTest, DefaultsToTheCommandsScript) {
  Write(work_ + "/train.py", "x");
  job::PinRequest req;
  req.workdir = work_;
  req.command = {"python3", "train.py", "--steps", "4"};
  std::vector<LockPin> pins = job::ComputePins(req);
  ASSERT_EQ(pins.size(), 1u);
  EXPECT_EQ(pins[0].name, "train.py");
  req.command = {"python3", "-m", "trainer"};  // no script file: nothing pinned
  EXPECT_TRUE(job::ComputePins(req).empty());
}

TEST_F(PinsTest, RefusesLinksAndSpecialFilesWithoutFollowingOrBlocking) {
  Write(dir_ + "/secret", "SECRET");
  fs::create_symlink(dir_ + "/secret", work_ + "/train.py");
  std::vector<LockPin> pins = Pin({"train.py"});
  ASSERT_EQ(pins.size(), 1u);
  EXPECT_NE(pins[0].error.find("is a symbolic link (not followed"), std::string::npos)
      << pins[0].error;
  EXPECT_EQ(pins[0].sha256, "");

  // A link inside a pinned folder is recorded by its text, never followed:
  // the outside file may change without changing the pin.
  Write(work_ + "/cfg/a", "a");
  fs::create_symlink(dir_ + "/secret", work_ + "/cfg/link");
  pins = Pin({"cfg/"});
  ASSERT_EQ(pins[0].error, "");
  const std::string before = pins[0].sha256;
  Write(dir_ + "/secret", "OTHER");
  EXPECT_EQ(Pin({"cfg/"})[0].sha256, before);

  // A FIFO, as the pin or inside a folder: an error, never a hang.
  ASSERT_EQ(mkfifo((work_ + "/fifo").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((work_ + "/cfg/fifo").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  pins = Pin({"fifo", "cfg/"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(pins[0].error.find("FIFO"), std::string::npos) << pins[0].error;
  EXPECT_NE(pins[1].error.find("a FIFO (not pinned)"), std::string::npos) << pins[1].error;
}

TEST_F(PinsTest, NamesPathsOutsideTheWorkdirAndMissingFiles) {
  std::vector<LockPin> pins = Pin({"../x", "/etc/passwd", "nope.py"});
  ASSERT_EQ(pins.size(), 3u);
  EXPECT_NE(pins[0].error.find("leaves program.workdir"), std::string::npos) << pins[0].error;
  EXPECT_NE(pins[1].error.find("is absolute"), std::string::npos) << pins[1].error;
  EXPECT_NE(pins[2].error.find("nope.py: no such file"), std::string::npos) << pins[2].error;
}

TEST_F(PinsTest, BoundsFilesBytesAndDepth) {
  for (int i = 0; i < 5; ++i) Write(work_ + "/many/f" + std::to_string(i), "0123456789");
  job::PinLimits limits;
  limits.max_files = 3;
  EXPECT_NE(Pin({"many/"}, limits)[0].error.find("more than 3 entries in one folder"),
            std::string::npos);
  limits.max_files = 4;
  Write(work_ + "/two/a/f1", "1");
  Write(work_ + "/two/a/f2", "2");
  Write(work_ + "/two/b/f3", "3");
  Write(work_ + "/two/b/f4", "4");
  Write(work_ + "/two/b/f5", "5");
  EXPECT_NE(Pin({"two/"}, limits)[0].error.find("more than 4 files to pin"), std::string::npos);
  limits = {};
  limits.max_bytes = 25;
  EXPECT_NE(Pin({"many/"}, limits)[0].error.find("more than 25 bytes to pin"), std::string::npos);
  std::string deep = work_ + "/deep";
  for (int i = 0; i < 6; ++i) deep += "/d";
  Write(deep + "/f", "x");
  limits = {};
  limits.max_depth = 3;
  EXPECT_NE(Pin({"deep/"}, limits)[0].error.find("deeper than 3"), std::string::npos);
}

// A work tree made by the git program, when there is one.
class PinsGitTest : public PinsTest {
 protected:
  bool Git(const std::string& args) {
    const std::string cmd = "cd '" + work_ + "' && GIT_CONFIG_NOSYSTEM=1 HOME='" + dir_ +
                            "' git -c user.name=t -c user.email=t@t -c init.defaultBranch=main " +
                            args + " >/dev/null 2>&1";
    return std::system(cmd.c_str()) == 0;
  }
  std::string HeadOf() {
    std::ifstream in(work_ + "/.git/refs/heads/main");
    std::string s;
    in >> s;
    return s;
  }
};

TEST_F(PinsGitTest, ReadsHeadAndDirtinessFromTheLayout) {
  Write(work_ + "/train.py", "v1\n");
  Write(work_ + "/lib/m.py", "m\n");
  if (!Git("init -q") || !Git("add -A") || !Git("commit -q -m one")) GTEST_SKIP() << "no git";
  const std::string head = HeadOf();
  ASSERT_EQ(head.size(), 40u);
  std::vector<LockPin> pins = Pin({"train.py", "lib/"});
  EXPECT_EQ(pins[0].commit, head);
  EXPECT_EQ(pins[0].dirty, "no");
  EXPECT_EQ(pins[1].dirty, "no");

  Write(work_ + "/train.py", "v2\n");   // edited, not committed
  Write(work_ + "/lib/new.py", "n\n");  // untracked
  pins = Pin({"train.py", "lib/"});
  EXPECT_EQ(pins[0].dirty, "yes");
  EXPECT_EQ(pins[1].dirty, "yes");

  // The same commit from packed-refs, and a detached HEAD.
  ASSERT_TRUE(Git("pack-refs --all"));
  EXPECT_FALSE(fs::exists(work_ + "/.git/refs/heads/main"));
  EXPECT_EQ(Pin({"lib/"})[0].commit, head);
  Write(work_ + "/.git/HEAD", head + "\n");
  EXPECT_EQ(Pin({"lib/"})[0].commit, head);
}

TEST(GitIndexTest, RefusesBrokenIndexesWithoutCrashing) {
  EXPECT_FALSE(job::ParseGitIndex("").ok());
  EXPECT_FALSE(job::ParseGitIndex("DIRC").ok());
  std::string b("DIRC\0\0\0\2\0\0\0\5", 12);  // five entries promised, none there
  EXPECT_FALSE(job::ParseGitIndex(b).ok());
  std::string v9("DIRC\0\0\0\x09\0\0\0\0", 12);
  EXPECT_FALSE(job::ParseGitIndex(v9).ok());
  // One entry whose name has no NUL.
  std::string e = std::string("DIRC\0\0\0\2\0\0\0\1", 12) + std::string(62, '\0') + "abc";
  EXPECT_FALSE(job::ParseGitIndex(e).ok());
  // A well-formed one: "a", size 3.
  std::string ok = std::string("DIRC\0\0\0\2\0\0\0\1", 12);
  std::string entry(62, '\0');
  entry[39] = 3;       // size
  entry[40] = '\x12';  // sha1's first byte
  entry[61] = 1;       // name length
  entry += "a";
  entry.append(8 - (entry.size() % 8), '\0');
  ok += entry;
  Result<std::map<std::string, job::GitIndexEntry>> idx = job::ParseGitIndex(ok);
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  ASSERT_EQ(idx->count("a"), 1u);
  EXPECT_EQ(idx->at("a").size, 3u);
  EXPECT_EQ(idx->at("a").sha1.substr(0, 2), "12");
}

// Indexes git wrote (the fuzz harness's seeds): versions 2, 4 (paths
// prefix-compressed) and 3, each with a.py and lib/b.py.
TEST(GitIndexTest, ReadsTheIndexesGitWrites) {
  for (const char* seed : {"0.bin", "1.bin", "2.bin"}) {
    std::ifstream in(std::string(PILOT_SOURCE_DIR) + "/tests/fuzz/corpus/git_index/" + seed,
                     std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Result<std::map<std::string, job::GitIndexEntry>> idx = job::ParseGitIndex(bytes);
    ASSERT_TRUE(idx.ok()) << seed << ": " << idx.status().ToString();
    ASSERT_EQ(idx->size(), 2u) << seed;
    EXPECT_EQ(idx->at("a.py").size, 2u) << seed;
    EXPECT_EQ(idx->at("lib/b.py").sha1, "61780798228d17af2d34fce4cfbdf35556832472") << seed;
  }
}

class HubTest : public PinsTest {
 protected:
  void SetUp() override {
    PinsTest::SetUp();
    cache_ = dir_ + "/hub";
    repo_ = cache_ + "/models--org--tiny";
    Write(repo_ + "/refs/main", std::string(40, 'a'));
    Write(repo_ + "/blobs/b1", "{\"d\": 1}");
    Write(repo_ + "/blobs/b2", "weights");
    fs::create_directories(repo_ + "/snapshots/" + std::string(40, 'a') + "/sub");
    fs::create_symlink("../../blobs/b1", Snap('a') + "/config.json");
    fs::create_symlink("../../../blobs/b2", Snap('a') + "/sub/model.bin");
  }
  std::string Snap(char c) const { return repo_ + "/snapshots/" + std::string(40, c); }
  std::vector<LockPin> Hub(std::vector<std::string> models) {
    job::PinRequest req;
    req.workdir = work_;
    req.command = {"python3", "-m", "x"};
    req.hub_cache = cache_;
    req.hub_models = std::move(models);
    return job::ComputePins(req);
  }
  std::string cache_;
  std::string repo_;
};

TEST_F(HubTest, ResolvesARefToItsCommitAndHashesTheSnapshot) {
  std::vector<LockPin> pins = Hub({"org/tiny@main"});
  ASSERT_EQ(pins.size(), 1u);
  EXPECT_EQ(pins[0].kind, "hub_model");
  EXPECT_EQ(pins[0].error, "");
  EXPECT_EQ(pins[0].commit, std::string(40, 'a'));
  EXPECT_EQ(pins[0].files, 2);
  EXPECT_EQ(pins[0].sha256, Sha256Hex("config.json " + Sha256Hex("{\"d\": 1}") +
                                      "\nsub/model.bin " + Sha256Hex("weights") + "\n"));
  // The ref moved: another commit, named in the summary's comparison.
  fs::create_directories(Snap('b'));
  fs::create_symlink("../../blobs/b1", Snap('b') + "/config.json");
  const std::map<std::string, std::string> before = PinSummary(pins);
  Write(repo_ + "/refs/main", std::string(40, 'b'));
  const std::map<std::string, std::string> after = PinSummary(Hub({"org/tiny@main"}));
  std::vector<std::string> moved = MovedPins(before, after);
  ASSERT_FALSE(moved.empty());
  EXPECT_EQ(moved[0], "hub model org/tiny@main: bbbbbbbbbbbb..., at submit aaaaaaaaaaaa...")
      << moved[0];
}

TEST_F(HubTest, NeverFollowsALinkOutOfTheRepository) {
  Write(dir_ + "/secret", "SECRET");
  fs::create_symlink("../../../../secret", Snap('a') + "/escape");
  std::vector<LockPin> pins = Hub({"org/tiny"});
  EXPECT_NE(pins[0].error.find("outside " + repo_), std::string::npos) << pins[0].error;
  EXPECT_EQ(pins[0].sha256, "");
}

TEST_F(HubTest, NamesAMissingRevisionOrCache) {
  std::vector<LockPin> pins = Hub({"org/tiny@v2", "org/absent"});
  EXPECT_NE(pins[0].error.find("org/tiny@v2: not in the hub cache"), std::string::npos)
      << pins[0].error;
  EXPECT_NE(pins[1].error.find("org/absent: not in the hub cache"), std::string::npos);
  job::PinRequest req;
  req.workdir = work_;
  req.hub_datasets = {"org/data"};
  pins = job::ComputePins(req);
  EXPECT_NE(pins[0].error.find("no hub cache folder"), std::string::npos);
  EXPECT_EQ(job::HubRepoFolder("hub_dataset", "org/data"), "datasets--org--data");
}

TEST(PinSummaryTest, NamesWhatMovedInOneSentenceEach) {
  LockPin p;
  p.kind = "file";
  p.name = "train.py";
  p.sha256 = std::string(64, 'c');
  p.commit = std::string(40, '1');
  p.dirty = "no";
  std::map<std::string, std::string> submit = PinSummary({p});
  p.sha256 = std::string(64, 'd');
  std::vector<std::string> moved = MovedPins(submit, PinSummary({p}));
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0], "train.py: sha256 dddddddddddd..., at submit sha256 cccccccccccc...");
  EXPECT_TRUE(MovedPins(submit, submit).empty());
  // A new commit of the work tree, the file unchanged, moves the pin too.
  p.sha256 = std::string(64, 'c');
  p.commit = std::string(40, '2');
  moved = MovedPins(submit, PinSummary({p}));
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0], "train.py (git HEAD): 222222222222..., at submit 111111111111...");
  // Through the JSON the plugin records.
  Result<std::map<std::string, std::string>> back = job::ParseSummary(job::SummaryToJson(submit));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, submit);
  EXPECT_FALSE(job::ParseSummary("[1]").ok());
}

TEST(PinRequestTest, TravelsAsJsonAndFindsTheCache) {
  job::PinRequest req;
  req.workdir = "/w";
  req.pins = {"a.py"};
  req.hub_cache = "/c";
  req.hub_models = {"o/m@v1"};
  Result<job::PinRequest> back = job::ParsePinRequest(job::PinRequestToJson(req));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->pins, req.pins);
  EXPECT_EQ(back->hub_models, req.hub_models);
  EXPECT_FALSE(job::ParsePinRequest("{}").ok());

  auto env = [](std::map<std::string, std::string> m) {
    return [m](const std::string& k) -> std::optional<std::string> {
      auto it = m.find(k);
      if (it == m.end()) return std::nullopt;
      return it->second;
    };
  };
  EXPECT_EQ(job::HubCacheFolder(env({{"HF_HUB_CACHE", "/x"}, {"HF_HOME", "/y"}}), "/h"), "/x");
  EXPECT_EQ(job::HubCacheFolder(env({{"HF_HOME", "/y"}}), "/h"), "/y/hub");
  EXPECT_EQ(job::HubCacheFolder(env({}), "/h"), "/h/.cache/huggingface/hub");

  LockPin p;
  p.kind = "hub_dataset";
  p.name = "o/d";
  Result<std::vector<LockPin>> pins = ParseLockPins(LockPinsToJson({p}), "t");
  ASSERT_TRUE(pins.ok()) << pins.status().ToString();
  EXPECT_EQ((*pins)[0].kind, "hub_dataset");
}

}  // namespace
}  // namespace pilot
