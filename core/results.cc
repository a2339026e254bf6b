// results.json: one field list per struct (Fields below) drives both the
// writer and the strict reader, so the two cannot drift apart.
#include "core/results.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"

namespace pilot {
namespace {

using Json = nlohmann::ordered_json;

// ---- field lists -----------------------------------------------------------
// `S` is the struct, const or not; `V` is called as v("key", field), or
// v("key", field, kMayBeAbsent) for an optional member that older files lack
// (read as null when absent; always written).

struct MayBeAbsent {};
constexpr MayBeAbsent kMayBeAbsent{};

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<MemoryStats>) {
  v("device", s.device);
  v("step", s.step);
  v("peak_allocated_bytes", s.peak_allocated_bytes);
  v("peak_reserved_bytes", s.peak_reserved_bytes);
  v("device_used_bytes", s.device_used_bytes);
  v("device_total_bytes", s.device_total_bytes);
  v("process_device_bytes", s.process_device_bytes);
  v("runtime_overhead_bytes", s.runtime_overhead_bytes);
  v("alloc_retries", s.alloc_retries);
  v("ooms", s.ooms);
  v("process_peak_rss_bytes", s.process_peak_rss_bytes);
  v("process_rss_bytes", s.process_rss_bytes);
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
void Fields(V& v, S& s, std::type_identity<MemoryCalibrationCheck>) {
  v("status", s.status);
  v("micro_batch", s.micro_batch);
  v("seq_len", s.seq_len);
  v("activation_checkpointing", s.activation_checkpointing);
  v("steps", s.steps);
  v("step", s.step);
  v("peak_allocated_bytes", s.peak_allocated_bytes);
  v("peak_reserved_bytes", s.peak_reserved_bytes);
  v("device_used_bytes", s.device_used_bytes);
  v("process_peak_rss_bytes", s.process_peak_rss_bytes);
  v("forward_backward_ms", s.forward_backward_ms, kMayBeAbsent);
  v("detail", s.detail);
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
  v("step", s.step);
  v("peak_allocated_bytes", s.peak_allocated_bytes);
  v("peak_reserved_bytes", s.peak_reserved_bytes);
  v("process_peak_rss_bytes", s.process_peak_rss_bytes);
  v("device_used_bytes", s.device_used_bytes, kMayBeAbsent);
  v("forward_peak_allocated_bytes", s.forward_peak_allocated_bytes, kMayBeAbsent);
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
void Fields(V& v, S& s, std::type_identity<NodeComm>) {
  v("backend", s.backend);
  v("total_ms_per_step", s.total_ms_per_step);
  v("exposed_ms_per_step", s.exposed_ms_per_step);
  v("exposed_fraction", s.exposed_fraction);
  v("collectives_per_step", s.collectives_per_step);
  v("buckets", s.buckets);
  v("units", s.units);
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
  v("tolerance", s.tolerance);
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

template <class T>
concept HasFields = requires(int& v, T& s) {
  Fields(v, s, std::type_identity<T>{});
};

// ---- writing ---------------------------------------------------------------

Json ToJson(bool b) { return b; }
Json ToJson(int i) { return i; }
Json ToJson(int64_t i) { return i; }
Json ToJson(const std::string& s) { return s; }
Json ToJson(double d) {
  // JSON has no NaN/Infinity; a diverged loss is worth recording.
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return d;
}
template <class T>
Json ToJson(const std::vector<T>& v);
template <class T>
Json ToJson(const std::optional<T>& o);
template <class T>
  requires HasFields<T>
Json ToJson(const T& s);

template <class T>
Json ToJson(const std::vector<T>& v) {
  Json a = Json::array();
  for (const T& x : v) a.push_back(ToJson(x));
  return a;
}
template <class T>
Json ToJson(const std::optional<T>& o) {
  return o ? ToJson(*o) : Json(nullptr);
}

struct Writer {
  Json* out;
  template <class T>
  void operator()(const char* key, const T& value) {
    (*out)[key] = ToJson(value);
  }
  template <class T>
  void operator()(const char* key, const T& value, MayBeAbsent) {
    (*this)(key, value);
  }
};

template <class T>
  requires HasFields<T>
Json ToJson(const T& s) {
  Json j = Json::object();
  Writer w{&j};
  Fields(w, s, std::type_identity<T>{});
  return j;
}

// ---- reading ---------------------------------------------------------------

std::string TypeName(const Json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "an array";
  return "an object";
}

Status Expected(const std::string& path, const char* what, const Json& j) {
  return Status::Invalid(path, std::string("expected ") + what + ", got " + TypeName(j));
}

Status FromJson(const Json& j, const std::string& path, bool* out) {
  if (!j.is_boolean()) return Expected(path, "a boolean", j);
  *out = j.get<bool>();
  return Status::Ok();
}
Status FromJson(const Json& j, const std::string& path, int64_t* out) {
  if (!j.is_number_integer()) return Expected(path, "an integer", j);
  *out = j.get<int64_t>();
  return Status::Ok();
}
Status FromJson(const Json& j, const std::string& path, int* out) {
  int64_t v = 0;
  PILOT_RETURN_IF_ERROR(FromJson(j, path, &v));
  if (v < INT32_MIN || v > INT32_MAX) return Status::Invalid(path, "integer out of range");
  *out = static_cast<int>(v);
  return Status::Ok();
}
Status FromJson(const Json& j, const std::string& path, double* out) {
  if (j.is_number()) {
    *out = j.get<double>();
    return Status::Ok();
  }
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (s == "nan") *out = std::nan("");
    else if (s == "inf") *out = INFINITY;
    else if (s == "-inf") *out = -INFINITY;
    else return Status::Invalid(path, "expected a number, got the string \"" + s.substr(0, 32) + "\"");
    return Status::Ok();
  }
  return Expected(path, "a number", j);
}
Status FromJson(const Json& j, const std::string& path, std::string* out) {
  if (!j.is_string()) return Expected(path, "a string", j);
  *out = j.get<std::string>();
  return Status::Ok();
}
template <class T>
Status FromJson(const Json& j, const std::string& path, std::vector<T>* out);
template <class T>
Status FromJson(const Json& j, const std::string& path, std::optional<T>* out);
template <class T>
  requires HasFields<T>
Status FromJson(const Json& j, const std::string& path, T* out);

template <class T>
Status FromJson(const Json& j, const std::string& path, std::vector<T>* out) {
  if (!j.is_array()) return Expected(path, "an array", j);
  out->clear();
  out->reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    T v{};
    PILOT_RETURN_IF_ERROR(FromJson(j[i], path + "[" + std::to_string(i) + "]", &v));
    out->push_back(std::move(v));
  }
  return Status::Ok();
}
template <class T>
Status FromJson(const Json& j, const std::string& path, std::optional<T>* out) {
  if (j.is_null()) {
    out->reset();
    return Status::Ok();
  }
  T v{};
  PILOT_RETURN_IF_ERROR(FromJson(j, path, &v));
  *out = std::move(v);
  return Status::Ok();
}

struct Reader {
  const Json* obj;
  std::string prefix;  // "stages.single." etc.
  Status status;
  std::set<std::string> known;
  template <class T>
  void operator()(const char* key, T& value) {
    known.insert(key);
    if (!status.ok()) return;
    auto it = obj->find(key);
    if (it == obj->end()) {
      status = Status::Invalid(prefix + key, "missing");
      return;
    }
    status = FromJson(*it, prefix + key, &value);
  }
  template <class T>
  void operator()(const char* key, std::optional<T>& value, MayBeAbsent) {
    if (obj->find(key) == obj->end()) {
      known.insert(key);
      value.reset();
      return;
    }
    (*this)(key, value);
  }
};

Status CheckObject(const Json& j, const std::string& path) {
  if (!j.is_object()) return Expected(path.empty() ? "(top level)" : path, "an object", j);
  return Status::Ok();
}

Status UnknownKeys(const Json& j, const std::string& prefix, const std::set<std::string>& known) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!known.count(it.key())) return Status::Invalid(prefix + it.key(), "unknown key");
  }
  return Status::Ok();
}

