// pilot.toml: the config loader from text (core/config/config.h ParseConfig), then
// what readers of an accepted config call (the JSON and table writers, the
// long run's step count).
#include <map>
#include <optional>

#include "core/config/config.h"
#include "core/config/load.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pilot::LoadOptions opts;
  opts.env = [](const std::string& name) -> std::optional<std::string> {
    static const std::map<std::string, std::string> kVars = {
        {"USER", "alice"}, {"HOME", "/home/alice"}, {"SLURM_JOB_ID", "42"}};
    auto it = kVars.find(name);
    if (it == kVars.end()) return std::nullopt;
    return it->second;
  };
  opts.base_dir = "/cfg";
  auto c = pilot::ParseConfig(std::string(pilot::fuzz::Text(data, size)), "pilot.toml", opts);
  if (c.ok()) {
    (void)c->RunTotalSteps();
    (void)pilot::ConfigToJson(*c);
    (void)pilot::ConfigToTable(*c);
  }
  return 0;
}
