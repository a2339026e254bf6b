// The safetensors header reader (no libtorch: see safetensors_header.h).
#include "runner/ckpt/safetensors_header.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace pilot::runner {
namespace {

constexpr int64_t kMaxHeader = 100ll << 20;  // refuse larger headers

struct DtypeSize {
  const char* name;
  int64_t bytes;
};
// The dtypes runner/ckpt/safetensors.cc writes (its kDtypes).
constexpr DtypeSize kDtypeSizes[] = {
    {"F32", 4}, {"BF16", 2}, {"F16", 2}, {"F64", 8}, {"I64", 8},
    {"I32", 4}, {"I16", 2},  {"I8", 1},  {"U8", 1},  {"BOOL", 1},
};

}  // namespace

const SafetensorsEntry* SafetensorsHeader::Find(const std::string& name) const {
  for (const auto& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

int64_t SafetensorsDtypeSize(std::string_view dtype) {
  for (const auto& d : kDtypeSizes) {
    if (dtype == d.name) return d.bytes;
  }
  return 0;
}

Result<int64_t> SafetensorsHeaderLength(std::string_view prefix, int64_t file_size,
                                        const std::string& path) {
  if (file_size < 8 || prefix.size() < 8) {
    return Status::Corrupt(path, "shorter than the 8-byte header length");
  }
  uint64_t hl = 0;
  for (int i = 7; i >= 0; --i) hl = (hl << 8) | static_cast<unsigned char>(prefix[i]);
  if (hl > static_cast<uint64_t>(kMaxHeader) || static_cast<int64_t>(hl) > file_size - 8) {
    return Status::Corrupt(path, "header length " + std::to_string(hl) + " is out of range");
  }
  return static_cast<int64_t>(hl);
}

Result<SafetensorsHeader> ParseSafetensorsHeader(std::string_view text, int64_t file_size,
                                                 const std::string& path) {
  SafetensorsHeader out;
  out.file_size = file_size;
  out.data_start = 8 + static_cast<int64_t>(text.size());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Corrupt(path, "header is not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Status::Corrupt(path, "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return Status::Corrupt(path, "__metadata__." + m.key() + " is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const auto& v = *it;
    SafetensorsEntry e;
    e.name = it.key();
    auto bad = [&](const std::string& why) { return Status::Corrupt(path, "tensor " + e.name + ": " + why); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
      return bad("needs dtype, shape and data_offsets");
    }
    if (!v["dtype"].is_string()) return bad("dtype is not a string");
    e.dtype = v["dtype"].get<std::string>();
    const int64_t es = SafetensorsDtypeSize(e.dtype);
    if (es == 0) return bad("unknown dtype " + e.dtype);
    if (!v["shape"].is_array()) return bad("shape is not an array");
    // numel * element size, checked: a hostile shape must not overflow.
    int64_t bytes = es;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return bad("bad shape");
      e.shape.push_back(d.get<int64_t>());
      if (__builtin_mul_overflow(bytes, e.shape.back(), &bytes)) return bad("shape overflows");
    }
    const auto& o = v["data_offsets"];
    if (!o.is_array() || o.size() != 2 || !o[0].is_number_integer() || !o[1].is_number_integer()) {
      return bad("data_offsets is not [begin, end]");
    }
    e.begin = o[0].get<int64_t>();
    e.end = o[1].get<int64_t>();
    if (e.begin < 0 || e.end < e.begin || e.end - e.begin != bytes) {
      return bad("data_offsets do not match dtype and shape");
    }
    out.entries.push_back(std::move(e));
  }
  std::sort(out.entries.begin(), out.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.begin < b.begin; });
  int64_t expect = 0;
  for (const auto& e : out.entries) {
    if (e.begin != expect) return Status::Corrupt(path, "tensor " + e.name + ": data not contiguous");
    expect = e.end;
  }
  // (data_start <= file_size: SafetensorsHeaderLength checked the length.)
  if (expect != out.file_size - out.data_start) {
    return Status::Corrupt(path, "file has " + std::to_string(out.file_size - out.data_start) +
                                     " bytes of data, header describes " + std::to_string(expect));
  }
  return out;
}

}  // namespace pilot::runner
