#include "supervisor/program/metrics.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "core/base/utf8.h"

namespace pilot::supervisor {
namespace {

// Replaces the bare tokens NaN, Infinity and -Infinity outside strings by
// strings nlohmann's parser accepts ("NaN", ...).
std::string QuoteNonFinite(std::string_view line) {
  std::string out;
  out.reserve(line.size() + 8);
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) {
        out += line[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (std::string_view tok : {"-Infinity", "Infinity", "NaN"}) {
      if (line.substr(i, tok.size()) == tok) {
        out += "\"" + std::string(tok) + "\"";
        i += tok.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

std::optional<double> NumberOrNonFinite(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

void Int(const nlohmann::json& j, const char* key, std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it != j.end() && it->is_number_integer()) *out = it->get<int64_t>();
  else if (it != j.end() && it->is_number_float()) {
    const double d = it->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) *out = static_cast<int64_t>(d);
  }
}

void NumMetrics(const nlohmann::json& j, const char* key, std::optional<double>* out) {
  auto it = j.find(key);
  if (it != j.end()) *out = NumberOrNonFinite(*it);
}

// The optional fields, read by these tables alone, so that MetricFieldNames
// names every field the reader knows.
struct IntField {
  const char* name;
  std::optional<int64_t> MetricRecord::*member;
};
constexpr IntField kIntFields[] = {
    {"tokens", &MetricRecord::tokens},
    {"seq_len", &MetricRecord::seq_len},
    {"micro_batch", &MetricRecord::micro_batch},
    {"peak_allocated_bytes", &MetricRecord::peak_allocated_bytes},
    {"peak_reserved_bytes", &MetricRecord::peak_reserved_bytes},
    {"device_free_bytes", &MetricRecord::device_free_bytes},
    {"device_total_bytes", &MetricRecord::device_total_bytes},
    {"alloc_retries", &MetricRecord::alloc_retries},
    {"ooms", &MetricRecord::ooms},
    {"peak_rss_bytes", &MetricRecord::peak_rss_bytes},
    {"params", &MetricRecord::params},
    {"param_bytes", &MetricRecord::param_bytes},
    {"grad_bytes", &MetricRecord::grad_bytes},
    {"optimizer_state_bytes", &MetricRecord::optimizer_state_bytes},
};
struct NumField {
  const char* name;
  std::optional<double> MetricRecord::*member;
};
constexpr NumField kNumFields[] = {
    {"lr", &MetricRecord::lr},
    {"grad_norm", &MetricRecord::grad_norm},
    {"eval_loss", &MetricRecord::eval_loss},
    {"data_wait_ms", &MetricRecord::data_wait_ms},
    {"step_ms", &MetricRecord::step_ms},
    {"probe_ms", &MetricRecord::probe_ms},
};

}  // namespace

MemoryFigures MemoryFiguresOf(const MetricRecord& r) {
  MemoryFigures m;
  m.device = r.device;
  m.step = r.step;
  m.peak_allocated_bytes = r.peak_allocated_bytes;
  m.peak_reserved_bytes = r.peak_reserved_bytes;
  if (r.device_total_bytes && r.device_free_bytes) {
    m.device_used_bytes = *r.device_total_bytes - *r.device_free_bytes;
  }
  m.device_total_bytes = r.device_total_bytes;
  m.alloc_retries = r.alloc_retries;
  m.ooms = r.ooms;
  m.process_peak_rss_bytes = r.peak_rss_bytes;
  return m;
}

const std::vector<std::string>& MetricFieldNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"step", "loss", "rank", "device", "autocast", "autocast_device",
                                  "param_dtype", "grad_scaler"};
    for (const IntField& f : kIntFields) n.emplace_back(f.name);
    for (const NumField& f : kNumFields) n.emplace_back(f.name);
    return n;
  }();
  return names;
}

namespace {

// A short string field (dtype and device names), cut to `max` bytes.
std::string ShortString(const Json& j, const char* key, size_t max = 24) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return std::string(Utf8Head(it->get<std::string>(), max));
}

Result<int> RankOfMetrics(const Json& j, std::optional<int>* out) {
  if (!j.contains("rank")) return 0;
  // A rank that is not one is refused, never read as "absent" (which
  // would credit the line to whichever process wrote it).
  std::optional<int64_t> rank;
  Int(j, "rank", &rank);
  if (!rank || *rank < 0 || *rank >= int64_t{1} << 20) {
    return Status::Invalid("metrics record", "\"rank\" must be an integer 0..1048575");
  }
  *out = static_cast<int>(*rank);
  return 0;
}

Result<MetricRecord> MetricFromJson(const Json& j);

// A detail value in clear: strings as they are, numbers and the rest as JSON.
std::string DetailText(const Json& details) {
  std::string out;
  for (auto it = details.begin(); it != details.end(); ++it) {
    if (it.key() == "digest") continue;
    if (!out.empty()) out += ", ";
    out += it.key() + " " + (it->is_string() ? it->get<std::string>() : DumpJson(*it));
  }
  return std::string(Utf8Head(out, 160));
}

// A package's name, a version, or an extension's "distribution version":
// letters, digits and . _ + ! - (and the one space of the last), never
// empty where a name is meant.
bool PackageText(std::string_view s, size_t max, bool space) {
  if (s.size() > max) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '+' || c == '!' || c == '-' || (space && c == ' ');
    if (!ok) return false;
  }
  return true;
}

