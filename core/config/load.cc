// Loading pilot.toml: bytes -> TOML++ tree -> overrides -> per-key checks ->
// cross-field rules (config_validate.cc). Every problem becomes one kInvalid
// Status; when several keys are wrong the one earliest in the file wins, so
// the message a user sees does not depend on TOML++'s map order.
#include "core/config/load.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/crypto.h"
#include "core/base/strings.h"
#include "core/base/toml_reader.h"
#include "core/config/config.h"
#include "core/config/config_schema.h"
#include "core/config/mounts.h"
#include "core/config/env.h"
#include "core/config/loss_pattern.h"

namespace pilot {
namespace {

using config_internal::FieldPtr;
using config_internal::FindKey;
using config_internal::KeysOf;
using config_internal::KeySpec;
using config_internal::Origins;
using config_internal::Schema;
using config_internal::SectionNames;
using config_internal::StringKind;

// A config is a page of text; anything bigger is not one (and is not read
// whole into memory by the submit-time check).
constexpr size_t kMaxConfigBytes = 1 << 20;

// A value as pilot.toml's messages name it: its type and a scalar's value.
std::string ValueName(const toml::node& n) { return TomlTypeName(n, TomlNaming::kTypeAndValue); }

// TOML++'s descriptions may quote the offending bytes; keep messages printable.
std::string Printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\n' || c == '\t') {
      out += ' ';
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// Why `v` is not a caching-allocator setting ("" when it is one, or empty).
// Unknown keys are refused: torch skips them silently, so a typo would run
// the pilot with settings other than the ones written.
std::string AllocConfProblem(const std::string& v) {
  static const char* const kBool[] = {
      "expandable_segments", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
      "pinned_use_background_threads", "graph_capture_record_stream_reuse"};
  static const char* const kOther[] = {"max_split_size_mb",
                                       "max_non_split_rounding_mb",
                                       "roundup_power2_divisions",
                                       "garbage_collection_threshold",
                                       "backend",
                                       "pinned_num_register_threads",
                                       "pinned_reserve_segment_size_mb",
                                       "per_process_memory_fraction"};
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= v.size(); ++i) {
    const char ch = i < v.size() ? v[i] : ',';
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ' ' || ch == '\t' || depth < 0) return "unexpected character";
    if (ch != ',' || depth > 0) continue;
    const std::string item = v.substr(start, i - start);
    start = i + 1;
    if (v.empty()) return "";
    const size_t colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      return "\"" + item + "\" is not key:value";
    }
    const std::string key = item.substr(0, colon), value = item.substr(colon + 1);
    bool known = false;
    for (const char* k : kBool) {
      if (key != k) continue;
      if (value != "True" && value != "False") return key + " must be True or False";
      known = true;
    }
    for (const char* k : kOther) known = known || key == k;
    if (!known) return "unknown allocator setting \"" + key + "\"";
  }
  if (depth != 0) return "unbalanced '['";
  return "";
}

// A container image given as a file rather than a registry reference.
bool IsLocalImage(std::string_view image) {
  return StartsWith(image, "/") || StartsWith(image, ".") || StartsWith(image, "$") ||
         StartsWith(image, "~") || EndsWith(image, ".sqsh") || EndsWith(image, ".sif") ||
         EndsWith(image, ".squashfs");
}

std::string QuotedChoices(const std::vector<std::string>& choices) {
  std::vector<std::string> q;
  for (const std::string& c : choices) q.push_back(Quote(c));
  return Join(q, ", ");
}

std::string IntRange(const KeySpec& k) {
  const bool open_top =
      k.ihi == std::numeric_limits<int>::max() || k.ihi == std::numeric_limits<int64_t>::max();
  if (open_top) return "must be >= " + std::to_string(k.ilo);
  return "must be between " + std::to_string(k.ilo) + " and " + std::to_string(k.ihi);
}

std::string DoubleRange(const KeySpec& k) {
  return std::string("must be ") + (k.dlo_open ? "> " : ">= ") + FormatDouble(k.dlo) + " and " +
         (k.dhi_open ? "< " : "<= ") + FormatDouble(k.dhi);
}

