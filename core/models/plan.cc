#include "core/models/plan.h"

#include <algorithm>
#include <cmath>

#include "core/base/strings.h"
#include "core/models/step_time.h"

namespace pilot {

namespace {

// The depth a sharded run's single stage ran at, against the run's: how
// much more its checkpoint (parameters) and evaluation (FLOPs) cost.
struct DepthScale {
  double params = 1;
  double flops = 1;
};

// Where the single stage ran fewer layers than the run has, extends the
// plan's workload, memory and step-time basis per layer to full depth and
// says so in a note; otherwise leaves them as measured.
DepthScale ExtendToFullDepth(const SingleStage& s, const Workload& measured, Plan* plan,
                             StepTimeBasis* basis) {
  DepthScale scale;
  if (!s.reduced_depth || s.reduced_depth->full_layers <= measured.layers) return scale;
  plan->workload = FullDepth(measured, *s.reduced_depth);
  plan->breakdown = ExtendDepth(plan->breakdown, measured, plan->workload);
  *basis = ScaleBasisToDepth(*basis, measured, plan->workload);
  scale.params =
      measured.params > 0 ? static_cast<double>(plan->workload.params) / measured.params : 1;
  const double f = FlopsPerTokenAt(measured, s.shape.seq_len);
  scale.flops = f > 0 ? FlopsPerTokenAt(plan->workload, s.shape.seq_len) / f : 1;
  plan->notes.push_back("depth: the single stage ran " + std::to_string(measured.layers) + " of " +
                        std::to_string(plan->workload.layers) + " layers (" +
                        s.reduced_depth->detail +
                        "); memory, step time, checkpoint and eval times extended per layer to " +
                        std::to_string(plan->workload.layers));
  return scale;
}

// Resolves the query against the config into the plan's layout and memory
// query. Returns the parallel mode asked for (ddp or sharded); kInvalid for
// another mode, a non-positive shape or a GPU type not in the catalog.
Result<std::string> ResolveQuery(const Config& cfg, const HardwareCatalog& cat, const PlanQuery& q,
                                 Plan* plan) {
  plan->nodes = q.nodes > 0 ? q.nodes : std::max(1, cfg.run.nodes);
  plan->gpus_per_node = q.gpus_per_node > 0 ? q.gpus_per_node : std::max(1, cfg.run.gpus_per_node);
  std::string mode = q.mode.empty() ? cfg.parallel.mode : q.mode;
  if (mode != "ddp" && mode != "sharded") {
    return Status::Invalid("plan", "mode must be ddp or sharded, got '" + mode + "'");
  }
  MemoryQuery& mq = plan->memory_query;
  mq.seq_len = q.seq_len > 0 ? q.seq_len : cfg.run.seq_len;
  mq.micro_batch = q.micro_batch > 0 ? q.micro_batch : cfg.run.micro_batch;
  if (mq.seq_len <= 0 || mq.micro_batch <= 0) {
    return Status::Invalid("plan", "seq_len and micro_batch must be positive");
  }
  mq.activation_checkpointing =
      q.activation_checkpointing.value_or(cfg.training.activation_checkpointing);
  mq.gpus = plan->nodes * plan->gpus_per_node;
  mq.mode = mq.gpus > 1 ? mode : "single";
  if (!q.gpu_type.empty() && cat.Find(q.gpu_type) == nullptr) {
    return Status::Invalid("plan",
                           "GPU type '" + q.gpu_type + "' is not in the catalog " + cat.path)
        .WithHint("known types: " + [&] {
          std::string n;
          for (const auto& x : cat.Names()) n += (n.empty() ? "" : ", ") + x;
          return n;
        }());
  }
  plan->grad_accum = std::max(1, q.grad_accum > 0 ? q.grad_accum : cfg.run.grad_accum);
  return mode;
}

// The single stage as if it had run at the plan's shape, from the step-time
// model's estimate `step` (which must have a positive step_ms).
SingleStage StageAtShape(const SingleStage& s, const Workload& measured, const Plan& plan,
                         const StepTimeEstimate& step, double run_tokens) {
  const MemoryQuery& mq = plan.memory_query;
  SingleStage shaped = s;
  shaped.shape.seq_len = mq.seq_len;
  shaped.shape.micro_batch = mq.micro_batch;
  shaped.shape.grad_accum = plan.grad_accum;
  shaped.shape.activation_checkpointing = mq.activation_checkpointing;
  shaped.shape.tokens_per_step = static_cast<int64_t>(run_tokens);
  shaped.timings.step_ms = step.step_ms;
  shaped.timings.data_wait_ms = step.data_wait_ms;
  shaped.tokens_per_second = run_tokens / step.step_ms * 1e3;
  const double f_pilot = FlopsPerTokenAt(measured, s.shape.seq_len);
  if (s.flops_per_token > 0 && f_pilot > 0) {
    shaped.flops_per_token =
        s.flops_per_token * FlopsPerTokenAt(plan.workload, mq.seq_len) / f_pilot;
  }
  return shaped;
}

// The memory a process of this shape needs, replayed from the pilot's own
// allocator requests where they model the run: one process per GPU, at the
// pilot's depth. Otherwise plan->replay_why says why not (empty for a CPU
// pilot).
void ReplayMemory(const SingleStage& s, const Config& cfg, const PlanQuery& q, Plan* plan) {
  const MemoryQuery& mq = plan->memory_query;
  if (!q.replay_memory) {
    plan->replay_why = "not asked for (the verdict's plan uses the memory model)";
  } else if (mq.mode != "single") {
    plan->replay_why = "the replay models one process per GPU, not " + mq.mode + " over " +
                       std::to_string(mq.gpus) + " GPUs";
  } else if (s.reduced_depth) {
    plan->replay_why = "the single stage ran at reduced depth";
  } else {
    plan->replay = PredictByReplay(
        s, cfg.training.alloc_conf,
        ReplayQuery{mq.seq_len, mq.micro_batch, mq.activation_checkpointing}, &plan->replay_why);
  }
  if (s.device != "cuda") plan->replay_why.clear();
}

// The tokens of one optimizer step, the run's and the pilot's, and whether
// the step-time model moved the pilot's step to the run's shape.
struct StepTokens {
  double run = 0;
  double pilot = 1;
  bool shape_model = false;
};

// One option per candidate type in the catalog (the config's candidates and
// the query's type): memory, fit, throughput and scaling on that type.
void AddOptions(const SingleStage& shaped, const Config& cfg, const HardwareCatalog& cat,
                const Policy& policy, const PlanQuery& q, const std::string& mode,
                const StepTokens& tokens, const std::optional<NodeMeasurement>& node, Plan* plan) {
  std::vector<std::string> names = cfg.hardware.candidates;
  if (!q.gpu_type.empty() && std::find(names.begin(), names.end(), q.gpu_type) == names.end()) {
    names.push_back(q.gpu_type);
  }
  plan->bucket_mb = cfg.parallel.bucket_mb;
  ScalingQuery sq{plan->nodes, plan->gpus_per_node, mode, cfg.parallel.bucket_mb};
  for (const std::string& name : names) {
    const GpuType* g = cat.Find(name);
    if (g == nullptr) continue;
    GpuOption o;
    o.gpu = *g;
    o.memory = PredictPeak(plan->breakdown, plan->workload, plan->memory_query);
    if (plan->replay) ApplyReplay(&o.memory, *plan->replay);
    o.fit = FitOn(o.memory, *g, policy, q.native_extensions);
    o.throughput = ProjectThroughput(shaped, plan->workload, *g, cat, policy);
    if (!tokens.shape_model) {
      // No step timings: the same per-token rate at the run's tokens per step.
      o.throughput.compute_ms *= tokens.run / tokens.pilot;
      o.throughput.data_wait_ms *= tokens.run / tokens.pilot;
      const double ms = o.throughput.compute_ms + o.throughput.data_wait_ms;
      o.throughput.tokens_per_second = ms > 0 ? tokens.run / ms * 1e3 : 0;
    }
    o.scaling = ProjectScaling(o.throughput, plan->workload, *g, sq, policy, node);
    o.recommended_nodes = RecommendNodes(o.throughput, plan->workload, *g, sq, policy, node);
    plan->options.push_back(std::move(o));
  }
}

// The option to budget on: the query's type, else the config's, else the
// type the pilot ran on, else the first that fits, else the first; -1 when
// there is no option.
int ChooseOption(const Plan& plan, const SingleStage& s, const Config& cfg,
                 const HardwareCatalog& cat, const PlanQuery& q) {
  auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < plan.options.size(); ++i) {
      if (plan.options[i].gpu.name == name) return static_cast<int>(i);
    }
    return -1;
  };
  int chosen = -1;
  if (!q.gpu_type.empty()) {
    chosen = index_of(q.gpu_type);
  } else if (!cfg.run.gpu_type.empty()) {
    chosen = index_of(cfg.run.gpu_type);
  }
  if (chosen < 0) {
    if (const GpuType* m = MeasuredGpuType(s, cat)) chosen = index_of(m->name);
  }
  if (chosen < 0) {
    for (size_t i = 0; i < plan.options.size(); ++i) {
      if (plan.options[i].fit.fits) return static_cast<int>(i);
    }
  }
  if (chosen < 0 && !plan.options.empty()) chosen = 0;
  return chosen;
}

