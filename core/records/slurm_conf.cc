#include "core/records/slurm_conf.h"

#include <glob.h>
#include <unistd.h>

#include <functional>

#include "core/base/atomic_file.h"
#include "core/base/split.h"
#include "core/base/strings.h"

namespace pilot {
namespace {

constexpr size_t kMaxConfBytes = 4 << 20;
constexpr int kMaxIncludeDepth = 8;

// The line without its comment ('#' to the end; "\#" is a literal '#'),
// trimmed.
std::string Uncommented(std::string_view line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '#') {
      out.push_back('#');
      ++i;
    } else if (line[i] == '#') {
      break;
    } else {
      out.push_back(line[i]);
    }
  }
  return std::string(Trim(out));
}

// The words of a line, split at blanks; "..." keeps blanks in a word.
std::vector<std::string> Words(std::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && (c == ' ' || c == '\t')) {
      if (any) words.push_back(word);
      word.clear();
      any = false;
    } else {
      word.push_back(c);
      any = true;
    }
  }
  if (any) words.push_back(word);
  return words;
}

// `pattern`'s files in glob order; a pattern without wildcards is itself
// (whether it exists or not, so that its reader names it).
std::vector<std::string> Expand(const std::string& pattern) {
  if (pattern.find_first_of("*?[") == std::string::npos) return {pattern};
  glob_t g{};
  std::vector<std::string> out;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  globfree(&g);
  return out;
}

std::string InFolder(const std::string& path, const std::string& folder) {
  return !path.empty() && path[0] == '/' ? path : folder + "/" + path;
}

// An include line (`words`: the keyword and one pattern, relative to
// `folder`) read at `depth`: each file's text handed to `read`, what cannot
// be read added to `problems`.
void FollowInclude(const std::vector<std::string>& words, const ConfPlace& at,
                   const std::string& folder, int depth, std::vector<std::string>* problems,
                   const std::function<void(const std::string& text, const std::string& file)>& read) {
  if (words.size() != 2) {
    problems->push_back(at.Where() + ": " + words[0] + " takes one file or pattern");
    return;
  }
  if (depth >= kMaxIncludeDepth) {
    problems->push_back(at.Where() + ": includes nested too deep");
    return;
  }
  // A pattern that matches nothing is no error to slurmd.
  for (const std::string& file : Expand(InFolder(words[1], folder))) {
    Result<std::string> inc = ReadFileLimited(file, kMaxConfBytes);
    if (!inc.ok()) {
      problems->push_back(at.Where() + ": " + words[0] + " " + inc.status().Message());
      continue;
    }
    read(*inc, file);
  }
}

// Each line of `text` that holds more than a comment, with where it is,
// the line without its comment and its words.
void ForEachLine(std::string_view text, const std::string& path,
                 const std::function<void(const ConfPlace& at, const std::string& line,
                                          const std::vector<std::string>& words)>& fn) {
  int n = 0;
  for (std::string_view raw : SplitLines(text)) {
    ++n;
    const std::string line = Uncommented(raw);
    if (!line.empty()) fn(ConfPlace{path, n}, line, Words(line));
  }
}

void ReadSlurmConf(std::string_view text, const std::string& path, const std::string& top_dir,
                   int depth, SlurmConf* conf) {
  ForEachLine(text, path, [&](const ConfPlace& at, const std::string& line,
                              const std::vector<std::string>& words) {
    if (AsciiLower(words[0]) == "include") {
      FollowInclude(words, at, top_dir, depth, &conf->problems,
                    [&](const std::string& inc, const std::string& file) {
                      ReadSlurmConf(inc, file, top_dir, depth + 1, conf);
                    });
      return;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      conf->problems.push_back(at.Where() + ": expected Key=Value, got " + Quote(line));
      return;
    }
    SlurmConfEntry e;
    e.key = std::string(Trim(std::string_view(line).substr(0, eq)));
    const std::vector<std::string> value = Words(std::string_view(line).substr(eq + 1));
    e.value = value.empty() ? "" : value[0];
    e.at = at;
    conf->entries.push_back(std::move(e));
  });
}

void ReadPlugstack(std::string_view text, const std::string& path, int depth, Plugstack* stack) {
  stack->files.push_back(path);
  ForEachLine(text, path, [&](const ConfPlace& at, const std::string& line,
                              const std::vector<std::string>& words) {
    const std::string kind = AsciiLower(words[0]);
    if (kind == "include") {
      FollowInclude(words, at, DirName(path), depth, &stack->problems,
                    [&](const std::string& inc, const std::string& file) {
                      ReadPlugstack(inc, file, depth + 1, stack);
                    });
      return;
    }
    if ((kind != "required" && kind != "optional") || words.size() < 2) {
      stack->problems.push_back(at.Where() + ": expected required|optional PLUGIN [ARGS], got " +
                                Quote(line));
      return;
    }
    PlugstackEntry e;
    e.required = kind == "required";
    e.plugin = words[1];
    e.args.assign(words.begin() + 2, words.end());
    e.at = at;
    stack->entries.push_back(std::move(e));
  });
}

}  // namespace

const SlurmConfEntry* SlurmConf::Find(std::string_view key) const {
  const std::string k = AsciiLower(key);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    if (AsciiLower(it->key) == k) return &*it;
  }
  return nullptr;
}

std::string SlurmConf::Value(std::string_view key, const std::string& fallback) const {
  const SlurmConfEntry* e = Find(key);
  return e != nullptr ? e->value : fallback;
}

std::string SlurmConfPath(const EnvLookup& env) {
  std::optional<std::string> v = env ? env("SLURM_CONF") : std::nullopt;
  return v && !v->empty() ? *v : "/etc/slurm/slurm.conf";
}

SlurmConf ParseSlurmConf(std::string_view text, const std::string& path) {
  SlurmConf conf;
  conf.path = path;
  ReadSlurmConf(text, path, DirName(path), 0, &conf);
  return conf;
}

Result<SlurmConf> LoadSlurmConf(const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxConfBytes));
  return ParseSlurmConf(text, path);
}

std::string PlugstackPath(const SlurmConf& conf) {
  const std::string named = conf.Value("PlugStackConfig");
  if (!named.empty()) return InFolder(named, DirName(conf.path));
  return DirName(conf.path) + "/plugstack.conf";
}

Result<Plugstack> LoadPlugstack(const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxConfBytes));
  Plugstack stack;
  stack.path = path;
  ReadPlugstack(text, path, 0, &stack);
  return stack;
}

std::string PluginFilePath(const std::string& plugin, const std::string& plugin_dir) {
  if (!plugin.empty() && plugin[0] == '/') return plugin;
  std::string first;
  for (std::string_view folder : SplitOn(plugin_dir, ':')) {
    const std::string dir(folder);
    if (dir.empty()) continue;
    if (first.empty()) first = dir + "/" + plugin;
    if (access((dir + "/" + plugin).c_str(), F_OK) == 0) return dir + "/" + plugin;
  }
  return first.empty() ? plugin : first;
}

}  // namespace pilot
