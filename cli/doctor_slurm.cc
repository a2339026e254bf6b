// pilot doctor, Slurm's side: what slurmd and slurmctld must load and run
// for a pilot (spank_pilot(8), FILES; pilot-prolog(8)).
#include <sys/stat.h>
#include <unistd.h>

#include "cli/doctor.h"
#include "core/base/atomic_file.h"
#include "core/base/strings.h"
#include "job/state_layout.h"

namespace pilot::cli::doctor {
namespace {

constexpr char kPluginName[] = "spank_pilot.so";
constexpr char kPluginImplName[] = "spank_pilot_impl.so";
// Where slurmd looks for a plugin named without a folder when slurm.conf
// sets no PluginDir (Debian's, then other distributions' folders).
constexpr char kDefaultPluginDir[] =
    "/usr/lib/x86_64-linux-gnu/slurm-wlm:/usr/lib/aarch64-linux-gnu/slurm-wlm:"
    "/usr/lib64/slurm:/usr/lib/slurm";

std::string PluginDirOf(const Node& node) {
  return node.slurm_conf ? node.slurm_conf->Value("PluginDir", kDefaultPluginDir) : kDefaultPluginDir;
}

std::string RootProgramProblem(const std::string& path) {
  return RootFileProblem(path, RootFileKind::kProgram);
}

std::string RootLibraryProblem(const std::string& path) {
  return RootFileProblem(path, RootFileKind::kLoaded);
}

Item PlugstackItem(const Node& node) {
  const std::string line_fix = "add to " + node.plugstack_path + " (or a file it includes) the line "
                               "'required " + std::string(kPluginName) +
                               " policy=/etc/slurm-pilot/pilot.conf' with the plugin's installed "
                               "path (etc/plugstack.conf.d/pilot.conf; spank_pilot(8)), then "
                               "restart slurmd";
  if (!node.plugstack) return Missing("plugstack", node.plugstack_error, line_fix);
  if (!node.plugin) {
    return Missing("plugstack",
                   "no line for " + std::string(kPluginName) + " in " +
                       Join(node.plugstack->files, ", ") +
                       (node.plugstack->problems.empty() ? ""
                                                         : " (" + Join(node.plugstack->problems, "; ") + ")"),
                   line_fix);
  }
  const std::string where = node.plugin->at.Where();
  if (!node.plugin_args) {
    return Missing("plugstack", where + ": " + node.plugin_args_error,
                   "give the plugin only state_dir=, runner=, supervisor= and policy= with "
                   "absolute paths (spank_pilot(8), PLUGSTACK ARGUMENTS)");
  }
  const std::string plugin = PluginFilePath(node.plugin->plugin, PluginDirOf(node));
  if (std::string p = RootLibraryProblem(plugin); !p.empty()) {
    return Missing("plugstack", where + ": " + p,
                   "install the plugin there (spank_pilot.so and spank_pilot_impl.so side by "
                   "side, root's, mode 0644 or 0755) or correct the line");
  }
  const std::string impl = DirName(plugin) + "/" + kPluginImplName;
  if (std::string p = RootLibraryProblem(impl); !p.empty()) {
    return Missing("plugstack", where + ": " + p,
                   "install spank_pilot_impl.so beside spank_pilot.so: the plugin loads it "
                   "from its own folder");
  }
  if (!node.plugin->required) {
    return Warn("plugstack", where + ": " + plugin + " is optional",
                "make the line 'required': an optional plugin that fails to load leaves jobs "
                "running without their pilot");
  }
  if (node.plugin_args->state_dir != node.policy.state_dir) {
    return Missing("plugstack",
                   where + ": the plugin's state_dir " + node.plugin_args->state_dir +
                       " is not the policy's " + node.policy.state_dir,
                   "give state_dir= the policy's state_dir, or leave it out: the prolog and "
                   "the plugin must read one state folder");
  }
  std::string detail = where + ": required " + plugin + " (policy " + node.plugin_args->policy +
                       ", state_dir " + node.plugin_args->state_dir + ")";
  if (node.policy_source != "plugstack.conf" && node.plugin_args->policy != node.policy.path) {
    return Warn("plugstack", detail + "; this check read " + node.policy.path,
                "check the node with the plugin's policy (pilot doctor --policy " +
                    node.plugin_args->policy + "), which is what its pilots run under");
  }
  return Holds("plugstack", detail);
}

Item ProgramsItem(const Node& node) {
  if (!node.plugin_args) {
    return Missing("programs", "the plugin's line gives no runner or supervisor (see plugstack)",
                   "fix the plugstack line first");
  }
  for (const std::string* p : {&node.plugin_args->supervisor, &node.plugin_args->runner}) {
    if (std::string problem = RootProgramProblem(*p); !problem.empty()) {
      return Missing("programs", problem,
                     "install pilot-supervisor and pilot-runner (root's, mode 0755), or point "
                     "the plugin's supervisor= and runner= (or the policy's supervisor_path "
                     "and runner_path) at them");
    }
  }
  return Holds("programs", "supervisor " + node.plugin_args->supervisor + ", runner " +
                               node.plugin_args->runner);
}

// The pilot program `script` runs, when it is a script ("#!") naming one
// whose name is `program` (a site's wrapper that adds --policy); "" else.
std::string ProgramInScript(const std::string& script, const std::string& program) {
  Result<std::string> text = ReadFileLimited(script, 64 << 10);
  if (!text.ok() || !StartsWith(*text, "#!")) return "";
  for (std::string_view line : SplitLines(*text)) {
    line = Trim(line);
    if (StartsWith(line, "#")) continue;
    std::string word;
    for (size_t i = 0; i <= line.size(); ++i) {
      const char c = i < line.size() ? line[i] : ' ';
      if (c == ' ' || c == '\t' || c == ';' || c == '"' || c == '\'') {
        if (EndsWith(word, "/" + program)) return word;
        word.clear();
      } else {
        word.push_back(c);
      }
    }
  }
  return "";
}

// Prolog= or Epilog= (`key`) runs pilot-prolog or pilot-epilog (`program`).
Item HookItem(const Node& node, const std::string& key, const std::string& program) {
  const std::string name = AsciiLower(key);
  const std::string fix = "set " + key + "=/usr/sbin/" + program + " (or a root-owned script that "
                          "execs it with --policy) in slurm.conf (etc/slurm.conf.pilot), then "
                          "restart slurmctld and slurmd";
  const SlurmConfEntry* e = node.slurm_conf->Find(key);
  if (e == nullptr || e->value.empty()) {
    return Missing(name, node.slurm_conf->path + ": no " + key + "=", fix);
  }
  const std::string where = e->at.Where() + ": " + key + "=" + e->value;
  std::string found;
  for (const std::string& path : SplitList(e->value, ',')) {
    const std::string hook(Trim(path));
    if (std::string p = RootProgramProblem(hook); !p.empty()) return Missing(name, where + ": " + p, fix);
    const std::string runs = BaseName(hook) == program ? hook : ProgramInScript(hook, program);
    if (runs.empty()) continue;
    if (std::string p = RootProgramProblem(runs); !p.empty()) {
      return Missing(name, where + ": runs " + p, fix);
    }
    found = runs == hook ? hook : hook + " runs " + runs;
  }
  if (found.empty()) return Missing(name, where + ": does not run " + program, fix);
  if (name == "prolog") {
    bool alloc = false;
    for (const std::string& flag : SplitList(node.slurm_conf->Value("PrologFlags"), ',')) {
      alloc = alloc || AsciiLower(Trim(flag)) == "alloc";
    }
    if (!alloc) {
      return Missing(name, where + ": PrologFlags lacks Alloc",
                     "set PrologFlags=Alloc in slurm.conf: the prolog must write the lock when "
                     "the job is allocated, before any step starts (pilot-prolog(8))");
    }
    found += ", PrologFlags=Alloc";
  }
  return Holds(name, e->at.Where() + ": " + found);
}

// Whether this node runs slurmctld: one of slurm.conf's SlurmctldHost (or
// the older ControlMachine) names is its name.
bool IsController(const Node& node, std::vector<std::string>* hosts) {
  bool mine = false;
  for (const SlurmConfEntry& e : node.slurm_conf->entries) {
    const std::string key = AsciiLower(e.key);
    if (key != "slurmctldhost" && key != "controlmachine") continue;
    const std::string host = e.value.substr(0, e.value.find('('));
    hosts->push_back(host);
    mine = mine || host == node.host || host.substr(0, host.find('.')) == node.host;
  }
  return mine;
}

// The value of `NAME = "..."` in the Lua script's text; "" without it.
std::string LuaString(const std::string& text, const std::string& name) {
  for (std::string_view line : SplitLines(text)) {
    line = Trim(line);
    if (!StartsWith(line, name)) continue;
    const size_t open = line.find('"'), close = line.rfind('"');
    if (open != std::string_view::npos && close > open) {
      return std::string(line.substr(open + 1, close - open - 1));
    }
  }
  return "";
}

Item JobSubmitItem(const Node& node) {
  std::vector<std::string> hosts;
  if (!IsController(node, &hosts)) {
    return Holds("job_submit", "not this node's: slurmctld runs on " + Join(hosts, ", ") +
                                   "; run pilot doctor there for job_submit.lua");
  }
  bool lua = false;
  for (const std::string& p : SplitList(node.slurm_conf->Value("JobSubmitPlugins"), ',')) {
    const std::string v = AsciiLower(Trim(p));
    lua = lua || v == "lua" || v == "job_submit/lua";
  }
  const std::string script = DirName(node.slurm_conf->path) + "/job_submit.lua";
  const std::string install = "install etc/job_submit.lua as " + script +
                              " with GRANTS_DIR the policy's state_dir/grants, and set "
                              "JobSubmitPlugins=lua in slurm.conf (pilot(1), GRANTS)";
  if (!lua) {
    return Missing("job_submit", node.slurm_conf->path + ": JobSubmitPlugins has no lua: long "
                   "jobs are admitted without a grant", install);
  }
  const std::string so = PluginFilePath("job_submit_lua.so", PluginDirOf(node));
  if (access(so.c_str(), R_OK) != 0) {
    return Missing("job_submit", so + ": Slurm's lua plugin is not installed",
                   "install Slurm's job_submit/lua plugin (Debian: slurm-wlm's "
                   "job_submit_lua.so, with liblua5.x)");
  }
  Result<std::string> text = ReadFileLimited(script, 1 << 20);
  if (!text.ok()) return Missing("job_submit", text.status().Message(), install);
  const std::string grants = LuaString(*text, "GRANTS_DIR");
  const std::string want = job::StateLayout(node.policy.state_dir).GrantsDir();
  if (grants.empty()) {
    return Missing("job_submit", script + ": not slurm-pilot's (no GRANTS_DIR)", install);
  }
  if (grants != want) {
    return Missing("job_submit", script + ": GRANTS_DIR is " + grants + ", the policy's grants are "
                   "in " + want, "set GRANTS_DIR = \"" + want + "\" in " + script +
                   " and reconfigure slurmctld (scontrol reconfigure)");
  }
  return Holds("job_submit", script + " (JobSubmitPlugins=lua, GRANTS_DIR " + grants + ")");
}

}  // namespace

Node ReadNode(const std::string& slurm_conf_path) {
  Node node;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) node.host = host;
  node.host = node.host.substr(0, node.host.find('.'));
  node.slurm_conf_path = slurm_conf_path;
  Result<SlurmConf> conf = LoadSlurmConf(slurm_conf_path);
  if (!conf.ok()) {
    node.slurm_conf_error = conf.status().Message();
    node.plugstack_error = "no slurm.conf to name it";
    return node;
  }
  node.slurm_conf = std::move(conf).value();
  node.plugstack_path = PlugstackPath(*node.slurm_conf);
  Result<Plugstack> stack = LoadPlugstack(node.plugstack_path);
  if (!stack.ok()) {
    node.plugstack_error = stack.status().Message();
    return node;
  }
  node.plugstack = std::move(stack).value();
  for (const PlugstackEntry& e : node.plugstack->entries) {
    if (BaseName(e.plugin) == kPluginName) node.plugin = e;
  }
  if (node.plugin) {
    Result<job::PluginArgs> args = job::ParsePluginArgs(node.plugin->args);
    if (args.ok()) {
      node.plugin_args = std::move(args).value();
    } else {
      node.plugin_args_error = args.status().Message();
    }
  }
  return node;
}

std::vector<Item> SlurmItems(const Node& node) {
  if (!node.slurm_conf) {
    return {Missing("slurm.conf", node.slurm_conf_error,
                    "point SLURM_CONF (or --slurm-conf) at the slurm.conf slurmd reads")};
  }
  std::vector<Item> items;
  if (node.slurm_conf->problems.empty()) {
    items.push_back(Holds("slurm.conf", node.slurm_conf->path));
  } else {
    items.push_back(Warn("slurm.conf", Join(node.slurm_conf->problems, "; "),
                         "correct those lines: slurmd may read them otherwise"));
  }
  items.push_back(PlugstackItem(node));
  items.push_back(ProgramsItem(node));
  items.push_back(HookItem(node, "Prolog", "pilot-prolog"));
  items.push_back(HookItem(node, "Epilog", "pilot-epilog"));
  items.push_back(JobSubmitItem(node));
  return items;
}

}  // namespace pilot::cli::doctor
