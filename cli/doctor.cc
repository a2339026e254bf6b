// pilot doctor [--json] [--policy FILE] [--slurm-conf FILE]: what this node
// needs to run a pilot, one line per item (cli/doctor.h).
#include "cli/doctor.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>

#include "cli/options.h"
#include "core/base/env_lookup.h"
#include "core/base/json_util.h"
#include "core/base/split.h"
#include "core/base/strings.h"
#include "job/env_names.h"

namespace pilot::cli {

namespace doctor {

const char* StatusName(ItemStatus s) {
  switch (s) {
    case ItemStatus::kHolds: return "holds";
    case ItemStatus::kWarn: return "warn";
    case ItemStatus::kMissing: return "missing";
  }
  return "?";
}

Item Holds(std::string name, std::string detail) {
  return Item{std::move(name), ItemStatus::kHolds, std::move(detail), ""};
}
Item Warn(std::string name, std::string detail, std::string fix) {
  return Item{std::move(name), ItemStatus::kWarn, std::move(detail), std::move(fix)};
}
Item Missing(std::string name, std::string detail, std::string fix) {
  return Item{std::move(name), ItemStatus::kMissing, std::move(detail), std::move(fix)};
}

std::vector<std::string> SplitList(std::string_view text, char sep) {
  std::vector<std::string> out;
  for (std::string_view field : SplitOn(text, sep)) {
    const std::string_view word = Trim(field);
    if (!word.empty()) out.emplace_back(word);
  }
  return out;
}

std::string RootFileProblem(const std::string& path, RootFileKind kind) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return path + ": " + (errno == ENOENT ? std::string("does not exist") : std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return path + ": not a regular file";
  if (kind == RootFileKind::kProgram && (st.st_mode & 0111) == 0) return path + ": not executable";
  if (st.st_uid != 0) return path + ": owned by uid " + std::to_string(st.st_uid) + ", not root";
  if (kind == RootFileKind::kPrivate && (st.st_mode & 0077) != 0) {
    return path + ": mode " + ModeText(st.st_mode) + ", readable or writable by others than root";
  }
  if ((st.st_mode & 0022) != 0) {
    return path + ": writable by group or others (mode " + ModeText(st.st_mode) + ")";
  }
  return "";
}

std::string ModeText(unsigned mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777u);
  return buf;
}

}  // namespace doctor

namespace {

using doctor::Item;
using doctor::ItemStatus;

// The policy in force: --policy, else $PILOT_POLICY, else the plugin's
// policy= (what slurmstepd reads on this node), else the installed one.
// A policy that does not read is an item of its own; the checks then go on
// with the defaults.
std::optional<Item> ChoosePolicy(const std::string& flag, doctor::Node* node) {
  std::string path = flag;
  node->policy_source = "--policy";
  if (path.empty()) {
    const char* env = std::getenv(job::kUserPolicy);
    if (env != nullptr && *env != '\0') {
      path = env;
      node->policy_source = std::string("$") + job::kUserPolicy;
    }
  }
  if (path.empty() && node->plugin_args) {
    path = node->plugin_args->policy;
    node->policy_source = "plugstack.conf";
  }
  if (path.empty()) {
    path = DefaultPolicyPath();
    node->policy_source = "default";
  }
  Result<Policy> policy = LoadPolicy(path);
  if (!policy.ok()) {
    node->policy = DefaultPolicy();
    node->policy.path = path;
    return doctor::Missing("policy", policy.status().Message(),
                           "write the site policy at " + path + " (pilot.conf(5); the shipped "
                           "etc/pilot.conf lists every key), or name it with --policy");
  }
  node->policy = std::move(policy).value();
  if (node->plugin_args) job::ApplyPolicyDefaults(node->policy, &*node->plugin_args);
  return std::nullopt;
}

Json ItemsJson(const doctor::Node& node, const std::vector<Item>& items, bool ready) {
  Json list = Json::array();
  for (const Item& i : items) {
    list.push_back({{"name", i.name},
                    {"status", doctor::StatusName(i.status)},
                    {"detail", i.detail},
                    {"fix", i.fix}});
  }
  return {{"schema", "slurm-pilot/doctor/1"},
          {"node", node.host},           {"slurm_conf", node.slurm_conf_path},
          {"policy", node.policy.path},  {"ready", ready},
          {"items", std::move(list)}};
}

}  // namespace

int RunDoctor(const Invocation& inv) {
  CommandLine cl("pilot doctor [--json] [--policy FILE] [--slurm-conf FILE]",
                 "Check what this node needs to run a pilot under the site's policy and print\n"
                 "one line per item: holds, warn (pilots run; the line says what it costs) or\n"
                 "missing (a pilot here fails or cannot start), with the fix. Run it as root on\n"
                 "each node (srun -N N pilot doctor). Exit 0 when nothing is missing, 1 when\n"
                 "something is.");
  cl.options.add_options()
      ("json", po::bool_switch(), "print the items as JSON (pilot-files(5), DOCTOR REPORT)")
      ("policy", PolicyValue(),
       "site policy (default: $PILOT_POLICY, else the plugin's policy= on its plugstack "
       "line, else the installed pilot.conf)")
      ("slurm-conf", po::value<std::string>()->default_value(""),
       "slurm.conf to check (default: $SLURM_CONF, else /etc/slurm/slurm.conf)");
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  std::string conf = vm["slurm-conf"].as<std::string>();
  if (conf.empty()) conf = SlurmConfPath(ProcessEnv());
  doctor::Node node = doctor::ReadNode(conf);
  std::vector<Item> items;
  if (std::optional<Item> bad = ChoosePolicy(vm["policy"].as<std::string>(), &node)) {
    items.push_back(std::move(*bad));
  } else {
    items.push_back(doctor::Holds("policy", node.policy.path + " (" + node.policy_source + ")"));
  }
  for (std::vector<Item> part : {doctor::SlurmItems(node), doctor::NodeItems(node)}) {
    for (Item& i : part) items.push_back(std::move(i));
  }
  int missing = 0, warned = 0;
  for (const Item& i : items) {
    missing += i.status == ItemStatus::kMissing;
    warned += i.status == ItemStatus::kWarn;
  }
  const bool ready = missing == 0;
  if (vm["json"].as<bool>()) {
    inv.out << DumpJson(ItemsJson(node, items, ready), 2) << "\n";
  } else {
    for (const Item& i : items) {
      inv.out << "pilot: doctor: " << i.name << ": " << doctor::StatusName(i.status) << ": "
              << i.detail << (i.fix.empty() ? "" : " (fix: " + i.fix + ")") << "\n";
    }
    inv.out << "pilot: doctor: " << node.host << ": " << items.size() - missing - warned
            << " hold, " << warned << " warn, " << missing << " missing: "
            << (ready ? "this node can run a pilot" : "this node cannot run a pilot") << "\n";
  }
  return ready ? kExitOk : kExitNo;
}

}  // namespace pilot::cli
