// pilot doctor's items: what a node needs to run a pilot under the site's
// policy, each checked against the node itself (its files, its kernel, its
// programs), never against the project's own defaults alone.
//
// An item holds, warns (the node runs pilots, with a consequence named) or
// is missing (a pilot on this node fails or cannot start); each that does
// not hold carries its fix. cli/doctor.cc runs them and prints them;
// cli/doctor_slurm.cc checks Slurm's side (plugstack, Prolog/Epilog,
// job_submit.lua), cli/doctor_node.cc the node's (state folder, keys,
// kernel, capabilities, container runtimes, GPUs, Python).
//
// Thread-safety: single-threaded (runs programs with job::RunCommand).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/records/policy.h"
#include "core/records/slurm_conf.h"
#include "job/plugin_args.h"

namespace pilot::cli::doctor {

enum class ItemStatus { kHolds, kWarn, kMissing };

// "holds", "warn", "missing".
const char* StatusName(ItemStatus s);

struct Item {
  std::string name;  // "plugstack", "prolog", "key", ... (pilot(1), DOCTOR)
  ItemStatus status = ItemStatus::kHolds;
  std::string detail;  // what was found, with the path or value
  std::string fix;     // what to do; "" when it holds
};

Item Holds(std::string name, std::string detail);
Item Warn(std::string name, std::string detail, std::string fix);
Item Missing(std::string name, std::string detail, std::string fix);

// What the checks share: the node's Slurm configuration as slurmd reads it,
// the plugin's line in it and the policy in force.
struct Node {
  std::string host;             // this node's short name
  std::string slurm_conf_path;  // $SLURM_CONF or /etc/slurm/slurm.conf
  std::optional<SlurmConf> slurm_conf;
  std::string slurm_conf_error;  // why it was not read
  std::string plugstack_path;
  std::optional<Plugstack> plugstack;
  std::string plugstack_error;
  std::optional<PlugstackEntry> plugin;  // spank_pilot.so's line
  std::optional<job::PluginArgs> plugin_args;  // its arguments, the policy's defaults applied
  std::string plugin_args_error;
  Policy policy;
  std::string policy_source;  // "--policy", "$PILOT_POLICY", "plugstack.conf", "default"
};

// Reads slurm.conf, its plugstack and the plugin's line. `policy_path` is
// the path the caller chose ("" = the plugin's policy=, else the default).
Node ReadNode(const std::string& slurm_conf_path);

// The Slurm side: slurm.conf read, plugstack (the plugin's line, its files
// and arguments), the programs it starts, Prolog and Epilog (with
// PrologFlags=Alloc), job_submit.lua on the controller.
std::vector<Item> SlurmItems(const Node& node);

// The node's side: state folder and free space, the verdict keys, Yama,
// fanotify, capabilities, container runtimes, GPUs and the probe's Python.
std::vector<Item> NodeItems(const Node& node);

// The words of a list ("a, b,c" with ','), trimmed, empty ones left out.
std::vector<std::string> SplitList(std::string_view text, char sep);
// "0640" of a file's mode bits.
std::string ModeText(unsigned mode);

enum class RootFileKind {
  kProgram,  // root runs it: executable, writable by root alone
  kLoaded,   // slurmd loads it: writable by root alone
  kPrivate,  // a key: readable and writable by root alone
};
// Why `path` is not a regular file of root's as `kind` needs: "" when it
// is, else "PATH: what is wrong" with the owner or mode found.
std::string RootFileProblem(const std::string& path, RootFileKind kind);

// The capability set of a process as /proc/PID/status's `field` gives it
// ("CapEff", "CapBnd"), from the text of that file; nullopt without it.
std::optional<unsigned long long> CapabilitySet(const std::string& status_text,
                                                const std::string& field);

}  // namespace pilot::cli::doctor
