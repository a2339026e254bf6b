// A phase of a user's program run by RunGroup inside an image under the
// node's real podman (supervisor/program/container.h): the image is built
// here from the node's busybox (podman import, no registry), run by its
// digest, its stdout read as records, the job's user applied inside, and
// the digest read back. Skipped without root, podman or busybox.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "job/subprocess.h"
#include "supervisor/cgroup.h"
#include "supervisor/program/container.h"
#include "supervisor/program/group.h"

namespace pilot::supervisor {
namespace {

namespace fs = std::filesystem;

std::string Sh(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  job::CommandSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.timeout_seconds = 120;
  Result<job::CommandResult> r = job::RunCommand(spec);
  if (!r.ok() || !r->Succeeded()) {
    ADD_FAILURE() << argv[0] << " " << argv[1] << ": "
                  << (r.ok() ? r->Describe(120) + " " + r->err : r.status().ToString());
    return "";
  }
  std::string out = r->out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(ProgramPodman, APhaseRunsInThePinnedImageAsTheJobsUser) {
  if (geteuid() != 0 || !fs::exists("/usr/bin/podman") || !fs::exists("/bin/busybox")) {
    GTEST_SKIP() << "needs root, /usr/bin/podman and /bin/busybox (scripts/setup)";
  }
  char tmpl[] = "/tmp/pilot-podman-test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  const fs::path root = dir / "rootfs", work = dir / "work", store = dir / "store";
  fs::create_directories(root / "bin");
  fs::create_directories(root / "etc");
  fs::create_directories(work);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
  fs::permissions(work, fs::perms::all);
  fs::copy_file("/bin/busybox", root / "bin/busybox");
  fs::create_symlink("busybox", root / "bin/sh");
  std::ofstream(root / "etc/pilot-image") << "inside-the-image\n";
  // The node's limits and cgroup layout as spank_pilot(8) says.
  const std::string conf = (dir / "containers.conf").string();
  std::ofstream(conf) << "[containers]\ndefault_ulimits = []\n"
                      << (fs::exists("/usr/sbin/runc") ? "[engine]\nruntime = \"runc\"\n" : "");
  const std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
                                        "CONTAINERS_CONF=" + conf};
  Sh({"/usr/bin/tar", "-C", root.string(), "-cf", (dir / "rootfs.tar").string(), "."}, env);
  Sh({"/usr/bin/podman", "--root", store.string(), "import", (dir / "rootfs.tar").string(),
      "localhost/pilot-test/bb:v1"},
     env);
  const std::string digest = Sh({"/usr/bin/podman", "--root", store.string(), "image", "inspect",
                                 "--format", "{{.Digest}}", "localhost/pilot-test/bb:v1"},
                                env);
  ASSERT_EQ(digest.rfind("sha256:", 0), 0u) << digest;

  ContainerPolicy site;
  site.image_cache = store.string();
  site.containers_conf = conf;
  ContainerSetup setup;
  setup.runtime = "podman";
  setup.image = "localhost/pilot-test/bb@" + digest;
  setup.site = &site;
  setup.run_as = job::RunAs{65534, 65534, "nobody"};
  setup.workdir = work.string();
  setup.mounts = {{work.string(), work.string(), false}};
  RankLaunch r;
  r.argv = {"/bin/sh", "-c",
            "busybox cat /etc/pilot-image >&2; busybox id -u >&2; echo \"$SECRET\" > out; "
            "busybox cat /proc/self/cgroup > cgroup; "
            "for i in 1 2 3; do echo \"iter $i: loss=$i.5\"; done"};
  r.env = {"SECRET=a,b\nc", "PATH=/node/only", "LD_PRELOAD=/node/only.so"};
  ASSERT_TRUE(WrapInContainer(setup, "", &r).ok());

  GroupSpec spec;
  spec.ranks = {r};
  spec.cwd = work.string();
  spec.loss_pattern.emplace("loss=([0-9.]+)");
  spec.first_step = 1;
  spec.last_step = 3;
  spec.expected_ranks = 1;
  spec.step_timeout_seconds = 120;
  spec.forward_stdout = -1;
  spec.forward_stderr = -1;
  GroupResult g = RunGroup(spec);
  ASSERT_EQ(g.ranks.size(), 1u);
  EXPECT_EQ(g.ranks[0].exit_code, 0) << g.ranks[0].stderr_tail;
  EXPECT_EQ(g.records.size(), 3u) << g.ranks[0].stderr_tail;
  EXPECT_NE(g.ranks[0].stderr_tail.find("inside-the-image"), std::string::npos)
      << g.ranks[0].stderr_tail;
  EXPECT_NE(g.ranks[0].stderr_tail.find("65534"), std::string::npos) << g.ranks[0].stderr_tail;
  std::string secret;
  std::getline(std::ifstream(work / "out"), secret, '\0');
  EXPECT_EQ(secret, "a,b\nc\n");
  // The container's group is made under this process's (the job's), never
  // under podman's own parent outside it.
  std::ifstream cgroup(work / "cgroup");
  const std::string inside((std::istreambuf_iterator<char>(cgroup)), std::istreambuf_iterator<char>());
  const std::string parent = ContainerCgroupParent();
  if (!parent.empty()) {
    EXPECT_NE(inside.find(parent + "/libpod-"), std::string::npos) << parent << "\n" << inside;
  }
  EXPECT_EQ(inside.find("libpod_parent"), std::string::npos) << inside;

  const ProgramContainer back = ReadBackContainer(setup, {});
  EXPECT_EQ(back.digest, digest) << back.problem;
  EXPECT_EQ(back.digest_source, "runtime");
  EXPECT_FALSE(back.image_id.empty());

  Sh({"/usr/bin/podman", "--root", store.string(), "rmi", "-af"}, env);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace pilot::supervisor
