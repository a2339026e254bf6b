// Checkpoint metadata: the field lists below (core/records/record.h) drive the
// writers and the strict readers.
#include "core/records/checkpoint_meta.h"

#include <nlohmann/json.hpp>

#include "core/base/json_util.h"
#include "core/records/record.h"

namespace pilot {
namespace {

// Written by the runner for itself: kCorrupt like the other pinned files,
// and a diverged loss must survive the round trip.
constexpr JsonStyle kCheckpointStyle{Code::kCorrupt, false, "unknown field", true, ""};

std::string CheckPlainName(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
    return "not a plain file name";
  }
  return "";
}

}  // namespace

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointState::Data>) {
  v("format", s.format);
  v("next_index", s.next_index);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointState::Scheduler>) {
  v("kind", s.kind);
  v("horizon", s.horizon);
  v("lr_last", s.lr_last);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointState::Scaler>) {
  v("precision", s.precision);
  v("scale", s.scale);
  v("growth_tracker", s.growth_tracker);
  v("skipped", s.skipped);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointState::Rng>) {
  v("cpu", s.cpu);
  v("cuda", s.cuda);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointState::Model>) {
  v("kind", s.kind);
  v("params", s.params);
  v("layers", s.layers, kOmitIfUnset);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointState::Eval>) {
  v("batches", s.batches);
  v("loss", s.loss);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointState>) {
  v("schema", s.schema);
  v("step", s.step);
  v("seed", s.seed);
  v("data", s.data);
  v("scheduler", s.scheduler);
  v("scaler", s.scaler);
  v("rng", s.rng);
  v("config_sha256", s.config_sha256);
  v("device", s.device);
  v("model", s.model);
  v("optimizer", s.optimizer);
  v("eval", s.eval);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointFile>) {
  v("name", s.name, Validate{&CheckPlainName});
  v("bytes", s.bytes);
  v("sha256", s.sha256);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<CheckpointManifest>) {
  v("schema", s.schema);
  v("step", s.step);
  v("files", s.files);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeParamSlot>) {
  v("name", s.name);
  v("shape", s.shape);
  v("numel", s.numel);
  v("chunk", s.chunk);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeShardFile>) {
  v("name", s.name, Validate{&CheckPlainName});
  v("rank", s.rank);
  v("bytes", s.bytes);
  v("sha256", s.sha256);
}

template <class V, class S>
void Fields(V& v, S& s, std::type_identity<NodeCheckpointManifest>) {
  v("schema", s.schema);
  v("step", s.step);
  v("world_size", s.world_size);
  v("data_ranks", s.data_ranks);
  v("mode", s.mode);
  v("seed", s.seed);
  v("optimizer", s.optimizer);
  v("optimizer_step", s.optimizer_step);
  v("states", s.states);
  v("params", s.params);
  v("files", s.files);
}

namespace {

template <class T>
Result<T> Parse(std::string_view text, const std::string& label, size_t max_bytes,
                const char* schema) {
  PILOT_ASSIGN_OR_RETURN(Json j, ParseJsonText(text, label, max_bytes));
  PILOT_RETURN_IF_ERROR(CheckJsonSchema(j, label, schema, kCheckpointStyle));
  T out;
  PILOT_RETURN_IF_ERROR(RecordFromJson(j, &out, kCheckpointStyle).Context(label));
  return out;
}

}  // namespace

std::string CheckpointStateToJson(const CheckpointState& s) {
  return DumpJson(RecordToJson<nlohmann::ordered_json>(s, kCheckpointStyle), 2) + "\n";
}

std::string CheckpointManifestToJson(const CheckpointManifest& m) {
  return DumpJson(RecordToJson<nlohmann::ordered_json>(m, kCheckpointStyle), 2) + "\n";
}

std::string NodeCheckpointManifestToJson(const NodeCheckpointManifest& m) {
  return DumpJson(RecordToJson<nlohmann::json>(m, kCheckpointStyle), 2) + "\n";
}

Result<CheckpointState> ParseCheckpointState(std::string_view text, const std::string& label) {
  return Parse<CheckpointState>(text, label, kMaxCheckpointMetaBytes, kCheckpointSchema);
}

Result<CheckpointManifest> ParseCheckpointManifest(std::string_view text,
                                                   const std::string& label) {
  return Parse<CheckpointManifest>(text, label, kMaxCheckpointMetaBytes, kCheckpointSchema);
}

Result<NodeCheckpointManifest> ParseNodeCheckpointManifest(std::string_view text,
                                                           const std::string& label) {
  return Parse<NodeCheckpointManifest>(text, label, kMaxNodeManifestBytes,
                                       kNodeCheckpointSchema);
}

}  // namespace pilot
