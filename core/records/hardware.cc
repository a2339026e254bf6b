#include "core/records/hardware.h"

#include "core/base/atomic_file.h"
#include "core/base/strings.h"
#include "core/records/record_toml.h"

namespace pilot {
namespace {

constexpr size_t kMaxCatalogBytes = 1u << 20;

}  // namespace

const GpuType* HardwareCatalog::Find(const std::string& name) const {
  for (const auto& g : gpus) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

std::vector<std::string> HardwareCatalog::Names() const {
  std::vector<std::string> out;
  for (const auto& g : gpus) out.push_back(g.name);
  return out;
}

// One [gpu.NAME] section; the name is the section's, not a key.
template <class V, class S>
void Fields(V& v, S& s, std::type_identity<GpuType>) {
  v("memory_bytes", s.memory_bytes, IntRange{int64_t{1} << 30, int64_t{1} << 50});
  v("hbm_tb_per_s", s.hbm_tb_per_s, NumRange{0.01, 1000});
  v("bf16_tflops", s.bf16_tflops, NumRange{0.1, 1e6});
  v("link", s.link);
  v("link_gb_per_s", s.link_gb_per_s, NumRange{0, 1e6});
  v("stack", s.stack, OneOf{{"cuda", "rocm"}});
  v("price_per_gpu_hour", s.price_per_gpu_hour, NumRange{0, 1e6}, kMayBeAbsent);
  v("source", s.source, kMayBeAbsent);
  v("as_of", s.as_of, kMayBeAbsent);
  v("example", s.example, kMayBeAbsent);
}

const std::vector<std::string>& KnownHardwareKeys() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> names;
    for (const RecordKey& key : RecordKeys<GpuType>()) names.push_back(key.name);
    return names;
  }();
  return k;
}

Result<HardwareCatalog> ParseHardwareCatalog(std::string_view text, const std::string& path) {
  PILOT_ASSIGN_OR_RETURN(toml::table t, ParseTomlText(text, path));
  HardwareCatalog cat;
  cat.path = path;
  TomlReader r(t, path, "");
  r.Str("currency", &cat.currency);
  if (r.ok() && (cat.currency.empty() || cat.currency.size() > 8)) {
    r.Fail("currency", "must be a short currency code, e.g. \"USD\"");
  }
  r.Table(
      "gpu",
      [&](TomlReader& gpus) {
        gpus.EachTable([&](const std::string& name, TomlReader& g) {
          if (!IsSimpleName(name)) {
            g.Fail("", "GPU type names use letters, digits, '.', '_' and '-'");
            return;
          }
          GpuType x;
          x.name = name;
          ReadTomlRecord(g, &x);
          if (g.ok()) cat.gpus.push_back(std::move(x));
        });
      },
      TomlReader::kRequired);
  PILOT_RETURN_IF_ERROR(r.Finish());
  if (cat.gpus.empty()) return Status::Invalid(path, "no [gpu.NAME] sections");
  return cat;
}

Result<HardwareCatalog> LoadHardwareCatalog(const std::string& path) {
  auto text = ReadFileLimited(path, kMaxCatalogBytes);
  if (!text.ok()) return text.status();
  return ParseHardwareCatalog(*text, path);
}

const GpuType* GpuTypeOfDevice(const HardwareCatalog& cat, std::string_view device_name) {
  if (device_name.empty()) return nullptr;
  for (const GpuType& g : cat.gpus) {
    const std::string family = g.name.substr(0, g.name.find('-'));
    if (!family.empty() && device_name.find(family) != std::string_view::npos) return &g;
  }
  return nullptr;
}

}  // namespace pilot