class Loader {
 public:
  Loader(const std::string& path, const LoadOptions& opts) : opts_(opts) {
    origins_.file = path;
    env_ = opts.env ? opts.env : ProcessEnv();
  }

  Result<Config> Run(const std::string& text);

 private:
  // Records a problem; the earliest in the file is reported, then --set ones.
  void ProblemAt(int line, Status s, bool from_override = false);
  // A problem with the value of key `name` (given at `line` or by --set).
  Status Fail(const std::string& name, int line, const std::string& detail,
              const std::string& hint = {});
  std::string At(int line) const { return origins_.file + ":" + std::to_string(line); }

  Status ApplyOverride(toml::table& root, const std::string& text);
  void Walk(const toml::table& root, Config& c);
  void Assign(const KeySpec& spec, const toml::node& node, int line, Config& c);
  void CheckString(const KeySpec& spec, std::string& v, int line);
  std::string BaseDir() const;

  const LoadOptions& opts_;
  EnvLookup env_;
  Origins origins_;
  // (from_override, line, order) -> status; the smallest wins.
  std::vector<std::pair<std::tuple<bool, int, size_t>, Status>> problems_;
};

void Loader::ProblemAt(int line, Status s, bool from_override) {
  problems_.push_back({{from_override, line, problems_.size()}, std::move(s)});
}

Status Loader::Fail(const std::string& name, int line, const std::string& detail,
                    const std::string& hint) {
  auto o = origins_.overrides.find(name);
  const bool from_override = o != origins_.overrides.end();
  Status s = Status::Invalid(from_override ? "--set " + o->second : At(line) + ": " + name, detail);
  if (!hint.empty()) s = s.WithHint(hint);
  ProblemAt(line, s, from_override);
  return s;
}

std::string Loader::BaseDir() const {
  std::filesystem::path base = opts_.base_dir;
  if (base.empty()) {
    base = std::filesystem::path(origins_.file).parent_path();
    if (base.empty()) base = ".";
  }
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(base, ec);
  if (ec) return base.lexically_normal().string();
  return abs.lexically_normal().string();
}

Status Loader::ApplyOverride(toml::table& root, const std::string& text) {
  const std::string what = "--set " + text;
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return Status::Invalid(what, "expected section.key=value");
  }
  const std::string name(Trim(std::string_view(text).substr(0, eq)));
  const std::string value(Trim(std::string_view(text).substr(eq + 1)));
  const size_t dot = name.find('.');
  if (dot == std::string::npos || name.find('.', dot + 1) != std::string::npos) {
    return Status::Invalid(what, "expected section.key=value");
  }
  const std::string section = name.substr(0, dot);
  const std::string key = name.substr(dot + 1);
  const KeySpec* spec = FindKey(section, key);
  if (spec == nullptr) {
    Status s = Status::Invalid(what, "unknown key " + name);
    if (auto m = ClosestMatch(name, KnownConfigKeys())) {
      s = s.WithHint("did you mean " + *m + "?");
    }
    return s;
  }
  // The value is TOML ("12", "true", "[\"a\", \"b\"]", "\"x\""); anything
  // that is not a single TOML value is taken as a bare string, and so is
  // every unquoted value of a string key (--set model.kind=llama).
  const bool quoted = !value.empty() && (value[0] == '"' || value[0] == '\'');
  TomlSyntaxError not_toml;
  std::optional<toml::table> parsed = ParseToml("v = " + value, "", &not_toml);
  toml::table* sec = nullptr;
  if (toml::node* existing = root.get(section)) {
    sec = existing->as_table();
    if (sec == nullptr) return Status::Ok();  // the file's own error is reported
  } else {
    sec = root.insert_or_assign(section, toml::table{}).first->second.as_table();
  }
  Config probe;
  const bool is_string_key = std::holds_alternative<std::string*>(spec->field(probe));
  if (parsed && parsed->size() == 1 && parsed->contains("v") && (quoted || !is_string_key)) {
    sec->insert_or_assign(key, *parsed->get("v"));
  } else {
    sec->insert_or_assign(key, value);
  }
  origins_.overrides[name] = text;
  return Status::Ok();
}

