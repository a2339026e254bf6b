// A checkpoint's metadata (core/records/checkpoint_meta.h): state.json, the single
// stage's manifest.json and the node stage's manifest, each read back from
// its own writing. Every input goes to all three readers.
#include "core/records/checkpoint_meta.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = pilot::fuzz::Text(data, size);
  pilot::fuzz::RoundTrip(
      text, [](std::string_view t) { return pilot::ParseCheckpointState(t, "state.json"); },
      [](const pilot::CheckpointState& s) { return pilot::CheckpointStateToJson(s); });
  pilot::fuzz::RoundTrip(
      text, [](std::string_view t) { return pilot::ParseCheckpointManifest(t, "manifest.json"); },
      [](const pilot::CheckpointManifest& m) { return pilot::CheckpointManifestToJson(m); });
  pilot::fuzz::RoundTrip(
      text, [](std::string_view t) { return pilot::ParseNodeCheckpointManifest(t, "manifest.json"); },
      [](const pilot::NodeCheckpointManifest& m) { return pilot::NodeCheckpointManifestToJson(m); });
  return 0;
}
