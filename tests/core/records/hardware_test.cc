#include "core/records/hardware.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

const std::string kSrc = PILOT_SOURCE_DIR;

TEST(Hardware, ShippedCatalog) {
  auto c = LoadHardwareCatalog(kSrc + "/etc/hardware.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Names(), (std::vector<std::string>{"A100-80", "H100-80", "H200-141", "MI300X-192"}));
  EXPECT_EQ(c->currency, "USD");
  const GpuType* h200 = c->Find("H200-141");
  ASSERT_NE(h200, nullptr);
  EXPECT_GT(h200->memory_bytes, int64_t{140} * 1000 * 1000 * 1000);
  EXPECT_EQ(h200->stack, "cuda");
  EXPECT_EQ(c->Find("MI300X-192")->stack, "rocm");
  EXPECT_EQ(c->Find("B200"), nullptr);
  for (const auto& g : c->gpus) {
    EXPECT_TRUE(g.example) << g.name;
    EXPECT_EQ(g.as_of, "2026-11") << g.name;
    EXPECT_FALSE(g.source.empty()) << g.name;
    EXPECT_GT(g.price_per_gpu_hour, 0) << g.name;
    EXPECT_GT(g.bf16_tflops, 100) << g.name;
  }
  // Memory grows A100 = H100 < H200 < MI300X as the catalog says.
  EXPECT_LT(c->Find("H200-141")->memory_bytes, c->Find("MI300X-192")->memory_bytes);
}

TEST(Hardware, EveryKeyIsDocumented) {
  std::string man = testutil::ReadText(kSrc + "/man/pilot.conf.5");
  for (const auto& key : KnownHardwareKeys()) {
    EXPECT_NE(man.find(key), std::string::npos) << key;
  }
}

const char kGood[] = R"(currency = "EUR"
[gpu.X-1]
memory_bytes = 85899345920
hbm_tb_per_s = 2
bf16_tflops = 300
link = "NVLink"
link_gb_per_s = 600
stack = "cuda"
)";

TEST(Hardware, MinimalEntry) {
  auto c = ParseHardwareCatalog(kGood, "hw.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->currency, "EUR");
  EXPECT_EQ(c->gpus[0].price_per_gpu_hour, 0);
  EXPECT_FALSE(c->gpus[0].example);
}

TEST(Hardware, StrictErrors) {
  struct Case {
    std::string text;
    std::string message;
  };
  std::string good = kGood;
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  const Case cases[] = {
      {replace("stack = \"cuda\"", "stack = \"metal\""),
       "pilot: hw.toml:8: gpu.X-1.stack: must be one of \"cuda\", \"rocm\", got \"metal\""},
      {replace("memory_bytes = 85899345920", "memory_bytes = 80"),
       "pilot: hw.toml:3: gpu.X-1.memory_bytes: must be between 1073741824 and "
       "1125899906842624, got 80"},
      {replace("bf16_tflops = 300\n", ""),
       "pilot: hw.toml:2: gpu.X-1.bf16_tflops: missing (required)"},
      {replace("link = \"NVLink\"", "lnk = \"NVLink\""),
       "pilot: hw.toml:2: gpu.X-1.link: missing (required)"},
      {good + "colour = \"green\"\n", "pilot: hw.toml:9: gpu.X-1.colour: unknown key"},
      {"currency = \"USD\"\n", "pilot: hw.toml:1: gpu: missing (required)"},
      {"[gpu]\n", "pilot: hw.toml: no [gpu.NAME] sections"},
      {"[gpu]\nA100 = 3\n", "pilot: hw.toml:2: gpu.A100: expected a table, got an integer"},
  };
  for (const auto& c : cases) {
    auto r = ParseHardwareCatalog(c.text, "hw.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().ToString(), c.message) << c.text;
  }
}

}  // namespace
}  // namespace pilot