// The budget of the run on the chosen option, and the notes on how its
// throughput and scaling were projected.
void AddBudget(const SingleStage& s, const Config& cfg, const HardwareCatalog& cat,
               const Policy& policy, const StepTokens& tokens, const StepTimeEstimate& step,
               const DepthScale& depth, Plan* plan) {
  const GpuOption& o = plan->options[static_cast<size_t>(plan->chosen)];
  BudgetInputs bi;
  bi.dataset_gb = cfg.run.dataset_gb;
  bi.preprocess_hours = cfg.run.preprocess_hours;
  bi.export_gb = cfg.run.export_gb;
  const double tokens_all = tokens.run * plan->nodes * plan->gpus_per_node;
  bi.steps = cfg.run.target_steps > 0
                 ? cfg.run.target_steps
                 : static_cast<int64_t>(std::ceil(static_cast<double>(cfg.run.target_tokens) /
                                                  std::max(1.0, tokens_all)));
  bi.step_ms = o.scaling.step_ms;
  bi.data_wait_ms = o.throughput.data_wait_ms;
  bi.eval_interval = cfg.run.eval_interval;
  bi.eval_seconds = s.timings.eval_seconds * depth.flops;
  bi.checkpoint_interval = cfg.run.checkpoint_interval;
  bi.checkpoint_seconds = s.checkpoint.save_seconds * depth.params;
  bi.gpus = plan->nodes * plan->gpus_per_node;
  bi.price_per_gpu_hour = o.gpu.price_per_gpu_hour;
  bi.currency = cat.currency;
  plan->budget = MakeBudget(bi, policy);
  plan->notes.push_back("throughput: " + o.throughput.basis);
  if (tokens.shape_model) {
    for (const std::string& a : step.assumptions) plan->notes.push_back("throughput: " + a);
  }
  plan->notes.push_back("scaling: " + o.scaling.basis);
}