template <class T>
  requires HasFields<T>
Status FromJson(const Json& j, const std::string& path, T* out) {
  PILOT_RETURN_IF_ERROR(CheckObject(j, path));
  Reader r{&j, path + ".", Status::Ok(), {}};
  Fields(r, *out, std::type_identity<T>{});
  PILOT_RETURN_IF_ERROR(r.status);
  return UnknownKeys(j, r.prefix, r.known);
}

}  // namespace

std::string ResultsToJson(const Results& r) {
  Json j = Json::object();
  j["schema"] = r.schema;
  j["config_path"] = r.config_path;
  j["config_sha256"] = r.config_sha256;
  j["lock_path"] = r.lock_path;
  j["seed"] = r.seed;
  j["started_at"] = r.started_at;
  j["finished_at"] = r.finished_at;
  j["exit_code"] = r.exit_code;
  j["versions"] = ToJson(r.versions);
  j["alloc_conf"] = r.alloc_conf;
  Json stages = Json::object();
  stages["single"] = ToJson(r.single);
  stages["node"] = ToJson(r.node);
  j["stages"] = std::move(stages);
  return j.dump(2) + "\n";
}

Result<Results> ParseResults(const std::string& text, const std::string& name) {
  auto fail = [&](const Status& s) { return s.Context(name); };
  if (text.size() > kResultsMaxBytes) {
    return fail(Status::Invalid("", "larger than " + std::to_string(kResultsMaxBytes) + " bytes"));
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail(Status::Invalid("", "not valid JSON"));
  PILOT_RETURN_IF_ERROR(fail(CheckObject(j, "")));
  Results r;
  // The schema first: a different version is reported as such, not as the
  // first field it happens to lack.
  auto schema = j.find("schema");
  if (schema == j.end()) return fail(Status::Invalid("schema", "missing"));
  PILOT_RETURN_IF_ERROR(fail(FromJson(*schema, "schema", &r.schema)));
  if (r.schema != kResultsSchema) {
    return fail(Status::Invalid("schema", "unsupported \"" + r.schema.substr(0, 64) +
                                              "\", expected \"" + kResultsSchema + "\""));
  }
  Reader top{&j, "", Status::Ok(), {"schema"}};
  top("config_path", r.config_path);
  top("config_sha256", r.config_sha256);
  top("lock_path", r.lock_path);
  top("seed", r.seed);
  top("started_at", r.started_at);
  top("finished_at", r.finished_at);
  top("exit_code", r.exit_code);
  top("versions", r.versions);
  // Files written before the allocator settings were recorded lack them.
  if (j.contains("alloc_conf")) {
    top("alloc_conf", r.alloc_conf);
  } else {
    top.known.insert("alloc_conf");
  }
  if (top.status.ok()) {
    auto stages = j.find("stages");
    top.known.insert("stages");
    if (stages == j.end()) {
      top.status = Status::Invalid("stages", "missing");
    } else if (!stages->is_object()) {
      top.status = Expected("stages", "an object", *stages);
    } else {
      Reader st{&*stages, "stages.", Status::Ok(), {}};
      st("single", r.single);
      // Files written before the node stage existed have no "node".
      if (stages->contains("node")) {
        st("node", r.node);
      } else {
        st.known.insert("node");
      }
      top.status = st.status;
      if (top.status.ok()) top.status = UnknownKeys(*stages, "stages.", st.known);
    }
  }
  PILOT_RETURN_IF_ERROR(fail(top.status));
  PILOT_RETURN_IF_ERROR(fail(UnknownKeys(j, "", top.known)));
  return r;
}

Result<Results> ReadResultsFile(const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kResultsMaxBytes));
  return ParseResults(text, path);
}

}  // namespace pilot
