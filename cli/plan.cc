// pilot plan JOBID|RESULTS.json [what-if flags]: hardware and budget what-ifs.
#include "core/models/plan.h"

#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "core/base/utf8.h"

#include <cstdio>
#include <optional>

#include "cli/options.h"
#include "cli/pilot_input.h"

namespace pilot::cli {
namespace {

// v with `d` decimals.
std::string Num(double v, int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", d, v);
  return buf;
}
std::string Pct(double v) { return Num(v * 100, 0) + "%"; }
std::string Sig3(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string Pad(std::string s, size_t w) {
  if (s.size() < w) s += std::string(w - s.size(), ' ');
  return s + " ";
}

void PrintPlan(std::ostream& out, const PilotInput& in, const Plan& p,
               const std::string& calibration) {
  // Texts from results.json, the config or the catalog are shown through
  // VisibleText: a job's files are its user's bytes.
  const auto shown = [](std::string_view t) { return VisibleText(t); };
  const SingleStage& s = *in.results.single;
  const MemoryBreakdown& b = p.breakdown;
  out << shown(in.label) << ": measured on "
      << shown(s.device_name.empty() ? s.device : s.device_name) << ", "
      << shown(p.workload.precision) << ", " << Sig3(static_cast<double>(s.shape.params))
      << " params, seq_len " << s.shape.seq_len << " x micro_batch " << s.shape.micro_batch << "\n";
  out << "memory split (" << shown(b.source) << "): params " << FormatBytes(b.params_bytes)
      << ", grads " << FormatBytes(b.grads_bytes) << ", optimizer "
      << FormatBytes(b.optimizer_bytes) << ", activations " << FormatBytes(b.activation_bytes)
      << " (" << Num(b.activation_bytes_per_token / 1024, 0) << " KiB/token), workspace "
      << FormatBytes(b.workspace_bytes) << ", runtime " << FormatBytes(b.runtime_bytes) << "\n";
  out << "memory calibration: " << shown(calibration) << "\n";
  const MemoryQuery& q = p.memory_query;
  out << "what-if: " << shown(q.mode) << " on " << p.nodes << " node(s) x " << p.gpus_per_node
      << " GPUs, seq_len " << q.seq_len << ", micro_batch " << q.micro_batch << " x "
      << p.grad_accum
      << (q.activation_checkpointing ? ", activation checkpointing" : "") << "\n";
  if (p.replay) {
    const ReplayPrediction& r = *p.replay;
    out << "predicted from: " << shown(r.basis) << "\n";
    out << "memory replay: " << FormatBytes(r.least.at_full_speed) << " to "
        << FormatBytes(r.most.at_full_speed) << " mapped at full speed, "
        << FormatBytes(r.least.to_run) << " to " << FormatBytes(r.most.to_run) << " to run at all, "
        << FormatBytes(r.least.unlimited) << " to " << FormatBytes(r.most.unlimited)
        << " unlimited, + runtime " << FormatBytes(b.runtime_bytes) << "\n";
  } else if (!p.options.empty()) {
    out << "predicted from: " << shown(p.options[0].memory.basis) << " memory model\n";
    if (!p.replay_why.empty()) out << "memory replay: not applied: " << shown(p.replay_why) << "\n";
  }
  out << "\n";
  out << Pad("GPU", 12) << Pad("memory", 10) << Pad("predicted", 10) << Pad("free", 5)
      << Pad("fits", 4) << Pad("tok/s/GPU", 10) << Pad("MFU", 5) << Pad("scaling", 8)
      << "max nodes\n";
  for (size_t i = 0; i < p.options.size(); ++i) {
    const GpuOption& o = p.options[i];
    out << Pad(shown(o.gpu.name) + (static_cast<int>(i) == p.chosen ? "*" : ""), 12)
        << Pad(FormatBytes(o.gpu.memory_bytes), 10) << Pad(FormatBytes(o.memory.total_bytes), 10)
        << Pad(Pct(o.fit.headroom), 5) << Pad(o.fit.fits ? "yes" : "NO", 4)
        << Pad(Num(o.throughput.tokens_per_second, 0), 10) << Pad(Pct(o.throughput.mfu), 5)
        << Pad(Pct(o.scaling.efficiency), 8) << o.recommended_nodes;
    if (!o.fit.note.empty() && o.fit.fits) out << "  " << shown(o.fit.note);
    out << "\n";
  }
  out << "(* the type budgeted; max nodes: largest count with scaling >= "
      << Pct(in.policy.thresholds.min_scaling_efficiency) << ")\n\n";
  const Budget& bu = p.budget;
  if (p.chosen >= 0 && bu.days > 0) {
    const GpuOption& o = p.options[static_cast<size_t>(p.chosen)];
    out << "budget on " << shown(o.gpu.name) << ", " << p.nodes << " x " << p.gpus_per_node
        << " GPUs: " << Num(bu.days, 2) << " days -> "
        << (bu.term == "none" ? "does not fit a 30-day term" : shown(bu.term) + " reservation") << ", "
        << Num(bu.gpu_hours, 0) << " GPU-hours";
    if (bu.cost > 0) out << ", " << Num(bu.cost, 0) << " " << shown(bu.currency);
    out << "\n ";
    for (const char* k : {"download", "preprocess", "train", "data_stall", "eval", "checkpoint",
                          "export", "buffer"}) {
      auto it = bu.breakdown.find(k);
      if (it != bu.breakdown.end()) out << " " << k << " " << Num(it->second, 2);
    }
    out << " (days)\n";
  } else {
    out << "budget: no throughput to estimate from\n";
  }
  out << "assumptions:\n";
  for (const std::string& n : p.notes) out << "  - " << shown(n) << "\n";
}

// The same plan as one JSON object (pilot(1), plan --json).
void PrintPlanJson(std::ostream& out, const PilotInput& in, const Plan& p,
                   const std::string& calibration) {
  const SingleStage& s = *in.results.single;
  const MemoryBreakdown& b = p.breakdown;
  const MemoryQuery& q = p.memory_query;
  Json j = Json::object();
  j["source"] = in.label;
  j["measured"] = {{"device", s.device_name.empty() ? s.device : s.device_name},
                   {"precision", p.workload.precision},
                   {"params", s.shape.params},
                   {"seq_len", s.shape.seq_len},
                   {"micro_batch", s.shape.micro_batch},
                   {"grad_accum", s.shape.grad_accum},
                   {"activation_checkpointing", s.shape.activation_checkpointing},
                   {"step_ms", s.timings.step_ms},
                   {"tokens_per_second", s.tokens_per_second}};
  j["memory_split"] = {{"source", b.source},
                       {"params_bytes", b.params_bytes},
                       {"grads_bytes", b.grads_bytes},
                       {"optimizer_bytes", b.optimizer_bytes},
                       {"activation_bytes", b.activation_bytes},
                       {"activation_bytes_per_token", b.activation_bytes_per_token},
                       {"workspace_bytes", b.workspace_bytes},
                       {"runtime_bytes", b.runtime_bytes}};
  j["memory_calibration"] = calibration;
  if (p.replay) {
    const ReplayPrediction& r = *p.replay;
    auto range = [](int64_t least, int64_t most) { return Json{{"least", least}, {"most", most}}; };
    j["memory_replay"] = {{"basis", r.basis},
                          {"histories", r.histories},
                          {"full_speed_bytes", range(r.least.at_full_speed, r.most.at_full_speed)},
                          {"to_run_bytes", range(r.least.to_run, r.most.to_run)},
                          {"unlimited_bytes", range(r.least.unlimited, r.most.unlimited)},
                          {"allocated_bytes", range(r.least.allocated, r.most.allocated)},
                          {"runtime_bytes", b.runtime_bytes}};
  } else {
    j["memory_replay"] = nullptr;
  }
  j["memory_replay_why_not"] = p.replay_why;
  j["what_if"] = {{"mode", q.mode},
                  {"nodes", p.nodes},
                  {"gpus_per_node", p.gpus_per_node},
                  {"seq_len", q.seq_len},
                  {"micro_batch", q.micro_batch},
                  {"grad_accum", p.grad_accum},
                  {"activation_checkpointing", q.activation_checkpointing}};
  if (p.step_time) {
    const StepTimeEstimate& t = *p.step_time;
    j["step_time"] = {{"step_ms", t.step_ms},
                      {"compute_ms", t.compute_ms},
                      {"data_wait_ms", t.data_wait_ms},
                      {"forward_backward_ms", t.forward_backward_ms},
                      {"fixed_ms_per_micro_batch", t.alpha_ms},
                      {"recompute_factor", t.recompute_factor},
                      {"tokens_per_step", t.tokens_per_step}};
  } else {
    j["step_time"] = nullptr;
  }
  Json options = Json::array();
  for (size_t i = 0; i < p.options.size(); ++i) {
    const GpuOption& o = p.options[i];
    options.push_back({{"gpu", o.gpu.name},
                       {"budgeted", static_cast<int>(i) == p.chosen},
                       {"memory_bytes", o.gpu.memory_bytes},
                       {"predicted_bytes", o.memory.total_bytes},
                       {"memory_basis", o.memory.basis},
                       {"headroom", o.fit.headroom},
                       {"fits", o.fit.fits},
                       {"fit_note", o.fit.note},
                       {"tokens_per_second_per_gpu", o.throughput.tokens_per_second},
                       {"compute_ms", o.throughput.compute_ms},
                       {"data_wait_ms", o.throughput.data_wait_ms},
                       {"mfu", o.throughput.mfu},
                       {"throughput_basis", o.throughput.basis},
                       {"scaling_efficiency", o.scaling.efficiency},
                       {"step_ms_at_scale", o.scaling.step_ms},
                       {"comm_ms", o.scaling.comm_ms},
                       {"max_nodes", o.recommended_nodes}});
  }
  j["options"] = options;
  const Budget& bu = p.budget;
  if (p.chosen >= 0 && bu.days > 0) {
    Json parts = Json::object();
    for (const auto& [k, v] : bu.breakdown) parts[k] = v;
    j["budget"] = {{"gpu", p.options[static_cast<size_t>(p.chosen)].gpu.name},
                   {"days", bu.days},
                   {"term", bu.term},
                   {"gpu_hours", bu.gpu_hours},
                   {"cost", bu.cost},
                   {"currency", bu.currency},
                   {"days_by_part", parts}};
  } else {
    j["budget"] = nullptr;
  }
  j["assumptions"] = p.notes;
  out << VisibleJsonText(DumpJson(j, 2)) << "\n";
}

}  // namespace

int RunPlan(const Invocation& inv) {
  CommandLine cl("pilot plan [OPTIONS] JOBID|RESULTS.json",
                 "What-if table from a pilot's measurements: predicted peak memory and fit per\n"
                 "GPU type, projected throughput and scaling, and the whole-pipeline budget.\n"
                 "Flags override the run's [run] settings from the pilot's config.");
  cl.options.add_options()("gpu", po::value<std::string>()->default_value(""),
                           "GPU type to budget (catalog name)")(
      "nodes", po::value<int>()->default_value(0), "nodes of the run")(
      "gpus-per-node", po::value<int>()->default_value(0), "GPUs per node")(
      "micro-batch", po::value<int>()->default_value(0), "per-GPU micro-batch")(
      "seq-len", po::value<int>()->default_value(0), "sequence length")(
      "grad-accum", po::value<int>()->default_value(0), "micro-batches per optimizer step")(
      "mode", po::value<std::string>()->default_value(""), "ddp or sharded")(
      "recompute", po::value<std::string>()->default_value(""),
      "activation checkpointing: on or off")(
      "calibrate", po::value<std::string>()->default_value(""),
      "a second results.json of the same shape at another micro-batch: activations from the "
      "two peaks")("config", po::value<std::string>()->default_value(""),
                   "the pilot's config (default: the job's copy, or results.json's config_path)")(
      "policy", PolicyValue(), PolicyHelp().c_str())(
      "json", po::bool_switch(), "print the plan as one JSON object");
  cl.hidden.add_options()("source", po::value<std::string>(), "job id or results.json");
  cl.positional.add("source", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  if (!vm.count("source")) return UsageError(inv, "expected a JOBID or a results.json");
  PlanQuery q;
  q.gpu_type = vm["gpu"].as<std::string>();
  q.nodes = vm["nodes"].as<int>();
  q.gpus_per_node = vm["gpus-per-node"].as<int>();
  q.micro_batch = vm["micro-batch"].as<int>();
  q.seq_len = vm["seq-len"].as<int>();
  q.grad_accum = vm["grad-accum"].as<int>();
  q.mode = vm["mode"].as<std::string>();
  if (q.nodes < 0 || q.gpus_per_node < 0 || q.micro_batch < 0 || q.seq_len < 0 ||
      q.grad_accum < 0) {
    return UsageError(inv,
                      "--nodes, --gpus-per-node, --micro-batch, --seq-len and --grad-accum must be > 0");
  }
  const std::string rc = vm["recompute"].as<std::string>();
  if (rc == "on")
    q.activation_checkpointing = true;
  else if (rc == "off")
    q.activation_checkpointing = false;
  else if (!rc.empty())
    return UsageError(inv, "--recompute must be on or off");

  Result<PilotInput> in =
      LoadPilotInput(vm["source"].as<std::string>(), vm["config"].as<std::string>(),
                     vm["policy"].as<std::string>());
  if (!in.ok()) {
    inv.err << in.status().ToString() << "\n";
    return in.status().code() == Code::kInvalid ? kExitUsage : kExitNo;
  }
  if (!in->config) {
    inv.err << Status::Invalid("plan", "no config: " + in->config_error).ToString() << "\n";
    return kExitUsage;
  }
  if (!in->results.single || in->results.single->shape.params <= 0) {
    inv.err
        << Status::Invalid(in->results_path, "no single-stage measurements to plan from").ToString()
        << "\n";
    return kExitNo;
  }
  // The runner's own calibration (its smaller micro-batch), unless
  // --calibrate names another pilot to take the second point from.
  std::string why_not;
  std::optional<MemoryCalibration> cal = CalibrationFrom(*in->results.single, &why_not);
  std::string cal_from = cal ? "the runner's micro_batch " + std::to_string(cal->micro_batch_b) +
                                   " steps in " + in->label
                             : "none (" + why_not + ")";
  if (const std::string c = vm["calibrate"].as<std::string>(); !c.empty()) {
    Result<Results> other = ReadPilotResults(in->policy, c, /*from_job=*/false);
    if (!other.ok()) {
      inv.err << other.status().ToString() << "\n";
      return kExitNo;
    }
    const SingleStage& a = *in->results.single;
    if (!other->single || !other->single->memory.peak_allocated_bytes ||
        !a.memory.peak_allocated_bytes || other->single->shape.seq_len != a.shape.seq_len ||
        other->single->shape.micro_batch == a.shape.micro_batch ||
        other->single->shape.activation_checkpointing != a.shape.activation_checkpointing) {
      return UsageError(inv,
                        "--calibrate needs a GPU results.json of the same seq_len and "
                        "checkpointing at another micro-batch");
    }
    cal = MemoryCalibration{a.shape.micro_batch, *a.memory.peak_allocated_bytes,
                            other->single->shape.micro_batch,
                            *other->single->memory.peak_allocated_bytes};
    cal_from = "--calibrate " + c + " (micro_batch " + std::to_string(cal->micro_batch_b) + ")";
  }
  q.native_extensions = ExtensionsToQualify(in->results);
  Result<Plan> plan = MakePlan(*in->results.single, *in->config, in->catalog, in->policy, q, cal);
  if (!plan.ok()) {
    inv.err << plan.status().ToString() << "\n";
    return kExitUsage;
  }
  if (vm["json"].as<bool>()) {
    PrintPlanJson(inv.out, *in, *plan, cal_from);
  } else {
    PrintPlan(inv.out, *in, *plan, cal_from);
  }
  return kExitOk;
}

}  // namespace pilot::cli