// What the replay predicted and how, or why there was none.
void AddReplayNotes(Plan* plan) {
  if (plan->replay) {
    const ReplayPrediction& r = *plan->replay;
    plan->notes.push_back(
        "memory: " + r.basis + "; they needed " + FormatGiB(r.least.at_full_speed) + " to " +
        FormatGiB(r.most.at_full_speed) + " of mapped device memory at full speed (" +
        FormatGiB(r.least.to_run) + " to " + FormatGiB(r.most.to_run) + " to run at all, " +
        FormatGiB(r.least.unlimited) + " to " + FormatGiB(r.most.unlimited) +
        " with nothing limiting them), plus the runtime's " +
        FormatGiB(plan->breakdown.runtime_bytes) +
        ": the prediction is the most, with the allocator's settings as the pilot ran them");
    plan->notes.push_back(
        "memory: replayed without evaluation and checkpoint saves (their requests come between "
        "steps); "
        "requests sized by seq_len alone (position embeddings) keep the pilot's size");
    if (r.recorded_grad_accum != plan->grad_accum) {
      plan->notes.push_back(
          "memory: replayed with the recorded steps' " + std::to_string(r.recorded_grad_accum) +
          " micro-batch(es) per step, not " + std::to_string(plan->grad_accum) +
          ": the micro-batches after a step's first add to its gradients in place");
    }
  } else if (!plan->replay_why.empty()) {
    plan->notes.push_back("memory: not replayed: " + plan->replay_why +
                          "; the model's estimate below");
  }
}

