// `pilot doctor` on a node made of real files in a temporary folder: a
// slurm.conf with an Include, a plugstack that includes the plugin's line
// from a folder, a prolog wrapper script, root's keys made by `pilot
// keygen`; then one piece changed at a time (the key's mode, PrologFlags,
// the plugstack line, a plugin argument), each named with its fix.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/json_util.h"
#include "tests/core/net_test_util.h"
#include "tests/cli/run_pilot.h"

namespace pilot {
namespace {

namespace fs = std::filesystem;

struct DoctorRan {
  int rc = -1;
  std::string out;
  Json report;  // parsed --json output
};

void PutFile(const std::string& path, const std::string& text, mode_t mode) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
}

class DoctorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the node's files must be root's: run as root";
    ASSERT_FALSE(tmp_.path().empty());
    chmod(tmp_.path().c_str(), 0755);
    PutFile(D("etc/slurm.conf"),
            "# a node's slurm.conf\n"
            "SlurmctldHost=controller-elsewhere(10.0.0.1)\n"
            "PlugStackConfig=plugstack.conf   # beside slurm.conf\n"
            "Include hooks.conf\n",
            0644);
    PutFile(D("etc/hooks.conf"),
            "PrologFlags=Alloc\nProlog=" + D("bin/prolog.sh") + "\nEpilog=" + D("bin/pilot-epilog") + "\n",
            0644);
    PutFile(D("etc/plugstack.conf"), "# the stock file\ninclude plugstack.conf.d/*.conf\n", 0644);
    PutFile(D("etc/plugstack.conf.d/pilot.conf"), PluginLine(), 0644);
    PutFile(D("lib/spank_pilot.so"), "", 0755);
    PutFile(D("lib/spank_pilot_impl.so"), "", 0755);
    for (const char* p : {"pilot-prolog", "pilot-epilog", "pilot-runner", "pilot-supervisor"}) {
      PutFile(D(std::string("bin/") + p), "#!/bin/sh\nexit 0\n", 0755);
    }
    PutFile(D("bin/prolog.sh"),
            "#!/bin/sh\n# the site's wrapper\nexec " + D("bin/pilot-prolog") + " --policy " +
                D("etc/pilot.conf") + "\n",
            0755);
    fs::create_directories(D("state"));
    chmod(D("state").c_str(), 0755);
    PutFile(D("etc/pilot.conf"),
            "state_dir = \"" + D("state") + "\"\nkey_file = \"" + D("keys/verdict.key") +
                "\"\nsigning_key_file = \"" + D("keys/ed25519.key") + "\"\npublic_key_file = \"" +
                D("keys/ed25519.pub") + "\"\nrequire_ptrace_scope = false\nstate_floor_mb = 1\n",
            0644);
    DoctorRan keygen = Run("keygen --policy " + D("etc/pilot.conf"), false);
    ASSERT_EQ(keygen.rc, 0) << keygen.out;
  }
  std::string D(const std::string& rel) const { return tmp_ / rel; }
  std::string PluginLine(const std::string& extra = "") const {
    return "# slurm-pilot\nrequired " + D("lib/spank_pilot.so") + " policy=" + D("etc/pilot.conf") +
           " runner=" + D("bin/pilot-runner") + " supervisor=" + D("bin/pilot-supervisor") + extra +
           "\n";
  }

  // pilot ARGS, without $PILOT_POLICY (the plugin's policy= is the one).
  DoctorRan Run(const std::string& args, bool json = true) const {
    const testutil::Ran ran = testutil::RunPilot(args, "env -u PILOT_POLICY ");
    DoctorRan r;
    r.rc = ran.rc;
    r.out = ran.output;
    if (json) {
      Result<Json> j = ParseJsonText(r.out, "pilot doctor --json");
      if (j.ok()) r.report = *j;
    }
    return r;
  }
  DoctorRan Doctor() const { return Run("doctor --json --slurm-conf " + D("etc/slurm.conf")); }

  static Json ItemOf(const DoctorRan& r, const std::string& name) {
    if (!r.report.contains("items")) return Json();
    for (const Json& i : r.report["items"]) {
      if (i["name"] == name) return i;
    }
    return Json();
  }
  static std::string StatusOf(const DoctorRan& r, const std::string& name) {
    const Json i = ItemOf(r, name);
    return i.is_object() ? i["status"].get<std::string>() : "(no item)";
  }
  static std::string DetailOf(const DoctorRan& r, const std::string& name) {
    const Json i = ItemOf(r, name);
    return i.is_object() ? i["detail"].get<std::string>() + " | fix: " + i["fix"].get<std::string>() : "";
  }

  testutil::TempDir tmp_;
};