void Loader::Walk(const toml::table& root, Config& c) {
  for (auto&& [k, node] : root) {
    const std::string section(k.str());
    const int line = TomlLine(k.source()) > 0 ? TomlLine(k.source()) : TomlLine(node.source());
    const auto& sections = SectionNames();
    if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
      if (!node.is_table()) {
        // A key outside any section: say where it belongs if it is known.
        Status s = Status::Invalid(At(line) + ": " + section,
                                   "keys must be inside a section such as [run]");
        for (const KeySpec& spec : Schema()) {
          if (section == spec.key) {
            s = s.WithHint("did you mean " + spec.Name() + " (under [" + spec.section + "])?");
            break;
          }
        }
        ProblemAt(line, s);
        continue;
      }
      Status s = Status::Invalid(At(line) + ": [" + section + "]", "unknown section");
      if (auto m = ClosestMatch(section, sections)) {
        s = s.WithHint("did you mean [" + *m + "]?");
      } else {
        s = s.WithHint("sections are [" + Join(sections, "], [") + "]");
      }
      ProblemAt(line, s);
      continue;
    }
    const toml::table* tbl = node.as_table();
    if (tbl == nullptr) {
      ProblemAt(line, Status::Invalid(At(line) + ": " + section, "must be a table ([" + section +
                                                                     "]), got " + ValueName(node)));
      continue;
    }
    origins_.section_lines[section] = TomlLine(tbl->source()) > 0 ? TomlLine(tbl->source()) : line;
    for (auto&& [kk, value] : *tbl) {
      const std::string key(kk.str());
      const std::string name = section + "." + key;
      const KeySpec* spec = FindKey(section, key);
      const bool from_override = origins_.overrides.count(name) > 0;
      const int kline = from_override ? 0 : TomlLine(kk.source());
      if (spec == nullptr) {
        Status s = Status::Invalid(At(kline) + ": " + name, "unknown key");
        const std::vector<std::string> keys = KeysOf(section);
        if (auto m = ClosestMatch(key, keys)) {
          s = s.WithHint("did you mean " + section + "." + *m + "?");
        } else {
          s = s.WithHint("keys of [" + section + "]: " + Join(keys, ", "));
        }
        ProblemAt(kline, s);
        continue;
      }
      c.sources[name] = KeySource{kline, false, from_override};
      Assign(*spec, value, kline, c);
    }
  }
}