// The entries of object `key` that read as package names and versions, up
// to `max` in all in `out`.
void Entries(const Json& j, const char* key, size_t max, bool extension,
             std::map<std::string, std::string>* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return;
  for (auto e = it->begin(); e != it->end() && out->size() < max; ++e) {
    if (!e->is_string() || e.key().empty() || !PackageText(e.key(), 128, false)) continue;
    const std::string& value = e->get_ref<const std::string&>();
    if (!PackageText(value, extension ? 200 : 64, extension)) continue;
    out->emplace(e.key(), value);
  }
}

Result<ProbeLine> OtherLine(const Json& j, const std::string& kind) {
  ProbeLine out;
  std::optional<int> rank;
  if (Result<int> r = RankOfMetrics(j, &rank); !r.ok()) return r.status();
  if (kind == "env") {
    EnvLine e;
    e.rank = rank;
    e.env.python = ShortString(j, "python", 40);
    e.env.torch = ShortString(j, "torch", 40);
    e.env.cuda = ShortString(j, "cuda", 40);
    e.env.hip = ShortString(j, "hip", 40);
    e.env.nccl = ShortString(j, "nccl", 40);
    e.env.cudnn = ShortString(j, "cudnn", 40);
    e.env.gpu = ShortString(j, "gpu", 80);
    e.env.gpu_capability = ShortString(j, "gpu_capability", 16);
    std::optional<int64_t> count;
    Int(j, "gpu_count", &count);
    if (count && *count >= 0 && *count < (1 << 20)) e.env.gpu_count = *count;
    out.env = std::move(e);
    return out;
  }
  if (kind == "packages") {
    PackagesLine p;
    p.rank = rank;
    Entries(j, "distributions", kMaxDistributions, false, &p.distributions);
    Entries(j, "extensions", kMaxExtensions, true, &p.extensions);
    out.packages = std::move(p);
    return out;
  }
  if (kind != "state") return Status::Invalid("metrics record", "unknown \"kind\": " + std::string(Utf8Head(kind, 40)));
  StateLine st;
  st.rank = rank;
  st.when = ShortString(j, "when", 16);
  if (st.when != "saved" && st.when != "restored") {
    return Status::Invalid("metrics record", "a state line's \"when\" must be \"saved\" or \"restored\"");
  }
  std::optional<int64_t> step;
  Int(j, "step", &step);
  if (!step || *step < 0) return Status::Invalid("metrics record", "a state line's \"step\" must be an integer >= 0");
  st.step = *step;
  auto comps = j.find("components");
  if (comps == j.end() || !comps->is_object()) {
    return Status::Invalid("metrics record", "a state line needs \"components\", an object");
  }
  for (auto it = comps->begin(); it != comps->end() && st.components.size() < 64; ++it) {
    StateComponent c;
    if (it->is_object()) {
      c.digest = ShortString(*it, "digest", 64);
      c.detail = DetailText(*it);
    } else if (it->is_string()) {
      c.digest = std::string(Utf8Head(it->get<std::string>(), 64));
    }
    st.components[std::string(Utf8Head(it.key(), 64))] = std::move(c);
  }
  out.state = std::move(st);
  return out;
}

}  // namespace

