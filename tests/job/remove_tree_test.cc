// Removing a user's work folder: everything in it, links removed but never
// followed, another file system inside left alone, nothing above touched.
#include "job/remove_tree.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/job/tiny_fs.h"

namespace pilot::job {
namespace {

namespace fs = std::filesystem;

class RemoveTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pilot-remove-tree-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(Work() + "/a/b/c");
    std::ofstream(Work() + "/a/b/c/ckpt.bin") << "weights";
    std::ofstream(Work() + "/metrics.jsonl") << "{}";
    fs::create_directories(dir_ + "/outside");
    std::ofstream(dir_ + "/outside/precious") << "root's";
    fs::create_symlink(dir_ + "/outside/precious", Work() + "/a/link-to-file");
    fs::create_directory_symlink(dir_ + "/outside", Work() + "/a/b/link-to-dir");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string Work() const { return dir_ + "/work"; }
  std::string dir_;
};

TEST_F(RemoveTreeTest, RemovesEverythingAndFollowsNoLink) {
  Result<RemovedTree> r = RemoveTree(Work());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->left, "");
  EXPECT_FALSE(fs::exists(fs::symlink_status(Work())));
  EXPECT_EQ(r->entries, 8);  // a b c ckpt.bin metrics two links work
  EXPECT_TRUE(fs::exists(dir_ + "/outside/precious"));
}

TEST_F(RemoveTreeTest, AMissingFolderIsNoError) {
  fs::remove_all(Work());
  Result<RemovedTree> r = RemoveTree(Work());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->entries, 0);
  EXPECT_TRUE(RemoveTree(dir_ + "/no/such/parent").ok());
}

TEST_F(RemoveTreeTest, AWorkFolderSwappedForALinkIsNotFollowed) {
  fs::remove_all(Work());
  fs::create_directory_symlink(dir_ + "/outside", Work());
  Result<RemovedTree> r = RemoveTree(Work());
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(fs::exists(dir_ + "/outside/precious"));
}

TEST_F(RemoveTreeTest, AnotherFileSystemInsideIsLeftAlone) {
  testutil::TinyFs mounted;
  // Mount on a folder inside the work folder.
  const std::string why = mounted.Mount(64);
  if (!why.empty()) GTEST_SKIP() << why;
  std::ofstream(mounted.dir() + "/theirs") << "x";
  fs::create_directories(Work() + "/mnt");
  ASSERT_EQ(::mount(mounted.dir().c_str(), (Work() + "/mnt").c_str(), nullptr, MS_BIND, nullptr),
            0);
  Result<RemovedTree> r = RemoveTree(Work());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->left.find("another file system"), std::string::npos) << r->left;
  EXPECT_TRUE(fs::exists(Work() + "/mnt/theirs"));
  EXPECT_FALSE(fs::exists(Work() + "/a"));
  ::umount2((Work() + "/mnt").c_str(), MNT_DETACH);
}

TEST_F(RemoveTreeTest, AFileSystemMountedOnTheFolderItselfIsLeftAlone) {
  testutil::TinyFs mounted;
  const std::string why = mounted.Mount(64);
  if (!why.empty()) GTEST_SKIP() << why;
  std::ofstream(mounted.dir() + "/theirs") << "x";
  ASSERT_EQ(::mount(mounted.dir().c_str(), Work().c_str(), nullptr, MS_BIND, nullptr), 0);
  Result<RemovedTree> r = RemoveTree(Work());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->left.find("another file system"), std::string::npos) << r->left;
  EXPECT_TRUE(fs::exists(Work() + "/theirs"));
  ::umount2(Work().c_str(), MNT_DETACH);
  EXPECT_TRUE(fs::exists(Work() + "/a/b/c/ckpt.bin"));
}

TEST(RemoveTree, RefusesANameThatIsNotOne) {
  EXPECT_FALSE(RemoveTreeBeneath("/tmp", "..").ok());
  EXPECT_FALSE(RemoveTreeBeneath("/tmp", "a/b").ok());
  EXPECT_FALSE(RemoveTreeBeneath("/tmp", "").ok());
}

}  // namespace
}  // namespace pilot::job