void Loader::Assign(const KeySpec& spec, const toml::node& node, int line, Config& c) {
  const std::string name = spec.Name();
  auto fail = [&](const std::string& detail, int at = -1) {
    Fail(name, at >= 0 ? at : line, detail);
  };
  FieldPtr field = spec.field(c);
  if (auto* p = std::get_if<std::string*>(&field)) {
    if (!node.is_string()) {
      fail("must be a string, got " + ValueName(node));
      return;
    }
    **p = node.as_string()->get();
    if (!spec.choices.empty() &&
        std::find(spec.choices.begin(), spec.choices.end(), **p) == spec.choices.end()) {
      const auto m = ClosestMatch(**p, spec.choices);
      Fail(name, line, "must be one of " + QuotedChoices(spec.choices) + "; got " + Quote(**p),
           m ? "did you mean " + Quote(*m) + "?" : "");
      return;
    }
    CheckString(spec, **p, line);
  } else if (std::get_if<int*>(&field) || std::get_if<int64_t*>(&field)) {
    int64_t v = 0;
    if (node.is_integer()) {
      v = node.as_integer()->get();
    } else if (spec.float_ok && node.is_floating_point()) {
      const double d = node.as_floating_point()->get();
      if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(spec.ilo) ||
          d > static_cast<double>(spec.ihi)) {
        fail(IntRange(spec) + " (a whole number), got " + FormatDouble(d));
        return;
      }
      v = static_cast<int64_t>(d);
    } else {
      fail("must be an integer, got " + ValueName(node));
      return;
    }
    if (v < spec.ilo || v > spec.ihi) {
      fail(IntRange(spec) + ", got " + std::to_string(v));
      return;
    }
    if (auto* pi = std::get_if<int*>(&field)) {
      **pi = static_cast<int>(v);
    } else {
      **std::get_if<int64_t*>(&field) = v;
    }
  } else if (auto* pd = std::get_if<double*>(&field)) {
    const std::optional<double> number = TomlNumber(node);
    if (!number) {
      fail("must be a number, got " + ValueName(node));
      return;
    }
    const double v = *number;
    const bool below = spec.dlo_open ? !(v > spec.dlo) : !(v >= spec.dlo);
    const bool above = spec.dhi_open ? !(v < spec.dhi) : !(v <= spec.dhi);
    if (!std::isfinite(v) || below || above) {
      fail(DoubleRange(spec) + ", got " + FormatDouble(v));
      return;
    }
    **pd = v;
  } else if (auto* pb = std::get_if<bool*>(&field)) {
    if (!node.is_boolean()) {
      fail("must be true or false, got " + ValueName(node));
      return;
    }
    **pb = node.as_boolean()->get();
  } else if (auto* pl = std::get_if<std::vector<std::string>*>(&field)) {
    const toml::array* arr = node.as_array();
    if (arr == nullptr) {
      fail("must be an array of strings, got " + ValueName(node));
      return;
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < arr->size(); ++i) {
      const toml::node& e = *arr->get(i);
      const int eline = line == 0 ? 0 : TomlLine(e.source());
      if (!e.is_string() || Trim(e.as_string()->get()).empty()) {
        fail("element " + std::to_string(i + 1) + " must be a non-empty string, got " + ValueName(e),
             eline);
        return;
      }
      const std::string item = e.as_string()->get();
      if (!spec.argv && std::find(out.begin(), out.end(), item) != out.end()) {
        fail("element " + std::to_string(i + 1) + " repeats " + Quote(item), eline);
        return;
      }
      if (item.find('\0') != std::string::npos) {
        fail("element " + std::to_string(i + 1) + " contains a NUL character", eline);
        return;
      }
      if (spec.kind == StringKind::kPinPath) {
        if (const std::string why = PinPathProblem(item); !why.empty()) {
          Fail(name, eline, "element " + std::to_string(i + 1) + " " + Quote(item) + " " + why,
               "name files and folders below program.workdir, e.g. [\"train.py\", \"configs/\"]");
          return;
        }
      } else if (spec.kind == StringKind::kHubRef) {
        if (Result<HubRef> ref = ParseHubRef(item); !ref.ok()) {
          Fail(name, eline, "element " + std::to_string(i + 1) + ": " + ref.status().Message(),
               "e.g. [\"gpt2\", \"openai-community/gpt2@main\"]");
          return;
        }
      } else if (spec.kind == StringKind::kMount) {
        Result<Mount> m = ParseMount(item);
        if (!m.ok()) {
          fail("element " + std::to_string(i + 1) + ": " + m.status().detail(), eline);
          return;
        }
      }
      out.push_back(item);
    }
    if (out.empty() && !spec.may_be_empty) {
      fail(spec.argv                       ? "must name the program to run, e.g. [\"python3\", \"train.py\"]"
           : spec.kind == StringKind::kPlain ? "must list at least one GPU type"
                                             : "must list at least one entry (or leave the key out)");
      return;
    }
    **pl = std::move(out);
  } else if (auto* pm = std::get_if<std::map<std::string, std::string>*>(&field)) {
    const toml::table* tbl = node.as_table();
    if (tbl == nullptr) {
      fail("must be a table of strings, e.g. { NAME = \"value\" }, got " + ValueName(node));
      return;
    }
    std::map<std::string, std::string> out;
    for (auto&& [kk, value] : *tbl) {
      const std::string var(kk.str());
      const int eline = line == 0 ? 0 : TomlLine(kk.source());
      const bool name_ok = !var.empty() && !(var[0] >= '0' && var[0] <= '9') &&
                           std::all_of(var.begin(), var.end(), [](char ch) {
                             return ch == '_' || (ch >= 'A' && ch <= 'Z') ||
                                    (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
                           });
      if (!name_ok) {
        fail(Quote(var) + " is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", eline);
        return;
      }
      if (!value.is_string() || value.as_string()->get().find('\0') != std::string::npos) {
        fail(var + " must be a string without NUL characters, got " + ValueName(value), eline);
        return;
      }
      out[var] = value.as_string()->get();
    }
    **pm = std::move(out);
  }
}

