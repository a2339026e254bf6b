#include "core/hardware.h"

#include "core/atomic_file.h"
#include "core/toml_reader.h"

namespace pilot {
namespace {

constexpr size_t kMaxCatalogBytes = 1u << 20;

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

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

const std::vector<std::string>& KnownHardwareKeys() {
  static const std::vector<std::string> k = {
      "memory_bytes", "hbm_tb_per_s",       "bf16_tflops", "link",  "link_gb_per_s",
      "stack",        "price_per_gpu_hour", "source",      "as_of", "example"};
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
          if (!ValidName(name)) {
            g.Fail("", "GPU type names use letters, digits, '.', '_' and '-'");
            return;
          }
          GpuType x;
          x.name = name;
          g.Int64("memory_bytes", &x.memory_bytes, int64_t{1} << 30, int64_t{1} << 50,
                  TomlReader::kRequired);
          g.Num("hbm_tb_per_s", &x.hbm_tb_per_s, 0.01, 1000, TomlReader::kRequired);
          g.Num("bf16_tflops", &x.bf16_tflops, 0.1, 1e6, TomlReader::kRequired);
          g.Str("link", &x.link, TomlReader::kRequired);
          g.Num("link_gb_per_s", &x.link_gb_per_s, 0, 1e6, TomlReader::kRequired);
          g.Enum("stack", &x.stack, {"cuda", "rocm"}, TomlReader::kRequired);
          g.Num("price_per_gpu_hour", &x.price_per_gpu_hour, 0, 1e6);
          g.Str("source", &x.source).Str("as_of", &x.as_of).Bool("example", &x.example);
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

}  // namespace pilot
