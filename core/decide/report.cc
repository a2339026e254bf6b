#include "core/decide/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "core/base/svg.h"

namespace pilot {
namespace {

using svg::Escape;

constexpr double kGiB = 1024.0 * 1024 * 1024;
const char* const kBlue = "#1f77b4";
const char* const kOrange = "#ff7f0e";
const char* const kGreen = "#2ca02c";
const char* const kRed = "#d62728";
const char* const kPurple = "#9467bd";
const char* const kBrown = "#8c564b";
const char* const kGrey = "#7f7f7f";
const char* const kOlive = "#bcbd22";

std::string Num(double v, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", d, v);
  return buf;
}

// A count for people: digits in groups of three ("135,642,738").
std::string Count(double v) {
  const bool negative = v < 0;
  std::string digits = Num(std::fabs(v), 0);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (negative ? "-" : "") + out;
}

// A parameter count for people: "1.30 B", "124.4 M", "812 K".
std::string Params(int64_t n) {
  const double v = static_cast<double>(n);
  if (v >= 1e9) return Num(v / 1e9, 2) + " B";
  if (v >= 1e6) return Num(v / 1e6, 1) + " M";
  if (v >= 1e3) return Num(v / 1e3, 0) + " K";
  return std::to_string(n);
}

// "+1.4%": how far `predicted` is from `measured`.
std::string Error(double predicted, double measured) {
  if (measured == 0) return "n/a";
  const double e = 100 * (predicted / measured - 1);
  return (e >= 0 ? "+" : "") + Num(e, 1) + "%";
}

std::string G(std::optional<int64_t> b) {
  return b ? FormatBytes(static_cast<double>(*b), ByteUnit::kGiB, 2) : "n/a";
}

double Gd(int64_t b) { return static_cast<double>(b) / kGiB; }

std::string Row(const std::string& k, const std::string& v) {
  return "<tr><th>" + Escape(k) + "</th><td>" + Escape(v) + "</td></tr>";
}

// A program's every step, as its probe reported it: the series a leak
// shows in (results.json's program.memory_steps).
std::string ProgramMemorySteps(const SingleStage& s, const ProgramInfo& p) {
  svg::Series alloc{"allocated (step peak)", kBlue, {}, true}, reserved{"reserved", kOrange, {}, true},
      rss{"process RSS peak", kGreen, {}, true};
  for (const StepMemory& m : p.memory_steps) {
    const double x = static_cast<double>(m.step);
    if (m.peak_allocated_bytes >= 0) alloc.points.push_back({x, Gd(m.peak_allocated_bytes)});
    if (m.peak_reserved_bytes >= 0) reserved.points.push_back({x, Gd(m.peak_reserved_bytes)});
    if (m.peak_rss_bytes >= 0) rss.points.push_back({x, Gd(m.peak_rss_bytes)});
  }
  std::vector<svg::Series> series;
  for (svg::Series* x : {&alloc, &reserved, &rss}) {
    if (!x->points.empty() && (s.device != "cpu" || x == &rss)) series.push_back(std::move(*x));
  }
  return svg::LineChart({"memory-steps", "Memory at every step of the reference process", "step", "GiB"},
                        series);
}

std::string MemorySteps(const SingleStage& s, const ProgramInfo* p) {
  if (p != nullptr && !p->memory_steps.empty()) return ProgramMemorySteps(s, *p);
  std::vector<svg::Series> series;
  auto add = [&](const char* name, const char* color, std::optional<int64_t> MemoryStats::*f,
                 bool resumed) {
    svg::Series x{std::string(name) + (resumed ? " (resumed)" : " (fresh)"), color, {}, true};
    if (!resumed) {
      for (const MemoryStats* m : {&s.memory_first_step, &s.memory}) {
        if (m->*f && m->step > 0) x.points.push_back({static_cast<double>(m->step), Gd(*(m->*f))});
      }
    } else if (s.memory_resumed && (*s.memory_resumed).*f && s.memory_resumed->step > 0) {
      x.points.push_back(
          {static_cast<double>(s.memory_resumed->step), Gd(*((*s.memory_resumed).*f))});
    }
    series.push_back(std::move(x));
  };
  add("allocated", kBlue, &MemoryStats::peak_allocated_bytes, false);
  add("reserved", kOrange, &MemoryStats::peak_reserved_bytes, false);
  add("device", kGreen, &MemoryStats::device_used_bytes, false);
  add("allocated", "#6baed6", &MemoryStats::peak_allocated_bytes, true);
  add("device", "#74c476", &MemoryStats::device_used_bytes, true);
  if (s.device == "cpu") {  // no allocator figures: the process RSS instead
    series.clear();
    svg::Series rss{"process peak RSS (fresh)", kBlue, {}, true};
    for (const MemoryStats* m : {&s.memory_first_step, &s.memory}) {
      if (m->process_peak_rss_bytes && m->step > 0) {
        rss.points.push_back({static_cast<double>(m->step), Gd(*m->process_peak_rss_bytes)});
      }
    }
    series.push_back(rss);
    svg::Series r2{"process peak RSS (resumed)", kOrange, {}, true};
    if (s.memory_resumed && s.memory_resumed->process_peak_rss_bytes) {
      r2.points.push_back({static_cast<double>(s.memory_resumed->step),
                           Gd(*s.memory_resumed->process_peak_rss_bytes)});
    }
    series.push_back(r2);
  }
  return svg::LineChart({"memory-steps", "Memory at the measured steps", "step", "GiB"}, series);
}

std::string LossSteps(const ReportInput& in) {
  std::vector<svg::Series> series;
  const char* colors[] = {kBlue, kOrange, kGreen, kPurple, kBrown};
  std::vector<std::string> names;
  for (const MetricRow& m : in.metrics) {
    if (std::isnan(m.loss)) continue;
    size_t i = 0;
    while (i < names.size() && names[i] != m.process) ++i;
    if (i == names.size()) {
      names.push_back(m.process);
      series.push_back({m.process, colors[i % 5], {}, false});
    }
    series[i].points.push_back({static_cast<double>(m.step), m.loss});
  }
  if (series.empty()) {  // the reference losses of results.json
    svg::Series ref{"reference", kBlue, {}, false};
    for (size_t i = 0; i < in.results.single->losses.size(); ++i) {
      ref.points.push_back({static_cast<double>(i + 1), in.results.single->losses[i]});
    }
    series.push_back(ref);
    const RestoreInfo& r = in.results.single->restore;
    svg::Series res{"resumed", kOrange, {}, true};
    for (size_t i = 0; i < r.resumed_losses.size(); ++i) {
      res.points.push_back(
          {static_cast<double>(r.from_step + 1 + static_cast<int64_t>(i)), r.resumed_losses[i]});
    }
    series.push_back(res);
  }
  return svg::LineChart({"loss-steps", "Training loss per step", "step", "loss"}, series);
}

std::string TimeSteps(const ReportInput& in) {
  svg::Series step{"step", kGrey, {}, false}, fb{"forward+backward", kBlue, {}, false},
      opt{"optimizer", kOrange, {}, false}, wait{"data wait", kRed, {}, false};
  for (const MetricRow& m : in.metrics) {
    if (m.process != "reference") continue;
    const double x = static_cast<double>(m.step);
    step.points.push_back({x, m.step_ms});
    fb.points.push_back({x, m.forward_backward_ms});
    opt.points.push_back({x, m.optimizer_ms});
    wait.points.push_back({x, m.data_wait_ms});
  }
  return svg::LineChart({"time-steps", "Step time per step (reference run)", "step", "ms"},
                        {step, fb, opt, wait});
}

std::string TimeBreakdown(const ReportInput& in) {
  const SingleStage& s = *in.results.single;
  const Timings& t = s.timings;
  std::vector<svg::Bar> bars;
  const double other =
      std::max(0.0, t.step_ms - t.data_wait_ms - t.forward_backward_ms - t.optimizer_ms);
  svg::Bar measured{"pilot step", {}, -1, "", Num(t.step_ms, 1) + " ms"};
  measured.segments = {{"data wait", t.data_wait_ms, kRed},
                       {"forward+backward", t.forward_backward_ms, kBlue},
                       {"optimizer", t.optimizer_ms, kOrange},
                       {"other", other, kGrey}};
  if (in.checkpoint_interval > 0 && s.checkpoint.save_seconds > 0) {
    const double ck = s.checkpoint.save_seconds * 1e3 / static_cast<double>(in.checkpoint_interval);
    measured.segments.push_back({"checkpoint (amortised)", ck, kPurple});
  }
  bars.push_back(measured);
  if (in.plan != nullptr && in.plan->chosen >= 0) {
    const GpuOption& o = in.plan->options[static_cast<size_t>(in.plan->chosen)];
    svg::Bar proj{
        "run on " + o.gpu.name,
        {},
        -1,
        "",
        Num(o.scaling.step_ms, 0) + " ms, " + Num(o.scaling.efficiency * 100, 0) + "% scaling"};
    proj.segments = {{"data wait", o.throughput.data_wait_ms, kRed},
                     {"compute (projected)", o.throughput.compute_ms, kOlive},
                     {"communication (projected)", o.scaling.comm_ms, kBrown}};
    bars.push_back(proj);
  }
  return svg::BarChart({"time-breakdown", "Step-time breakdown", "ms per optimizer step"}, bars);
}

std::string MemorySplit(const Plan& p) {
  const MemoryBreakdown& b = p.breakdown;
  svg::Bar bar{"measured shape", {}, -1, "", b.source};
  bar.segments = {
      {"parameters", Gd(b.params_bytes), kBlue},     {"gradients", Gd(b.grads_bytes), kOrange},
      {"optimizer", Gd(b.optimizer_bytes), kGreen},  {"activations", Gd(b.activation_bytes), kRed},
      {"workspace", Gd(b.workspace_bytes), kPurple}, {"runtime", Gd(b.runtime_bytes), kGrey}};
  return svg::BarChart({"memory-split", "Memory split of the pilot's peak", "GiB"}, {bar});
}

std::string FitChart(const Plan& p) {
  std::vector<svg::Bar> bars;
  for (const GpuOption& o : p.options) {
    svg::Bar b{
        o.gpu.name,
        {},
        Gd(o.fit.limit_bytes),
        "usable with headroom",
        (o.fit.fits ? "fits, " : "does NOT fit, ") + Num(o.fit.headroom * 100, 0) + "% free"};
    b.segments = {
        {"parameters+grads+optimizer", Gd(o.memory.static_bytes), kBlue},
        {"activations", Gd(o.memory.activation_bytes), kRed},
        {"workspace", Gd(o.memory.workspace_bytes), kPurple},
        {"runtime", Gd(o.memory.runtime_bytes), kGrey},
        {"free", std::max(0.0, Gd(o.gpu.memory_bytes - o.memory.total_bytes)), "#e5e5e5"}};
    bars.push_back(b);
  }

  return svg::BarChart(
      {"hardware-fit", "Predicted peak per GPU type (red tick: usable memory)", "GiB per GPU"},
      bars);
}

std::string BudgetChart(const Budget& b) {
  std::vector<svg::Bar> bars;
  const std::pair<const char*, const char*> parts[] = {
      {"download", kGrey}, {"preprocess", kBrown},  {"train", kBlue},   {"data_stall", kRed},
      {"eval", kGreen},    {"checkpoint", kPurple}, {"export", kOlive}, {"buffer", "#c7c7c7"}};
  svg::Bar total{"whole pipeline",
                 {},
                 b.term == "7-day" || b.term == "none" ? 7.0 : 30.0,
                 "term limit",
                 Num(b.days, 2) + " days -> " + b.term};
  for (auto [name, color] : parts) {
    auto it = b.breakdown.find(name);
    if (it != b.breakdown.end()) total.segments.push_back({name, it->second, color});
  }
  bars.push_back(total);
  return svg::BarChart({"budget", "Budget of the whole pipeline", "days"}, bars);
}

std::string ChecksTable(const Verdict& v) {
  std::string o =
      "<table class=\"checks\"><tr><th>check</th><th>status</th><th>measured</th>"
      "<th>required</th><th>detail</th><th>by</th></tr>";
  for (const Check& c : v.checks) {
    o += "<tr class=\"" + std::string(CheckStatusName(c.status)) + "\"><td>" + Escape(c.name) +
         "</td><td>" + CheckStatusName(c.status) + "</td><td>" + Escape(c.measured) + "</td><td>" +
         Escape(c.threshold) + "</td><td>" + Escape(c.detail) + "</td><td>" +
         VerifiedByName(c.verified_by) + "</td></tr>";
  }
  return o + "</table>";
}

}  // namespace

std::vector<MetricRow> ParseMetricsJsonl(std::string_view text, size_t* skipped) {
  std::vector<MetricRow> rows;
  size_t bad = 0;
  size_t pos = 0;
  auto num = [](const Json& j, const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? it->get<double>()
                                            : std::numeric_limits<double>::quiet_NaN();
  };
  while (pos < text.size() && rows.size() < kMaxMetricRows) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? nl : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.empty()) continue;
    // A line naming a key twice is skipped as unreadable (ParseJsonText).
    Result<Json> parsed = ParseJsonText(line, "");
    Json j = parsed.ok() ? std::move(parsed).value() : Json();
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
      ++bad;
      continue;
    }
    MetricRow r;
    r.process = j.value("process", std::string("reference"));
    r.step = j["step"].get<int64_t>();
    r.loss = num(j, "loss");
    r.step_ms = num(j, "step_ms");
    r.data_wait_ms = num(j, "data_wait_ms");
    r.forward_backward_ms = num(j, "forward_backward_ms");
    r.optimizer_ms = num(j, "optimizer_ms");
    auto t = j.find("timed");
    r.timed = t != j.end() && t->is_boolean() && t->get<bool>();
    rows.push_back(std::move(r));
  }
  if (skipped != nullptr) *skipped = bad;
  return rows;
}