void Loader::CheckString(const KeySpec& spec, std::string& v, int line) {
  const std::string name = spec.Name();
  auto fail = [&](const std::string& detail, const std::string& hint = {}) {
    Fail(name, line, detail, hint);
  };
  switch (spec.kind) {
    case StringKind::kPlain:
    case StringKind::kPinPath:  // array kinds, checked per element
    case StringKind::kHubRef:
    case StringKind::kMount:
      return;
    case StringKind::kName:
      if (!IsSimpleName(v)) {
        fail("must be 1 to 64 characters of A-Z a-z 0-9 . _ -, got " + Quote(v));
      }
      return;
    case StringKind::kRegex: {
      if (v.empty()) return;
      // The engine the supervisor matches with (RE2), so that what passes
      // here compiles there.
      const Status s = LossPattern(v).Check();
      if (!s.ok()) fail(s.detail(), s.hint());
      return;
    }
    case StringKind::kAllocConf: {
      std::string why = AllocConfProblem(v);
      if (!why.empty()) {
        fail(why + " in " + Quote(v),
             "write key:value pairs separated by commas, e.g. "
             "\"expandable_segments:True,max_split_size_mb:512\"");
      }
      return;
    }
    case StringKind::kSha256: {
      if (v.empty()) return;
      std::string lower = AsciiLower(v);
      if (!IsSha256Hex(lower)) {
        fail("must be 64 hex characters (a sha256 digest), got " + Quote(v) + " (" +
             std::to_string(v.size()) + " characters)");
        return;
      }
      v = lower;
      return;
    }
    case StringKind::kImage:
      if (v.empty()) return;
      if (!IsLocalImage(v)) {
        for (unsigned char ch : v) {
          if (ch <= 0x20 || ch == 0x7f) {
            fail("must be a registry reference or an image file, got " + Quote(v));
            return;
          }
        }
        const size_t at = v.find('@');
        if (at != std::string::npos) {
          const std::string digest = v.substr(at + 1);
          if (!StartsWith(digest, "sha256:") || !IsSha256Hex(digest.substr(7))) {
            fail("the digest after '@' must be sha256: and 64 lower-case hex characters, got " +
                 Quote(digest));
          }
        }
        return;
      }
      [[fallthrough]];
    case StringKind::kPath: {
      if (v.empty()) return;
      if (StartsWith(v, "~")) {
        fail("'~' is not expanded in " + Quote(v), "write $HOME instead of ~");
        return;
      }
      const VariableLookup* lookup = opts_.expand_paths ? &env_ : nullptr;
      Result<std::string> expanded = ExpandVariables(v, lookup);
      if (!expanded.ok()) {
        fail(expanded.status().detail(), expanded.status().hint());
        return;
      }
      if (!opts_.expand_paths) return;
      if (expanded->empty()) {
        fail("is empty after expanding variables");
        return;
      }
      std::filesystem::path p(*expanded);
      if (p.is_relative()) p = std::filesystem::path(BaseDir()) / p;
      v = p.lexically_normal().string();
      return;
    }
  }
}