TEST_F(DoctorTest, ANodeWiredAsTheDocsSayHolds) {
  DoctorRan r = Doctor();
  ASSERT_TRUE(r.report.is_object()) << r.out;
  EXPECT_EQ(r.report["schema"], "slurm-pilot/doctor/1");
  EXPECT_EQ(r.report["policy"], D("etc/pilot.conf"));  // the plugin's policy=
  for (const char* item : {"policy", "slurm.conf", "plugstack", "programs", "prolog", "epilog",
                           "job_submit", "state", "key"}) {
    EXPECT_EQ(StatusOf(r, item), "holds") << item << ": " << DetailOf(r, item);
  }
  EXPECT_NE(DetailOf(r, "plugstack").find(D("etc/plugstack.conf.d/pilot.conf") + ":2: required"),
            std::string::npos)
      << DetailOf(r, "plugstack");
  EXPECT_NE(DetailOf(r, "prolog").find(D("etc/hooks.conf") + ":2: " + D("bin/prolog.sh") + " runs " +
                                       D("bin/pilot-prolog") + ", PrologFlags=Alloc"),
            std::string::npos)
      << DetailOf(r, "prolog");
  EXPECT_NE(DetailOf(r, "job_submit").find("not this node's: slurmctld runs on controller-elsewhere"),
            std::string::npos);
  EXPECT_NE(DetailOf(r, "key").find("key id"), std::string::npos);
  // Whatever else this machine lacks (Yama, podman), nothing of the files
  // above is missing; the exit status follows `ready`.
  EXPECT_EQ(r.rc, r.report["ready"].get<bool>() ? 0 : 1) << r.out;
}

TEST_F(DoctorTest, KeyModesAndOwners) {
  chmod(D("keys/verdict.key").c_str(), 0640);
  DoctorRan r = Doctor();
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(StatusOf(r, "key"), "missing");
  EXPECT_NE(DetailOf(r, "key").find("mode 0640, readable or writable by others than root | fix: chown root " +
                                    D("keys/verdict.key") + " && chmod 0600"),
            std::string::npos)
      << DetailOf(r, "key");
  chmod(D("keys/verdict.key").c_str(), 0600);
  ASSERT_EQ(chown(D("keys/ed25519.key").c_str(), 65534, 0), 0);
  r = Doctor();
  EXPECT_NE(DetailOf(r, "key").find("ed25519.key: owned by uid 65534, not root"), std::string::npos)
      << DetailOf(r, "key");
  ASSERT_EQ(chown(D("keys/ed25519.key").c_str(), 0, 0), 0);
  chmod(D("keys/ed25519.pub").c_str(), 0600);
  r = Doctor();
  EXPECT_NE(DetailOf(r, "key").find("not readable by others (mode 0600)"), std::string::npos)
      << DetailOf(r, "key");
  chmod(D("keys/ed25519.pub").c_str(), 0644);
  fs::remove(D("keys/verdict.key"));
  r = Doctor();
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(DetailOf(r, "key").find("verdict.key: does not exist | fix: run 'pilot keygen "
                                    "--policy " + D("etc/pilot.conf") + "' as root"),
            std::string::npos)
      << DetailOf(r, "key");
}

