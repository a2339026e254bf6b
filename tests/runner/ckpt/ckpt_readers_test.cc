// The checkpoint readers that need no libtorch (label unit): the
// safetensors header as the runner reads it and the restricted pickle
// reader, on hostile bytes (tests/fuzz fuzzes both; what it found is here).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "runner/ckpt/pickle.h"
#include "runner/ckpt/safetensors_header.h"

namespace pilot::runner {
namespace {

// The file's first 8 + N bytes for header JSON `json` (padded to 8).
std::string Prefix(std::string json) {
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string p(8, '\0');
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return p + json;
}

Result<SafetensorsHeader> Parse(const std::string& json, int64_t data_bytes) {
  const std::string p = Prefix(json);
  const auto size = static_cast<int64_t>(p.size()) + data_bytes;
  PILOT_ASSIGN_OR_RETURN(int64_t n, SafetensorsHeaderLength(p.substr(0, 8), size, "x.safetensors"));
  return ParseSafetensorsHeader(std::string_view(p).substr(8, static_cast<size_t>(n)), size,
                                "x.safetensors");
}

TEST(SafetensorsHeader, ReadsTheRunnersHeader) {
  auto h = Parse(R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
                 R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 12);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->entries.size(), 2u);
  EXPECT_EQ(h->entries[0].name, "a");
  EXPECT_EQ(h->entries[1].dtype, "BF16");
  EXPECT_EQ(h->metadata.at("format"), "pt");
  ASSERT_NE(h->Find("b"), nullptr);
  EXPECT_EQ(h->Find("b")->end, 12);
}

TEST(SafetensorsHeader, RefusesWhatDoesNotDescribeTheFile) {
  EXPECT_EQ(Parse(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 9).status().code(),
            Code::kCorrupt);
  EXPECT_EQ(Parse(R"({"a":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8).status().code(),
            Code::kCorrupt);
  EXPECT_EQ(Parse("[1]", 0).status().code(), Code::kCorrupt);
  EXPECT_EQ(SafetensorsHeaderLength(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8), 64, "x")
                .status()
                .code(),
            Code::kCorrupt);
  EXPECT_EQ(SafetensorsHeaderLength("abc", 3, "x").status().code(), Code::kCorrupt);
}

// Found with tests/fuzz's safetensors harness (UBSan: signed overflow): numel
// and its bytes were multiplied unchecked, and the data's end added to the
// header's length.
TEST(SafetensorsHeader, RefusesSizesThatOverflow) {
  auto h = Parse(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,0]}})", 0);
  EXPECT_EQ(h.status().code(), Code::kCorrupt);
  EXPECT_NE(h.status().Message().find("tensor a: shape overflows"), std::string::npos)
      << h.status().ToString();
  h = Parse(R"({"a":{"dtype":"I64","shape":[2305843009213693952],"data_offsets":[0,0]}})", 0);
  EXPECT_NE(h.status().Message().find("shape overflows"), std::string::npos) << h.status().ToString();
  h = Parse(R"({"a":{"dtype":"U8","shape":[9223372036854775800],)"
            R"("data_offsets":[0,9223372036854775800]}})",
            0);
  EXPECT_EQ(h.status().code(), Code::kCorrupt);
  EXPECT_NE(h.status().Message().find("header describes 9223372036854775800"), std::string::npos)
      << h.status().ToString();
}

}  // namespace
}  // namespace pilot::runner