// Where a model and a measurement cover the same thing: the memory model at
// the pilot's own shape against the device bytes it measured (fresh and
// resumed process), and the analytic scaling model at the node stage's GPU
// count against the node stage. (The step-time model reproduces the
// pilot's own step by construction: nothing to compare.)
std::string ProjectedAgainstMeasured(const Results& r, const Plan& p, const Policy& policy) {
  const SingleStage& s = *r.single;
  std::string rows;
  auto row = [&](const std::string& what, const std::string& projected,
                 const std::string& measured, const std::string& error) {
    rows += "<tr><td>" + Escape(what) + "</td><td>" + Escape(projected) + "</td><td>" +
            Escape(measured) + "</td><td>" + Escape(error) + "</td></tr>";
  };
  MemoryQuery own;
  own.seq_len = s.shape.seq_len;
  own.micro_batch = s.shape.micro_batch;
  own.activation_checkpointing = s.shape.activation_checkpointing;
  // A single stage at reduced depth measured a smaller model than the plan's
  // (extended to full depth): no like-for-like memory row.
  if (s.memory.device_used_bytes && own.seq_len > 0 && own.micro_batch > 0 && !s.reduced_depth) {
    const MemoryPrediction m = PredictPeak(p.breakdown, p.workload, own);
    row("device memory at the pilot's shape (" + m.basis + ")", G(m.total_bytes),
        G(s.memory.device_used_bytes),
        Error(static_cast<double>(m.total_bytes), static_cast<double>(*s.memory.device_used_bytes)));
    if (s.memory_resumed && s.memory_resumed->device_used_bytes) {
      row("device memory at the pilot's shape, resumed process", G(m.total_bytes),
          G(s.memory_resumed->device_used_bytes),
          Error(static_cast<double>(m.total_bytes),
                static_cast<double>(*s.memory_resumed->device_used_bytes)));
    }
  }
  // The replay at the pilot's own shape, with nothing limiting it: what its
  // processes mapped, plus the runtime's memory, against what they used.
  if (s.memory.device_used_bytes && own.seq_len > 0 && own.micro_batch > 0 && !s.reduced_depth) {
    if (const std::optional<ReplayPrediction> rp = PredictByReplay(
            s, r.alloc_conf, ReplayQuery{own.seq_len, own.micro_batch, own.activation_checkpointing})) {
      const int64_t lo = p.breakdown.runtime_bytes + rp->least.unlimited;
      const int64_t hi = p.breakdown.runtime_bytes + rp->most.unlimited;
      auto nearest = [&](int64_t measured) {
        return static_cast<double>(measured < lo ? lo : measured > hi ? hi : measured);
      };
      const std::string range = G(lo) + " to " + G(hi);
      const std::string what = "device memory at the pilot's shape, " + std::to_string(rp->histories) +
                               " processes replayed with nothing limiting them";
      row(what, range, G(s.memory.device_used_bytes),
          Error(nearest(*s.memory.device_used_bytes), static_cast<double>(*s.memory.device_used_bytes)));
      if (s.memory_resumed && s.memory_resumed->device_used_bytes) {
        row(what + ", resumed process", range, G(s.memory_resumed->device_used_bytes),
            Error(nearest(*s.memory_resumed->device_used_bytes),
                  static_cast<double>(*s.memory_resumed->device_used_bytes)));
      }
    }
  }
  if (r.node && r.node->status == "ok" && r.node->world_size > 1 && r.node->scaling.efficiency &&
      !p.options.empty()) {
    const GpuOption& o = p.options[static_cast<size_t>(std::max(0, p.chosen))];
    ScalingQuery q{1, r.node->world_size, r.node->mode, p.bucket_mb};
    const ScalingEstimate e = ProjectScaling(o.throughput, p.workload, o.gpu, q, policy);
    row("scaling at " + std::to_string(r.node->world_size) + " GPUs (analytic ring, " + o.gpu.name +
            ")",
        Num(e.efficiency * 100, 1) + "%", Num(*r.node->scaling.efficiency * 100, 1) + "%",
        Error(e.efficiency, *r.node->scaling.efficiency));
  }
  if (rows.empty()) return "";
  return "<h2>Projected against measured</h2><table><tr><th>what</th><th>projected</th>"
         "<th>measured</th><th>error</th></tr>" +
         rows + "</table>\n";
}