TEST_F(DoctorTest, PrologAndEpilogLines) {
  PutFile(D("etc/hooks.conf"), "Prolog=" + D("bin/prolog.sh") + "\nEpilog=/usr/bin/true\n", 0644);
  DoctorRan r = Doctor();
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(DetailOf(r, "prolog").find("PrologFlags lacks Alloc"), std::string::npos) << DetailOf(r, "prolog");
  EXPECT_NE(DetailOf(r, "epilog").find("Epilog=/usr/bin/true: does not run pilot-epilog"), std::string::npos)
      << DetailOf(r, "epilog");
  // A wrapper that does not name pilot-prolog, and one others may write.
  PutFile(D("etc/hooks.conf"), "PrologFlags=Alloc\nProlog=" + D("bin/prolog.sh") + "\nEpilog=" +
                                   D("bin/pilot-epilog") + "\n", 0644);
  PutFile(D("bin/prolog.sh"), "#!/bin/sh\n# exec /x/pilot-prolog in a comment only\nexit 0\n", 0755);
  r = Doctor();
  EXPECT_NE(DetailOf(r, "prolog").find("does not run pilot-prolog"), std::string::npos) << DetailOf(r, "prolog");
  chmod(D("bin/pilot-epilog").c_str(), 0777);
  r = Doctor();
  EXPECT_NE(DetailOf(r, "epilog").find("writable by group or others (mode 0777)"), std::string::npos)
      << DetailOf(r, "epilog");
  PutFile(D("etc/hooks.conf"), "PrologFlags=Alloc\n", 0644);
  r = Doctor();
  EXPECT_NE(DetailOf(r, "prolog").find(D("etc/slurm.conf") + ": no Prolog="), std::string::npos)
      << DetailOf(r, "prolog");
}

TEST_F(DoctorTest, PlugstackLineAndArguments) {
  PutFile(D("etc/plugstack.conf.d/pilot.conf"), "# required spank_pilot.so (commented out)\n", 0644);
  DoctorRan r = Doctor();
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(StatusOf(r, "plugstack"), "missing");
  EXPECT_NE(DetailOf(r, "plugstack").find("no line for spank_pilot.so in " + D("etc/plugstack.conf") +
                                          ", " + D("etc/plugstack.conf.d/pilot.conf")),
            std::string::npos)
      << DetailOf(r, "plugstack");
  PutFile(D("etc/plugstack.conf.d/pilot.conf"), PluginLine(" polciy=/x"), 0644);
  r = Doctor();
  EXPECT_NE(DetailOf(r, "plugstack").find("\"polciy\": unknown key"), std::string::npos)
      << DetailOf(r, "plugstack");
  PutFile(D("etc/plugstack.conf.d/pilot.conf"), PluginLine(" state_dir=/elsewhere"), 0644);
  r = Doctor();
  EXPECT_NE(DetailOf(r, "plugstack").find("the plugin's state_dir /elsewhere is not the policy's"),
            std::string::npos)
      << DetailOf(r, "plugstack");
  PutFile(D("etc/plugstack.conf.d/pilot.conf"), PluginLine(), 0644);
  fs::remove(D("lib/spank_pilot_impl.so"));
  r = Doctor();
  EXPECT_NE(DetailOf(r, "plugstack").find("spank_pilot_impl.so: does not exist"), std::string::npos)
      << DetailOf(r, "plugstack");
  // The text form: one line per item, the fix on the line.
  r = Run("doctor --slurm-conf " + D("etc/slurm.conf"), false);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("pilot: doctor: plugstack: missing: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" (fix: install spank_pilot_impl.so beside spank_pilot.so"), std::string::npos);
  EXPECT_NE(r.out.find("missing: this node cannot run a pilot"), std::string::npos);
}

}  // namespace
}  // namespace pilot