Result<Config> Loader::Run(const std::string& text) {
  Config c;
  c.path = origins_.file;
  for (const std::string& key : KnownConfigKeys()) c.sources[key] = KeySource{};
  if (text.size() > kMaxConfigBytes) {
    return Status::Invalid(At(1), "file is too large: a config has at most " +
                                      std::to_string(kMaxConfigBytes) + " bytes");
  }
  if (Trim(text).empty()) {
    return Status::Invalid(At(1), "file is empty")
        .WithHint("a config needs at least [run] name, seq_len and micro_batch; see pilot.toml(5)");
  }
  c.sha256 = Sha256Hex(text);
  TomlSyntaxError e;
  std::optional<toml::table> parsed = ParseToml(text, origins_.file, &e);
  if (!parsed) {
    const int line = std::max(1, e.line);
    Status s = Status::Invalid(At(line) + ": syntax error", Printable(e.description));
    if (e.description.find("redefine") != std::string::npos) {
      s = s.WithHint("each key and each [section] may appear only once");
    } else if (e.description.find("determine value type") != std::string::npos) {
      s = s.WithHint("strings are written in quotes (kind = \"gpt\"); see pilot.toml(5)");
    }
    return s;
  }
  toml::table& root = *parsed;
  for (const std::string& o : opts_.overrides) {
    Status s = ApplyOverride(root, o);
    if (!s.ok()) ProblemAt(0, s, /*from_override=*/true);
  }
  Walk(root, c);
  // Required keys, reported at their section's header.
  for (const KeySpec& spec : Schema()) {
    if (!spec.required || !c.sources[spec.Name()].is_default) continue;
    auto it = origins_.section_lines.find(spec.section);
    const int line = it != origins_.section_lines.end() && it->second > 0 ? it->second : 1;
    std::string detail = "required key is missing";
    if (it == origins_.section_lines.end()) {
      detail += std::string(" (there is no [") + spec.section + "] section)";
    }
    ProblemAt(line, Status::Invalid(At(line) + ": " + spec.Name(), detail));
  }
  if (!problems_.empty()) {
    auto first = std::min_element(problems_.begin(), problems_.end(),
                                  [](const auto& a, const auto& b) { return a.first < b.first; });
    return first->second;
  }
  PILOT_RETURN_IF_ERROR(config_internal::ResolveAndValidate(c, origins_));
  return c;
}

}  // namespace

namespace config_internal {

std::string Origins::Where(const Config& c, const std::string& key) const {
  if (auto o = overrides.find(key); o != overrides.end()) return "--set " + o->second;
  int line = 0;
  if (auto s = c.sources.find(key); s != c.sources.end()) line = s->second.line;
  if (line <= 0) {
    const std::string section = key.substr(0, key.find('.'));
    auto it = section_lines.find(section);
    line = it != section_lines.end() && it->second > 0 ? it->second : 1;
  }
  return file + ":" + std::to_string(line) + ": " + key;
}

std::string Origins::Blame(const Config& c, std::initializer_list<const char*> keys) const {
  for (const char* k : keys) {
    auto s = c.sources.find(k);
    if (s != c.sources.end() && !s->second.is_default) return Where(c, k);
  }
  return Where(c, *keys.begin());
}

}  // namespace config_internal

Result<Config> ParseConfig(const std::string& text, const std::string& path,
                           const LoadOptions& opts) {
  try {
    return Loader(path, opts).Run(text);
  } catch (const std::exception& e) {
    // TOML++ and the standard library may throw (allocation, filesystem);
    // a config loader must not take its caller down with it.
    return Status::Internal(path, std::string("unexpected error while loading: ") + e.what());
  }
}

Result<Config> LoadConfig(const std::string& path, const LoadOptions& opts) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) {
    return Status::NotFound(path, "no such file");
  }
  if (std::filesystem::is_directory(st)) return Status::IoError(path, "is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(path, std::strerror(errno));
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes) break;  // reported by ParseConfig
  }
  if (in.bad()) return Status::IoError(path, std::strerror(errno));
  return ParseConfig(text, path, opts);
}

}  // namespace pilot
