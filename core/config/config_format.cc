// The resolved config for machines (JSON) and for people (a table in which
// every value says whether it came from the file, a --set or a default).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/config/config.h"
#include "core/config/load.h"
#include "core/config/config_schema.h"
#include "core/base/json_util.h"
#include "core/base/strings.h"

namespace pilot {
namespace {

using config_internal::FieldPtr;
using config_internal::KeySpec;
using config_internal::Schema;
using config_internal::SectionNames;

FieldPtr Field(const KeySpec& k, const Config& c) {
  // The schema's accessors take a mutable Config; nothing is written here.
  return k.field(const_cast<Config&>(c));
}

nlohmann::ordered_json ValueJson(const FieldPtr& f) {
  return std::visit([](auto* p) { return nlohmann::ordered_json(*p); }, f);
}

// A value written as TOML would write it.
std::string ValueText(const FieldPtr& f) {
  struct Visitor {
    std::string operator()(std::string* p) const { return Quote(*p); }
    std::string operator()(int* p) const { return std::to_string(*p); }
    std::string operator()(int64_t* p) const { return std::to_string(*p); }
    std::string operator()(double* p) const {
      std::string s = FormatDouble(*p);
      // Keep it a TOML float: "30" would read back as an integer.
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(bool* p) const { return *p ? "true" : "false"; }
    std::string operator()(std::vector<std::string>* p) const {
      std::vector<std::string> q;
      for (const std::string& s : *p) q.push_back(Quote(s));
      return "[" + Join(q, ", ") + "]";
    }
    std::string operator()(std::map<std::string, std::string>* p) const {
      std::vector<std::string> q;
      for (const auto& [k, v] : *p) q.push_back(k + " = " + Quote(v));
      return "{ " + Join(q, ", ") + (q.empty() ? "}" : " }");
    }
  };
  return std::visit(Visitor{}, f);
}

// What a pilot of a user's program reads: [run], [container], [program],
// [hardware], and of the builtin's sections the keys that keep their
// meaning (the program chooses the rest: its optimizer, precision, shape).
bool UsedForAProgram(const KeySpec& k) {
  const std::string section = k.section;
  if (section == "run" || section == "container" || section == "program" || section == "hardware") return true;
  const std::vector<std::string>& kept = config_internal::KeysKeptForAProgram();
  return std::find(kept.begin(), kept.end(), k.Name()) != kept.end();
}

}  // namespace

std::string ConfigToJson(const Config& c) {
  nlohmann::ordered_json j;
  j["path"] = c.path;
  j["sha256"] = c.sha256;
  j["binding"] = c.ShapeIsBinding();
  for (const std::string& section : SectionNames()) j[section] = nlohmann::ordered_json::object();
  for (const KeySpec& k : Schema()) j[k.section][k.key] = ValueJson(Field(k, c));
  nlohmann::ordered_json defaults = nlohmann::ordered_json::array();
  for (const KeySpec& k : Schema()) {
    auto it = c.sources.find(k.Name());
    if (it == c.sources.end() || it->second.is_default) defaults.push_back(k.Name());
  }
  j["defaults"] = defaults;
  return DumpJson(j, 2) + "\n";
}

std::string ConfigToTable(const Config& c) {
  std::ostringstream out;
  out << "config   " << c.path << "\n";
  out << "sha256   " << c.sha256 << "\n";
  if (c.IsProgram()) {
    // The program reports its own shape; the pilot checks it against [run].
    out << "program  " << Join(c.program.command, " ") << "\n";
    out << "shape    the program's, checked against run: seq_len " << c.run.seq_len
        << " x micro_batch " << c.run.micro_batch << "\n";
    // What the pilot will do with it.
    const bool bitwise = c.training.device == "cpu" && c.training.deterministic;
    out << "pilot    reference process: steps 1.." << c.training.steps << ", saving after step "
        << c.checkpoint.at_step << "; a fresh process resumes " << c.checkpoint.at_step + 1 << ".."
        << c.training.steps << ", losses compared "
        << (bitwise ? "bitwise" : "within eval.restore_tolerance " + FormatDouble(c.eval.restore_tolerance))
        << "; node stage: "
        << (c.parallel.nproc > 0 ? std::to_string(c.parallel.nproc) + " processes"
                                 : std::string("one process per GPU on each node (parallel.nproc = 0)"))
        << "\n";
  } else {
    out << "shape    seq_len " << c.training.seq_len << " x micro_batch " << c.training.micro_batch;
    if (c.ShapeIsBinding()) {
      out << " = run (binding)\n";
    } else {
      out << " < run " << c.run.seq_len << " x " << c.run.micro_batch << " (non-binding)\n";
    }
  }
  size_t width = 0;
  for (const KeySpec& k : Schema()) width = std::max(width, std::string(k.key).size());
  std::vector<std::string> values;
  size_t value_width = 0;
  for (const KeySpec& k : Schema()) {
    values.push_back(ValueText(Field(k, c)));
    value_width = std::max(value_width, std::min<size_t>(values.back().size(), 24));
  }
  std::string current;
  std::vector<std::string> unused;
  for (size_t i = 0; i < Schema().size(); ++i) {
    const KeySpec& k = Schema()[i];
    // [model] and [data] describe the builtin model only; of the others, a
    // program's pilot shows what it reads.
    if (c.IsProgram() && (std::string(k.section) == "model" || std::string(k.section) == "data")) continue;
    if (c.IsProgram() && !UsedForAProgram(k)) {
      unused.push_back(k.Name());  // never set: the loader refuses them with [program]
      continue;
    }
    if (current != k.section) {
      current = k.section;
      out << "\n[" << current << "]\n";
    }
    std::string note;
    auto it = c.sources.find(k.Name());
    if (it == c.sources.end() || it->second.is_default) {
      note = "(default)";
    } else if (it->second.from_override) {
      note = "(--set)";
    }
    std::string line = k.key;
    line.resize(width, ' ');
    line += " = " + values[i];
    if (!note.empty()) {
      if (values[i].size() < value_width) line.append(value_width - values[i].size(), ' ');
      line += "   " + note;
    }
    out << line << "\n";
  }
  if (!unused.empty()) {
    out << "\nnot used for a program (it chooses its own optimizer, precision and shape; the pilot\n"
           "reports what the program's probe saw):\n  "
        << Join(unused, ", ") << "\n";
  }
  return out.str();
}

}  // namespace pilot