// Where the query's activation checkpointing differs from the pilot's: how
// the memory model got the other setting. `model` prefixes each note.
void AddCheckpointingNote(const std::string& model, Plan* plan) {
  const MemoryQuery& mq = plan->memory_query;
  if (mq.activation_checkpointing == plan->breakdown.activation_checkpointing) return;
  const auto& other = plan->breakdown.other_setting;
  const std::string what =
      model + "activation checkpointing " + (mq.activation_checkpointing ? "on" : "off");
  const std::string workspace =
      "workspace " + FormatFixed(100 * plan->breakdown.workspace_fraction, 1) +
      "% as the pilot's own steps (the checks reserve more: " +
      (other ? FormatFixed(100 * other->workspace_fraction, 1) : std::string("?")) + "%)";
  if (other && other->activation_checkpointing == mq.activation_checkpointing &&
      other->second_micro_batch > 0) {
    plan->notes.push_back(what + ": the line through the recompute check's step (" +
                          FormatGiB(other->allocated_bytes) + " allocated at micro_batch " +
                          std::to_string(plan->breakdown.micro_batch) +
                          ") and memory_calibration_other's (" +
                          FormatGiB(other->second_allocated_bytes) + " at " +
                          std::to_string(other->second_micro_batch) + "); " + workspace);
  } else if (other && other->activation_checkpointing == mq.activation_checkpointing) {
    plan->notes.push_back(
        what + ": the model's rule anchored to the recompute check's step at the pilot's shape (" +
        FormatGiB(other->allocated_bytes) + " allocated); " + workspace);
  } else {
    plan->notes.push_back(what +
                          " predicted by the model's rule, not measured (the pilot ran with it " +
                          (plan->breakdown.activation_checkpointing ? "on" : "off") + ")");
  }
}

// The memory model's own notes; where the replay predicts, they explain
// the estimate shown beside it, not the prediction.
void AddMemoryModelNotes(const SingleStage& s, const Config& cfg, Plan* plan) {
  const MemoryQuery& mq = plan->memory_query;
  if (s.shape.model_kind == "program") {
    // The builtin's memory model describes the builtin's layers only.
    plan->notes.push_back("memory: the program's measured peak at its own shape, not a model");
    if (!s.shape.precision.empty()) {
      plan->notes.push_back("precision: " + s.shape.precision + ", as the program's probe reported it");
    }
    return;
  }
  const std::string model = plan->replay ? "memory model (not the prediction): " : "memory: ";
  if (plan->replay) {
    plan->notes.push_back(model + "estimate " +
                          FormatGiB(PredictPeak(plan->breakdown, plan->workload, mq).total_bytes) +
                          " per GPU");
  }
  plan->notes.push_back(model + plan->breakdown.source + " activations");
  AddCheckpointingNote(model, plan);
  if (mq.activation_checkpointing) {
    if (const double extra = CheckpointStartExtraBytes(plan->breakdown, plan->workload, mq);
        extra > 0) {
      plan->notes.push_back(
          model +
          "checkpointed: the layer inputs outgrow a layer's gradients at this shape: "
          "the start of backward holds " +
          FormatGiB(static_cast<int64_t>(extra)) + " more than its end");
    }
  }
  for (const auto& n : plan->breakdown.notes) plan->notes.push_back(model + n);
  if (s.device == "cuda") {
    plan->notes.push_back(
        cfg.training.alloc_conf.empty()
            ? "memory: measured with the job environment's allocator settings"
            : "memory: measured with PYTORCH_ALLOC_CONF=" + cfg.training.alloc_conf +
                  "; the training job needs the same setting for these figures");
  }
  if (const double extra = UnfusedLossExtraBytesPerToken(plan->workload) *
                           static_cast<double>(mq.seq_len) * mq.micro_batch;
      extra > 0) {
    plan->notes.push_back(
        "memory: measured with the fused loss (training.fused_loss); a training program that takes "
        "cross entropy on a float32 copy of the logits holds about " +
        FormatGiB(static_cast<int64_t>(extra)) + " more per GPU at its peak");
  }
  if (plan->workload.precision != "fp32") {
    plan->notes.push_back(model + "attention linear in seq_len (flash/memory-efficient SDPA for " +
                          plan->workload.precision + " on GPUs)");
  } else {
    plan->notes.push_back(model + "fp32 uses the math SDPA path: attention grows with seq_len^2");
  }
}

}  // namespace

