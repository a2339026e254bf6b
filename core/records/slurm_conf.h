// Slurm's own configuration text, as a node's slurmd reads it: slurm.conf
// (the keys `pilot doctor` looks for: Prolog, Epilog, PrologFlags,
// PlugStackConfig, JobSubmitPlugins, SlurmctldHost, PluginDir,
// SlurmdPidFile) and plugstack.conf (the SPANK plugins slurmd loads), each
// with its includes followed.
//
// slurm.conf: one `Key=Value` per line (keys case-insensitive; a line of
// several pairs, as NodeName=... CPUs=..., is recorded by its first),
// `#` to the end of the line a comment, `Include FILE` (a relative FILE in
// the folder of slurm.conf; a glob pattern is expanded) read in place.
// plugstack.conf: `required|optional PLUGIN [ARG...]` and
// `include PATTERN` (a glob; relative to the including file's folder), `#`
// comments.
//
// Neither reader refuses what Slurm would accept: a line it cannot read is a
// problem ("FILE:LINE: ...") next to the lines it could, so a caller can
// name both.
//
// Thread-safety: plain values; the loaders read files only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/env_lookup.h"
#include "core/base/status.h"

namespace pilot {

// Where a line was read.
struct ConfPlace {
  std::string file;
  int line = 0;
  std::string Where() const { return file + ":" + std::to_string(line); }
};

struct SlurmConfEntry {
  std::string key;    // as written ("PrologFlags")
  std::string value;  // unquoted
  ConfPlace at;
};

struct SlurmConf {
  std::string path;                     // the top file
  std::vector<SlurmConfEntry> entries;  // every line's first pair, includes expanded, in order
  std::vector<std::string> problems;    // "FILE:LINE: what" of lines or includes not read
  // The last entry of `key` (case-insensitive), which is the one Slurm
  // keeps; nullptr when there is none.
  const SlurmConfEntry* Find(std::string_view key) const;
  // Its value, or `fallback`.
  std::string Value(std::string_view key, const std::string& fallback = "") const;
};

// The slurm.conf slurmd reads: $SLURM_CONF, else /etc/slurm/slurm.conf.
std::string SlurmConfPath(const EnvLookup& env);

// Reads `path` and its includes (8 levels at most). Errors: the top file's
// kNotFound or kIoError; an include that cannot be read is a problem.
Result<SlurmConf> LoadSlurmConf(const std::string& path);
// The same from text (`path` for messages and relative includes).
SlurmConf ParseSlurmConf(std::string_view text, const std::string& path);

// The plugstack.conf `conf` names (PlugStackConfig), else plugstack.conf in
// its folder, Slurm's default.
std::string PlugstackPath(const SlurmConf& conf);

struct PlugstackEntry {
  bool required = false;          // "required" (else "optional")
  std::string plugin;             // as written; a relative one is in PluginDir
  std::vector<std::string> args;  // the words after it
  ConfPlace at;
};

struct Plugstack {
  std::string path;
  std::vector<PlugstackEntry> entries;  // includes expanded, in order
  std::vector<std::string> files;       // every file read, the top one first
  std::vector<std::string> problems;    // "FILE:LINE: what"
};

// Reads `path` and the files it includes (8 levels at most). Errors: the
// top file's kNotFound or kIoError.
Result<Plugstack> LoadPlugstack(const std::string& path);

// `plugin` as slurmd loads it: itself when absolute, else in `plugin_dir`
// (slurm.conf's PluginDir, ':'-separated: its first folder holding it,
// else the first folder).
std::string PluginFilePath(const std::string& plugin, const std::string& plugin_dir);

}  // namespace pilot