namespace {

// The node stage: its ranks and nodes, throughput, communication, and
// across nodes one all-reduce on each level.
std::string NodeTable(const Results& r) {
  if (!r.node || r.node->world_size <= 0) return "";
  const NodeStage& n = *r.node;
  std::string t = "<h2>Node stage</h2><table>";
  const int nodes = n.comm.nodes.value_or(1);
  t += Row("ranks", std::to_string(n.world_size) + " (" + n.mode + ", " + n.launcher + ")" +
                        (nodes > 1 ? " on " + std::to_string(nodes) + " nodes" : "") + ", status " + n.status);
  t += Row("throughput", Count(n.scaling.tokens_per_second) + " tokens/s, " +
                             Count(n.scaling.tokens_per_second_per_rank) + " per rank");
  t += Row("communication", n.comm.backend + ": " + Num(n.comm.total_ms_per_step, 1) + " ms per step in flight, " +
                                Num(n.comm.exposed_ms_per_step, 1) + " ms exposed (" +
                                Num(n.comm.exposed_fraction * 100, 1) + "% of the step)");
  auto level = [&t](const std::optional<NodeCommLevel>& l, const std::string& what) {
    if (!l) return;
    t += Row("all-reduce " + what, Num(static_cast<double>(l->bytes) / 1e6, 1) + " MB in " + Num(l->allreduce_ms, 2) +
                                       " ms, " + Num(l->gb_per_second, 2) + " GB/s (" + std::to_string(l->groups) +
                                       " group(s) of " + std::to_string(l->group_size) + ")");
  };
  level(n.comm.intra_node, "within a node");
  level(n.comm.inter_node, "between nodes");
  return t + "</table>\n";
}

}  // namespace