std::vector<std::string> ExtensionsToQualify(const Results& results) {
  std::vector<std::string> out;
  if (!results.program) return out;
  for (const auto& [module, from] : results.program->environment.extensions) {
    out.push_back(module + " (" + (from.empty() ? "built outside any installed distribution" : from) + ")");
  }
  return out;
}

Result<Plan> MakePlan(const SingleStage& s, const Config& cfg, const HardwareCatalog& cat,
                      const Policy& policy, const PlanQuery& q,
                      const std::optional<MemoryCalibration>& calibration,
                      const std::optional<NodeMeasurement>& node) {
  Plan plan;
  // What the single stage ran, and the run: the same unless a sharded
  // run's single stage ran fewer layers (extended per layer to full depth).
  const Workload measured = WorkloadFrom(s, &cfg);
  plan.workload = measured;
  plan.breakdown = SplitMemory(s, measured, calibration);
  StepTimeBasis basis = StepTimeBasisFrom(s);
  const DepthScale depth = ExtendToFullDepth(s, measured, &plan, &basis);
  const int seq_len = q.seq_len > 0 ? q.seq_len : cfg.run.seq_len;
  const int micro_batch = q.micro_batch > 0 ? q.micro_batch : cfg.run.micro_batch;
  if (s.shape.model_kind == "program" &&
      (seq_len != s.shape.seq_len || micro_batch != s.shape.micro_batch)) {
    // The builtin's models know its layers; a program's memory and step
    // time at a shape it did not run are not known from one measured shape.
    return Status::Invalid(
        "plan", "not predicted: a program's memory and throughput at seq_len " + std::to_string(seq_len) +
                    " x micro_batch " + std::to_string(micro_batch) +
                    " are not modelled from the one shape the pilot measured (seq_len " +
                    std::to_string(s.shape.seq_len) + " x micro_batch " + std::to_string(s.shape.micro_batch) +
                    ")")
        .WithHint("pilot the program at that shape (run.seq_len, run.micro_batch) to measure it");
  }
  PILOT_ASSIGN_OR_RETURN(const std::string mode, ResolveQuery(cfg, cat, q, &plan));
  const MemoryQuery& mq = plan.memory_query;

  // The pilot's step moved to the run's shape (core/models/step_time.h) on the GPU
  // it ran on; ProjectThroughput moves it to each candidate type.
  StepTokens tokens;
  tokens.run = static_cast<double>(mq.seq_len) * mq.micro_batch * plan.grad_accum;
  tokens.pilot = static_cast<double>(std::max<int64_t>(1, s.shape.tokens_per_step));
  const StepTimeEstimate step = EstimateStepTime(
      basis, plan.workload,
      StepShape{mq.seq_len, mq.micro_batch, plan.grad_accum, mq.activation_checkpointing});
  tokens.shape_model = step.step_ms > 0;
  SingleStage shaped = s;
  if (tokens.shape_model) {
    plan.step_time = step;
    shaped = StageAtShape(s, measured, plan, step, tokens.run);
  }

  ReplayMemory(s, cfg, q, &plan);
  AddOptions(shaped, cfg, cat, policy, q, mode, tokens, node, &plan);
  plan.chosen = ChooseOption(plan, s, cfg, cat, q);
  if (plan.chosen >= 0) AddBudget(s, cfg, cat, policy, tokens, step, depth, &plan);
  AddReplayNotes(&plan);
  AddMemoryModelNotes(s, cfg, &plan);
  return plan;
}

}  // namespace pilot
