// results.json: the field lists below (core/records/record.h) drive both the
// writer and the strict reader, so the two cannot drift apart.
#include "core/records/results.h"

#include <nlohmann/json.hpp>

#include "core/base/atomic_file.h"
#include "core/base/json_util.h"
#include "core/records/memory_fields.h"
#include "core/records/record.h"

namespace pilot {

// ---- field lists -----------------------------------------------------------
// kMayBeAbsent marks a member that older files lack (read as its default,
// null for an optional, when absent; always written).

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<MemoryStats>) {
  MemoryFields(v, s, kMemoryStatsKeys);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ShapeInfo>) {
  v("model_kind", s.model_kind);
  v("params", s.params);
  v("seq_len", s.seq_len);
  v("micro_batch", s.micro_batch);
  v("grad_accum", s.grad_accum);
  v("binding", s.binding);
  v("tokens_per_step", s.tokens_per_step);
  v("precision", s.precision);
  v("activation_checkpointing", s.activation_checkpointing);
  v("fused_loss", s.fused_loss, kMayBeAbsent);
  v("optimizer", s.optimizer);
  v("fused_optimizer", s.fused_optimizer);
  v("optimizer_state_included", s.optimizer_state_included);
  v("param_bytes", s.param_bytes, kMayBeAbsent);
  v("grad_bytes", s.grad_bytes, kMayBeAbsent);
  v("optimizer_state_bytes", s.optimizer_state_bytes, kMayBeAbsent);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Timings>) {
  v("timed_steps", s.timed_steps);
  v("data_wait_ms", s.data_wait_ms);
  v("data_wait_max_ms", s.data_wait_max_ms);
  v("forward_backward_ms", s.forward_backward_ms);
  v("optimizer_ms", s.optimizer_ms);
  v("step_ms", s.step_ms);
  v("step_ms_median", s.step_ms_median);
  v("eval_seconds", s.eval_seconds);
  v("model_build_seconds", s.model_build_seconds);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<EvalInfo>) {
  v("batches", s.batches);
  v("at_step", s.at_step);
  v("loss_at_checkpoint", s.loss_at_checkpoint);
  v("loss_final", s.loss_final);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointInfo>) {
  v("path", s.path);
  v("step", s.step);
  v("bytes", s.bytes);
  v("save_seconds", s.save_seconds);
  v("load_seconds", s.load_seconds);
  v("save_gb_per_s", s.save_gb_per_s);
  v("load_gb_per_s", s.load_gb_per_s);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RestoreInfo>) {
  v("ran", s.ran);
  v("equal", s.equal);
  v("mode", s.mode);
  v("tolerance", s.tolerance);
  v("from_step", s.from_step);
  v("to_step", s.to_step);
  v("resumed_losses", s.resumed_losses);
  v("first_rel_loss_diff", s.first_rel_loss_diff, kMayBeAbsent);
  v("first_tolerance", s.first_tolerance, kMayBeAbsent);
  v("repeat_losses", s.repeat_losses, kMayBeAbsent);
  v("noise_margin", s.noise_margin, kMayBeAbsent);
  v("noise_max_ratio", s.noise_max_ratio, kMayBeAbsent);
  v("noise_steps", s.noise_steps, kMayBeAbsent);
  v("max_abs_loss_diff", s.max_abs_loss_diff);
  v("max_rel_loss_diff", s.max_rel_loss_diff);
  v("max_abs_param_diff", s.max_abs_param_diff);
  v("max_rel_param_diff", s.max_rel_param_diff);
  v("params_compared", s.params_compared);
  v("skipped", s.skipped);
  v("detail", s.detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<PrecisionCheck>) {
  v("ran", s.ran);
  v("precision", s.precision);
  v("steps", s.steps);
  v("max_abs_loss_diff", s.max_abs_loss_diff);
  v("max_rel_loss_diff", s.max_rel_loss_diff);
  v("threshold", s.threshold);
  v("within", s.within);
  v("detail", s.detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<RecomputeCheck>) {
  v("ran", s.ran);
  v("measured", s.measured, kMayBeAbsent);
  v("fits_without", s.fits_without);
  v("steps", s.steps);
  v("step_ms_with", s.step_ms_with);
  v("step_ms_without", s.step_ms_without);
  v("cost_fraction", s.cost_fraction);
  v("peak_bytes_with", s.peak_bytes_with);
  v("peak_bytes_without", s.peak_bytes_without);
  v("memory_saved_bytes", s.memory_saved_bytes);
  v("peak_reserved_bytes", s.peak_reserved_bytes, kMayBeAbsent);
  v("detail", s.detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<InstrumentationCheck>) {
  v("ran", s.ran);
  v("steps", s.steps);
  v("step_ms_instrumented", s.step_ms_instrumented);
  v("step_ms_plain", s.step_ms_plain);
  v("overhead_fraction", s.overhead_fraction);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ReducedDepth>) {
  v("layers", s.layers);
  v("full_layers", s.full_layers);
  v("full_params", s.full_params);
  v("predicted_full_bytes", s.predicted_full_bytes);
  v("predicted_bytes", s.predicted_bytes);
  v("capacity_bytes", s.capacity_bytes);
  v("limit_bytes", s.limit_bytes);
  v("detail", s.detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<MemoryCalibrationCheck>) {
  v("status", s.status);
  v("micro_batch", s.micro_batch);
  v("seq_len", s.seq_len);
  v("activation_checkpointing", s.activation_checkpointing);
  v("steps", s.steps);
  MemoryFields(v, s, kCalibrationMemoryKeys);
  v("forward_backward_ms", s.forward_backward_ms, kMayBeAbsent);
  v("detail", s.detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<AllocRecording>) {
  v("process", s.process,
    OneOf{{"reference", "memory_calibration", "memory_calibration_other", "recompute_check"}});
  v("micro_batch", s.micro_batch, IntRange{1, 1 << 20});
  v("seq_len", s.seq_len, IntRange{1, 1 << 24});
  v("grad_accum", s.grad_accum, IntRange{1, 1 << 20});
  v("activation_checkpointing", s.activation_checkpointing);
  v("requests", s.requests);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<FailureInfo>) {
  v("kind", s.kind);
  v("step", s.step);
  v("phase", s.phase);
  v("message", s.message);
  v("memory", s.memory);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<SingleStage>) {
  v("status", s.status);
  v("device", s.device);
  v("device_name", s.device_name);
  v("shape", s.shape);
  v("steps", s.steps);
  v("warmup_steps", s.warmup_steps);
  v("timings", s.timings);
  v("tokens_per_second", s.tokens_per_second);
  v("flops_per_token", s.flops_per_token);
  v("tflops", s.tflops);
  v("losses", s.losses);
  v("grad_norms", s.grad_norms);
  v("eval", s.eval);
  v("memory", s.memory);
  v("memory_first_step", s.memory_first_step);
  v("memory_resumed", s.memory_resumed);
  v("checkpoint", s.checkpoint);
  v("restore", s.restore);
  v("precision_check", s.precision_check);
  v("recompute_check", s.recompute_check);
  v("instrumentation", s.instrumentation);
  // Files written before the calibration existed have no member: null.
  v("memory_calibration", s.memory_calibration, kMayBeAbsent);
  v("memory_calibration_other", s.memory_calibration_other, kMayBeAbsent);
  v("memory_calibration_smallest", s.memory_calibration_smallest, kMayBeAbsent);
  v("reduced_depth", s.reduced_depth, kMayBeAbsent);
  v("allocator_requests", s.allocator_requests, kMayBeAbsent);
  v("failure", s.failure);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Versions>) {
  v("runner", s.runner);
  v("torch", s.torch);
  v("cuda_runtime", s.cuda_runtime);
  v("cuda_driver", s.cuda_driver);
  v("cudnn", s.cudnn);
  v("nccl", s.nccl);
  v("devices", s.devices);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeMemoryStats>) {
  MemoryFields(v, s, kNodeMemoryKeys);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeRankStats>) {
  v("rank", s.rank);
  v("node_id", s.node_id);
  v("host", s.host);
  v("tokens_per_second", s.tokens_per_second);
  v("step_ms", s.step_ms);
  v("data_wait_ms", s.data_wait_ms);
  v("comm_total_ms", s.comm_total_ms);
  v("comm_exposed_ms", s.comm_exposed_ms);
  v("memory", s.memory);
  v("memory_resumed", s.memory_resumed);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeScaling>) {
  v("tokens_per_second", s.tokens_per_second);
  v("tokens_per_second_per_rank", s.tokens_per_second_per_rank);
  v("single_tokens_per_second", s.single_tokens_per_second);
  v("efficiency", s.efficiency);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeCommLevel>) {
  v("group_size", s.group_size);
  v("groups", s.groups);
  v("bytes", s.bytes);
  v("allreduce_ms", s.allreduce_ms);
  v("gb_per_second", s.gb_per_second);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeComm>) {
  v("backend", s.backend);
  v("total_ms_per_step", s.total_ms_per_step);
  v("exposed_ms_per_step", s.exposed_ms_per_step);
  v("exposed_fraction", s.exposed_fraction);
  v("collectives_per_step", s.collectives_per_step);
  v("buckets", s.buckets);
  v("units", s.units);
  v("nodes", s.nodes, kOmitIfUnset);
  v("intra_node", s.intra_node, kOmitIfUnset);
  v("inter_node", s.inter_node, kOmitIfUnset);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeMemory>) {
  v("fresh_peak_bytes", s.fresh_peak_bytes);
  v("resumed_peak_bytes", s.resumed_peak_bytes);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeCheckpoint>) {
  v("path", s.path);
  v("step", s.step);
  v("bytes", s.bytes);
  v("save_seconds", s.save_seconds);
  v("shards", s.shards);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeRestore>) {
  v("world_size", s.world_size);
  v("from_world_size", s.from_world_size);
  v("ran", s.ran);
  v("equal", s.equal);
  v("mode", s.mode, kMayBeAbsent);
  v("tolerance", s.tolerance);
  v("first_rel_loss_diff", s.first_rel_loss_diff, kMayBeAbsent);
  v("first_tolerance", s.first_tolerance, kMayBeAbsent);
  v("noise_margin", s.noise_margin, kMayBeAbsent);
  v("noise_max_ratio", s.noise_max_ratio, kMayBeAbsent);
  v("noise_steps", s.noise_steps, kMayBeAbsent);
  v("max_abs_loss_diff", s.max_abs_loss_diff);
  v("max_rel_loss_diff", s.max_rel_loss_diff);
  v("max_abs_param_diff", s.max_abs_param_diff);
  v("max_rel_param_diff", s.max_rel_param_diff);
  v("load_seconds", s.load_seconds);
  v("detail", s.detail);
  v("skipped", s.skipped);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeFailure>) {
  v("phase", s.phase);
  v("rank", s.rank);
  v("message", s.message);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeStage>) {
  v("status", s.status);
  v("world_size", s.world_size);
  v("mode", s.mode);
  v("launcher", s.launcher);
  v("data_ranks", s.data_ranks);
  v("steps", s.steps);
  v("losses", s.losses);
  v("ranks", s.ranks);
  v("scaling", s.scaling);
  v("comm", s.comm);
  v("data_stall_ms_per_step", s.data_stall_ms_per_step);
  v("memory", s.memory);
  v("checkpoint", s.checkpoint);
  v("restore", s.restore);
  v("failure", s.failure);
}

// "stages" groups two members of Results; a view of them gives the group
// its field list. R is Results or const Results.
template <class R>
struct ResultsStages {
  R* r;
};

template <class V, class S, class R>
void Fields(V& v, S& s, std::type_identity<ResultsStages<R>>) {
  v("single", s.r->single);
  // Files written before the node stage existed have no "node".
  v("node", s.r->node, kMayBeAbsent);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<SupervisedProcess>) {
  v("role", s.role, OneOf{{"single", "restore", "node"}});
  v("exit_code", s.exit_code);
  v("signal", s.signal, IntRange{0, 128});
  v("wall_seconds", s.wall_seconds);
  v("report_bytes", s.report_bytes);
  v("report_problem", s.report_problem);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<DeviceMemorySample>) {
  v("index", s.index, IntRange{0, 1024});
  v("uuid", s.uuid);
  v("peak_used_bytes", s.peak_used_bytes);
  v("total_bytes", s.total_bytes);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<SupervisorInfo>) {
  v("version", s.version);
  v("started_at", s.started_at);
  v("finished_at", s.finished_at);
  v("wall_seconds", s.wall_seconds);
  v("processes", s.processes);
  v("checkpoint_manifest_sha256", s.checkpoint_manifest_sha256);
  v("restore_compared", s.restore_compared);
  v("stopped", s.stopped, kMayBeAbsent);
  v("stopped_reason", s.stopped_reason, kMayBeAbsent);
  v("ptrace_scope", s.ptrace_scope, IntRange{-1, 3}, kMayBeAbsent);
  v("environment", s.environment);
  v("test_switches", s.test_switches);
  v("device_memory_source", s.device_memory_source);
  v("device_memory", s.device_memory);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ProgramProcess>) {
  v("stage", s.stage, OneOf{{"single", "node"}});
  v("process", s.process, OneOf{{"reference", "resumed", "repeat"}});
  v("rank", s.rank);
  v("exit_code", s.exit_code);
  v("signal", s.signal);
  v("terminated", s.terminated);
  v("wall_seconds", s.wall_seconds);
  v("records", s.records);
  v("first_step", s.first_step);
  v("last_step", s.last_step);
  v("stderr_tail", s.stderr_tail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointRead>) {
  v("watched", s.watched);
  v("problem", s.problem);
  v("files", s.files, IntRange{0, INT32_MAX});
  v("bytes", s.bytes, IntRange{0, INT64_MAX});
  v("opened_files", s.opened_files, IntRange{0, INT32_MAX});
  v("opened_bytes", s.opened_bytes, IntRange{0, INT64_MAX});
  v("read_measured", s.read_measured, kMayBeAbsent);
  v("read_problem", s.read_problem, kMayBeAbsent);
  v("read_files", s.read_files, IntRange{0, INT32_MAX}, kMayBeAbsent);
  v("read_bytes", s.read_bytes, IntRange{0, INT64_MAX}, kMayBeAbsent);
  v("first_record_seconds", s.first_record_seconds, kMayBeAbsent);
  v("outside_opens", s.outside_opens, IntRange{0, INT32_MAX}, kMayBeAbsent);
  v("outside_example", s.outside_example, kMayBeAbsent);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<PhaseBusy>) {
  v("stage", s.stage);
  v("process", s.process);
  v("seconds", s.seconds, NumRange{0, 1e9});
  v("cpu_cores", s.cpu_cores, NumRange{0, 1e6});
  v("device_utilization", s.device_utilization, NumRange{-1, 1});
  v("steps", s.steps, NumRange{0, 1e12}, kMayBeAbsent);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<PhaseStart>) {
  v("stage", s.stage);
  v("process", s.process);
  v("first_step", s.first_step, IntRange{0, INT64_MAX});
  v("seconds", s.seconds, NumRange{0, 1e9});
  v("cpu_seconds", s.cpu_seconds, NumRange{0, 1e9});
  v("save_step_cpu_seconds", s.save_step_cpu_seconds, NumRange{-1, 1e9});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointSaves>) {
  v("saved_by_unix", s.saved_by_unix, NumRange{0, 1e11});
  v("at_step_files", s.at_step_files, IntRange{0, INT32_MAX});
  v("at_step_bytes", s.at_step_bytes, IntRange{0, INT64_MAX});
  v("later_files", s.later_files, IntRange{0, INT32_MAX});
  v("later_bytes", s.later_bytes, IntRange{0, INT64_MAX});
  v("later_example", s.later_example);
  v("rewritten", s.rewritten);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<StepMemory>) {
  v("step", s.step, IntRange{0, INT64_MAX});
  v("peak_allocated_bytes", s.peak_allocated_bytes, IntRange{-1, INT64_MAX});
  v("peak_reserved_bytes", s.peak_reserved_bytes, IntRange{-1, INT64_MAX});
  v("peak_rss_bytes", s.peak_rss_bytes, IntRange{-1, INT64_MAX});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ProgramPrecision>) {
  v("reported", s.reported);
  v("autocast", s.autocast);
  v("autocast_device", s.autocast_device);
  v("param_dtype", s.param_dtype);
  v("grad_scaler", s.grad_scaler);
  v("steps", s.steps, IntRange{0, INT64_MAX});
  v("autocast_steps", s.autocast_steps, IntRange{0, INT64_MAX});
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ProgramContainer>) {
  v("runtime", s.runtime, OneOf{{"podman", "apptainer", "pyxis"}});
  v("image", s.image);
  v("digest", s.digest);
  v("digest_source", s.digest_source, kMayBeAbsent, OneOf{{"", "runtime", "file", "reference"}});
  v("image_id", s.image_id);
  v("problem", s.problem);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ProgramEnvironment>) {
  v("python", s.python);
  v("torch", s.torch);
  v("cuda", s.cuda);
  v("hip", s.hip);
  v("nccl", s.nccl);
  v("cudnn", s.cudnn);
  v("gpu", s.gpu);
  v("gpu_capability", s.gpu_capability);
  v("gpu_count", s.gpu_count, IntRange{0, 1 << 20});
  v("distributions", s.distributions, kMayBeAbsent);
  v("extensions", s.extensions, kMayBeAbsent);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<StateComponentDiff>) {
  v("rank", s.rank, IntRange{0, 1 << 20});
  v("component", s.component);
  v("saved", s.saved);
  v("restored", s.restored);
  v("equal", s.equal);
  v("saved_detail", s.saved_detail);
  v("restored_detail", s.restored_detail);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<ProgramInfo>) {
  v("command", s.command);
  v("workdir", s.workdir);
  v("launcher", s.launcher);
  v("metrics", s.metrics);
  v("shape_reported", s.shape_reported);
  v("checkpoint_dir", s.checkpoint_dir);
  v("checkpoint_files", s.checkpoint_files);
  v("checkpoint_file_count", s.checkpoint_file_count);
  v("checkpoint_bytes", s.checkpoint_bytes);
  v("lr_compared", s.lr_compared);
  v("eval_compared", s.eval_compared);
  v("problems", s.problems);
  v("processes", s.processes);
  v("checkpoint_read", s.checkpoint_read, kMayBeAbsent);
  v("outlived", s.outlived, kMayBeAbsent);
  v("busy", s.busy, kMayBeAbsent);
  v("starts", s.starts, kMayBeAbsent);
  v("checkpoint_saves", s.checkpoint_saves, kMayBeAbsent);
  v("memory_steps", s.memory_steps, kMayBeAbsent);
  v("memory_limit_bytes", s.memory_limit_bytes, IntRange{0, INT64_MAX}, kMayBeAbsent);
  v("precision", s.precision, kMayBeAbsent);
  v("environment", s.environment, kMayBeAbsent);
  v("container", s.container, kMayBeAbsent);
  v("state", s.state, kMayBeAbsent);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<Results>) {
  v("schema", s.schema);
  v("workload", s.workload, OneOf{{"builtin", "program"}}, kMayBeAbsent);
  v("instance", s.instance, kMayBeAbsent);
  v("config_path", s.config_path);
  v("config_sha256", s.config_sha256);
  v("lock_path", s.lock_path);
  v("seed", s.seed);
  v("started_at", s.started_at);
  v("finished_at", s.finished_at);
  v("exit_code", s.exit_code);
  v("versions", s.versions);
  // Files written before the allocator settings were recorded lack them.
  v("alloc_conf", s.alloc_conf, kMayBeAbsent);
  ResultsStages<S> stages{&s};
  v("stages", stages);
  v("supervisor", s.supervisor, kOmitIfUnset);
  v("program", s.program, kOmitIfUnset);
}

const std::vector<RecordKey>& ResultsKeys() {
  static const std::vector<RecordKey> k = RecordKeysDeep<Results>();
  return k;
}

std::string ResultsToJson(const Results& r) {
  return DumpJson(RecordToJson<nlohmann::ordered_json>(r, kMeasuredStyle), 2) + "\n";
}

Result<Results> ParseResults(const std::string& text, const std::string& name) {
  auto fail = [&](const Status& s) { return s.Context(name); };
  if (text.size() > kResultsMaxBytes) {
    return fail(Status::Invalid("", "larger than " + std::to_string(kResultsMaxBytes) + " bytes"));
  }
  // A sorted map, not ordered_json: its inserts scan the object, so a file
  // of a million short keys would take minutes (an unknown key is then
  // reported in name order rather than file order).
  Result<Json> parsed = ParseJsonText(text, "", kResultsMaxBytes);
  if (!parsed.ok()) return fail(Status::Invalid("", parsed.status().detail()));
  const Json& j = *parsed;
  Results r;
  // The schema first: a different version is reported as such, not as the
  // first field it happens to lack.
  if (j.is_object()) {
    auto schema = j.find("schema");
    if (schema == j.end()) return fail(Status::Invalid("schema", "missing"));
    PILOT_RETURN_IF_ERROR(fail(RecordValueFromJson(*schema, "schema", &r.schema, kMeasuredStyle)));
    if (r.schema != kResultsSchema) {
      return fail(Status::Invalid("schema", "unsupported \"" + r.schema.substr(0, 64) +
                                                "\", expected \"" + kResultsSchema + "\""));
    }
  }
  PILOT_RETURN_IF_ERROR(fail(RecordFromJson(j, &r, kMeasuredStyle)));
  return r;
}

Result<Results> ReadResultsFile(const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kResultsMaxBytes));
  return ParseResults(text, path);
}

}  // namespace pilot