std::string RenderReportHtml(const ReportInput& in) {
  std::string title = "slurm-pilot report: " + in.label;
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">"
      "<title>" +
      Escape(title) +
      "</title><style>"
      "body{font-family:sans-serif;margin:24px;max-width:1100px;color:#222}"
      "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}"
      "table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;"
      "text-align:left;font-size:13px;vertical-align:top}tr.fail td{background:#fde0e0}"
      "tr.warn td{background:#fff4d6}tr.pass td:nth-child(2){color:#107010}"
      ".go{color:#107010}.nogo{color:#b00000}svg.chart{display:block;margin:10px 0}"
      "ul.notes{font-size:13px;color:#444}</style></head><body>\n";
  o += "<h1>" + Escape(title) + "</h1>\n";
  o += "<p>generated " + Escape(in.generated_at) + "</p>\n";
  if (in.verdict != nullptr) {
    const Verdict& v = *in.verdict;
    const bool go = v.decision == Decision::kGo;
    o += "<h2>Verdict</h2><p class=\"" + std::string(go ? "go" : "nogo") + "\"><b>" +
         DecisionName(v.decision) + "</b> for job " + std::to_string(v.job.id) + " of " +
         Escape(v.job.user) + " (" + Escape(v.job.run) + "), issued " + Escape(v.issued) +
         ", expires " + Escape(v.expires) + (v.binding ? "" : ", NOT binding") + "</p>\n" +
         ChecksTable(v) + "\n";
  }
  if (!in.results.single) {
    return o + "<p>results.json has no single-stage results.</p></body></html>\n";
  }
  const SingleStage& s = *in.results.single;
  o += "<h2>Pilot</h2><table>";
  if (in.results.program) {
    const ProgramInfo& p = *in.results.program;
    std::string command;
    for (const std::string& a : p.command) command += (command.empty() ? "" : " ") + a;
    o += Row("program", command + " (in " + p.workdir + ", launcher " + p.launcher + ", " +
                            (p.metrics == "loss_pattern" ? "losses from its output" : "its records") + ")");
    for (const std::string& problem : p.problems) o += Row("problem", problem);
  }
  o += Row("device", s.device + (s.device_name.empty() ? "" : " (" + s.device_name + ")"));
  o += Row("status", s.status);
  {
    // What is known of the shape, and nothing that is not ("" is not shown).
    std::vector<std::string> shape = {"seq_len " + std::to_string(s.shape.seq_len),
                                      "micro_batch " + std::to_string(s.shape.micro_batch),
                                      "grad_accum " + std::to_string(s.shape.grad_accum)};
    if (!s.shape.precision.empty()) shape.push_back(s.shape.precision);
    else if (in.results.program) shape.push_back("precision not reported");
    if (!s.shape.optimizer.empty()) shape.push_back(s.shape.optimizer);
    if (s.shape.activation_checkpointing) shape.push_back("activation checkpointing");
    std::string text;
    for (const std::string& part : shape) text += (text.empty() ? "" : ", ") + part;
    o += Row("shape", text);
  }
  if (s.reduced_depth) o += Row("reduced depth", s.reduced_depth->detail);
  o += Row("parameters", Params(s.shape.params));
  o += Row("steps", std::to_string(s.steps) + " (" + std::to_string(s.warmup_steps) + " warm-up)");
  o += Row("throughput",
           Count(s.tokens_per_second) + " tokens/s, " +
               (s.tflops > 0 ? Num(s.tflops, 2) + " TFLOP/s" : std::string("TFLOP/s not known (no parameter count)")));
  o += Row("memory (steady)", "allocated " + G(s.memory.peak_allocated_bytes) + ", reserved " +
                                  G(s.memory.peak_reserved_bytes) + ", device " +
                                  G(s.memory.device_used_bytes) + ", process RSS peak " +
                                  G(s.memory.process_peak_rss_bytes));
  if (s.memory_resumed) {
    o += Row("memory (resumed)", "allocated " + G(s.memory_resumed->peak_allocated_bytes) +
                                     ", device " + G(s.memory_resumed->device_used_bytes));
  }
  o += Row("checkpoint", Num(static_cast<double>(s.checkpoint.bytes) / 1e9, 3) + " GB, save " +
                             Num(s.checkpoint.save_seconds, 2) + " s, load " +
                             Num(s.checkpoint.load_seconds, 2) + " s");
  o += Row("restore", s.restore.ran
                          ? std::string(s.restore.equal ? "equal" : "DIFFERENT") + " (" +
                                s.restore.mode + "), step " + std::to_string(s.restore.from_step) +
                                " -> " + std::to_string(s.restore.to_step)
                          : "not run");
  o += "</table>\n" + NodeTable(in.results) + "<h2>Memory</h2>\n" +
       MemorySteps(s, in.results.program ? &*in.results.program : nullptr) + "\n";
  if (in.plan != nullptr) o += MemorySplit(*in.plan) + "\n";
  o += "<h2>Loss and step time</h2>\n" + LossSteps(in) + "\n";
  if (!in.metrics.empty()) o += TimeSteps(in) + "\n";
  o += TimeBreakdown(in) + "\n";
  if (in.plan != nullptr) {
    const Plan& p = *in.plan;
    o += "<h2>Hardware fit</h2><p>" + Escape(p.memory_query.mode) + " on " +
         std::to_string(p.nodes) + " node(s) x " + std::to_string(p.gpus_per_node) +
         " GPUs, seq_len " + std::to_string(p.memory_query.seq_len) + ", micro_batch " +
         std::to_string(p.memory_query.micro_batch) + "</p>\n" + FitChart(p) + "\n";
    o += "<table><tr><th>GPU</th><th>predicted</th><th>fits</th><th>tokens/s/GPU</th>"
         "<th>scaling</th><th>max nodes</th><th>note</th></tr>";
    for (const GpuOption& g : p.options) {
      o += "<tr><td>" + Escape(g.gpu.name) + "</td><td>" + G(g.memory.total_bytes) + "</td><td>" +
           (g.fit.fits ? "yes" : "no") + "</td><td>" + Count(g.throughput.tokens_per_second) +
           "</td><td>" + Num(g.scaling.efficiency * 100, 0) + "%</td><td>" +
           std::to_string(g.recommended_nodes) + "</td><td>" + Escape(g.fit.note) + "</td></tr>";
    }
    o += "</table>\n<h2>Budget</h2>\n" + BudgetChart(p.budget) + "\n<p>" + Num(p.budget.days, 2) +
         " days, " + Count(p.budget.gpu_hours) + " GPU-hours" +
         (p.budget.cost > 0 ? ", " + Count(p.budget.cost) + " " + Escape(p.budget.currency) : "") +
         " &rarr; " +
         Escape(p.budget.term == "none" ? "does not fit a 30-day term" : p.budget.term) + "</p>\n";
    o += ProjectedAgainstMeasured(in.results, p, in.policy ? *in.policy : Policy{});
    o += "<h2>Assumptions</h2><ul class=\"notes\">";
    for (const std::string& n : p.notes) o += "<li>" + Escape(n) + "</li>";
    o += "</ul>\n";
  } else if (!in.plan_error.empty()) {
    o += "<h2>Hardware fit and budget</h2><p>not available: " + Escape(in.plan_error) + "</p>\n";
  }
  return o + "</body></html>\n";
}

}  // namespace pilot