Result<ProbeLine> ParseProbeLine(std::string_view line) {
  Result<Json> parsed = ParseJsonText(QuoteNonFinite(line), "");
  if (!parsed.ok()) return Status::Invalid("metrics record", parsed.status().detail());
  const Json& j = *parsed;
  if (!j.is_object()) return Status::Invalid("metrics record", "not a JSON object");
  if (auto kind = j.find("kind"); kind != j.end()) {
    if (!kind->is_string()) return Status::Invalid("metrics record", "\"kind\" must be a string");
    return OtherLine(j, kind->get<std::string>());
  }
  Result<MetricRecord> r = MetricFromJson(j);
  if (!r.ok()) return r.status();
  ProbeLine out;
  out.record = std::move(r).value();
  return out;
}

Result<MetricRecord> ParseMetricLine(std::string_view line) {
  Result<Json> parsed = ParseJsonText(QuoteNonFinite(line), "");
  if (!parsed.ok()) return Status::Invalid("metrics record", parsed.status().detail());
  if (!parsed->is_object()) return Status::Invalid("metrics record", "not a JSON object");
  return MetricFromJson(*parsed);
}

namespace {

Result<MetricRecord> MetricFromJson(const Json& j) {
  MetricRecord r;
  auto step = j.find("step");
  if (step == j.end()) return Status::Invalid("metrics record", "\"step\" is missing");
  // A whole float (7.0, what a Python float counter writes) is that step.
  std::optional<int64_t> number;
  if (step->is_number_integer()) {
    number = step->get<int64_t>();
  } else if (step->is_number_float()) {
    const double d = step->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) number = static_cast<int64_t>(d);
  }
  if (!number || *number < 1) {
    return Status::Invalid("metrics record", "\"step\" must be an integer >= 1");
  }
  r.step = *number;
  auto loss = j.find("loss");
  if (loss == j.end()) return Status::Invalid("metrics record", "\"loss\" is missing");
  std::optional<double> l = NumberOrNonFinite(*loss);
  if (!l) return Status::Invalid("metrics record", "\"loss\" must be a number");
  r.loss = *l;
  if (Result<int> rk = RankOfMetrics(j, &r.rank); !rk.ok()) return rk.status();
  if (auto d = j.find("device"); d != j.end() && d->is_string()) {
    r.device = d->get<std::string>().substr(0, 16);
  }
  for (const IntField& f : kIntFields) Int(j, f.name, &(r.*f.member));
  for (const NumField& f : kNumFields) NumMetrics(j, f.name, &(r.*f.member));
  r.autocast = ShortString(j, "autocast");
  r.autocast_device = ShortString(j, "autocast_device");
  r.param_dtype = ShortString(j, "param_dtype");
  if (auto g = j.find("grad_scaler"); g != j.end() && g->is_boolean()) r.grad_scaler = g->get<bool>();
  return r;
}

}  // namespace

std::optional<double> MatchLoss(const LossPattern& pattern, std::string_view line) {
  if (line.size() >= kMaxLossLine) return std::nullopt;
  const std::optional<std::string_view> group = pattern.FirstGroup(line);
  if (!group) return std::nullopt;
  const std::string text(*group);
  const std::string lower = AsciiLower(text);
  if (lower == "nan" || lower == "-nan") return std::numeric_limits<double>::quiet_NaN();
  if (lower == "inf" || lower == "infinity") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  // The whole group, a NUL byte in it included.
  if (end == text.c_str() || end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

void LineBuffer::Append(const char* data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const char c = data[i];
    if (skipping_) {
      if (c == '\n') skipping_ = false;
      continue;
    }
    buf_ += c;
    if (c == '\n') {
      line_ = buf_.size();
    } else if (buf_.size() - line_ > kMaxMetricLine) {
      // Only the line being cut goes: the complete lines before it stay.
      buf_.resize(line_);
      skipping_ = true;
      ++overlong_;
    }
  }
}

std::optional<std::string> LineBuffer::Next() {
  const size_t nl = buf_.find('\n', start_);
  if (nl == std::string::npos) {
    if (start_ > 0) {
      buf_.erase(0, start_);
      line_ -= start_;
      start_ = 0;
    }
    return std::nullopt;
  }
  std::string line = buf_.substr(start_, nl - start_);
  start_ = nl + 1;
  if (start_ > 1 << 16) {
    buf_.erase(0, start_);
    line_ -= start_;
    start_ = 0;
  }
  return line;
}

std::optional<std::string> LineBuffer::Rest() {
  if (start_ >= buf_.size()) return std::nullopt;
  std::string line = buf_.substr(start_);
  buf_.clear();
  start_ = 0;
  line_ = 0;
  return line;
}

}  // namespace pilot::supervisor
