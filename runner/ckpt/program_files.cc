// Format readers of program mode. Every reader returns a FileReading and
// never throws: libtorch's exceptions become the file's detail.
#include "runner/ckpt/program_files.h"

#include <unistd.h>

#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <memory>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/base/json_util.h"
#include "runner/ckpt/pickle.h"

namespace pilot::runner {
namespace {

constexpr int64_t kMaxHeader = 100ll << 20;        // safetensors header
constexpr int64_t kMaxPickle = 1ll << 30;          // data.pkl, .metadata
constexpr int64_t kMaxMetadataText = 1ll << 20;    // "metadata": small text
constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

bool PreadAll(int fd, int64_t off, char* p, int64_t n) {
  while (n > 0) {
    ssize_t r = ::pread(fd, p, static_cast<size_t>(std::min<int64_t>(n, 1ll << 30)), off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    off += r;
    n -= r;
  }
  return true;
}

FileReading Failed(const std::string& format, const std::string& detail) {
  FileReading r;
  r.format = format;
  r.failed = true;
  r.detail = detail;
  return r;
}

// safetensors' dtypes and their sizes.
int64_t StDtypeSize(const std::string& d) {
  static const std::map<std::string, int64_t> k = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2}, {"I64", 8},    {"I32", 4},     {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2},  {"U8", 1},     {"BOOL", 1},    {"F8_E4M3", 1},
      {"F8_E5M2", 1}, {"C64", 8}, {"C128", 16}};
  auto it = k.find(d);
  return it == k.end() ? 0 : it->second;
}

// numel * elem_size, or -1 on overflow or a negative dimension.
int64_t SpanBytes(const std::vector<int64_t>& shape, int64_t elem) {
  int64_t n = elem;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

FileReading ReadSafetensors(int fd, int64_t size, uint64_t header_len) {
  if (static_cast<int64_t>(header_len) > size - 8) {
    return Failed("safetensors", "header length " + std::to_string(header_len) + " runs past the end of the file (" +
                                     std::to_string(size) + " bytes): truncated");
  }
  std::string text(header_len, '\0');
  if (!PreadAll(fd, 8, text.data(), static_cast<int64_t>(header_len))) return Failed("safetensors", "cannot read the header");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Failed("safetensors", "header is not a JSON object");
  const int64_t data = size - 8 - static_cast<int64_t>(header_len);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& v = *it;
    auto bad = [&](const std::string& why) { return Failed("safetensors", "tensor " + it.key() + ": " + why); };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets")) {
      return bad("needs dtype, shape and data_offsets");
    }
    const int64_t es = v["dtype"].is_string() ? StDtypeSize(v["dtype"].get<std::string>()) : 0;
    if (es == 0) return bad("unknown dtype " + DumpJson(v["dtype"]));
    std::vector<int64_t> shape;
    if (!v["shape"].is_array()) return bad("shape is not an array");
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer()) return bad("shape holds a non-integer");
      shape.push_back(d.get<int64_t>());
    }
    const auto& o = v["data_offsets"];
    if (!o.is_array() || o.size() != 2 || !o[0].is_number_unsigned() || !o[1].is_number_unsigned()) {
      return bad("data_offsets is not [begin, end]");
    }
    const uint64_t b = o[0].get<uint64_t>(), e = o[1].get<uint64_t>();
    const int64_t want = SpanBytes(shape, es);
    if (want < 0) return bad("shape overflows");
    if (e < b || e - b != static_cast<uint64_t>(want)) {
      return bad("data_offsets span " + std::to_string(e - b) + " bytes, dtype and shape need " + std::to_string(want));
    }
    if (e > static_cast<uint64_t>(data)) {
      return bad("data ends at " + std::to_string(e) + ", past the file's " + std::to_string(data) + " bytes of data: truncated");
    }
    spans.emplace_back(static_cast<int64_t>(b), static_cast<int64_t>(e));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) {
    if (spans[k].first < spans[k - 1].second) return Failed("safetensors", "tensors' data overlap");
  }
  FileReading r;
  r.format = "safetensors";
  r.readable = true;
  r.tensors = static_cast<int64_t>(spans.size());
  r.detail = std::to_string(spans.size()) + " tensors";
  return r;
}

class FdAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  FdAdapter(int fd, int64_t size) : fd_(fd), size_(size) {}
  size_t size() const override { return static_cast<size_t>(size_); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(pos + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

 private:
  int fd_;
  int64_t size_;
};

std::string ExceptionText(const std::exception& e) {
  const auto* c = dynamic_cast<const c10::Error*>(&e);
  std::string s = c != nullptr ? c->what_without_backtrace() : e.what();
  const size_t nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  return s.substr(0, 300);
}

// Counts distinct tensors and looks for an optimizer's state_dict: a dict
// with "state" (a non-empty dict) and "param_groups". Depth-limited; each
// value is visited once, so shared or cyclic structures cost nothing more.
struct Walk {
  std::set<const PyValue*> seen;
  std::vector<const PyValue*> tensors;
  std::set<std::string> objects;  // classes whose instances were kept opaque
  bool optimizer = false;
  void Visit(const PyValue* v, int depth) {
    if (v == nullptr || depth > 256 || !seen.insert(v).second) return;
    if (v->kind == PyValue::kObject && objects.size() < 8) objects.insert(v->s);
    if (v->kind == PyValue::kTensor) {
      tensors.push_back(v);
      return;
    }
    if (v->kind == PyValue::kDict) {
      const PyValue* st = v->Get("state");
      if (st != nullptr && v->Get("param_groups") != nullptr && st->kind == PyValue::kDict && !st->dict.empty()) {
        optimizer = true;
      }
      for (const auto& [k, x] : v->dict) {
        Visit(k, depth + 1);
        Visit(x, depth + 1);
      }
    }
    for (const PyValue* x : v->items) Visit(x, depth + 1);
    Visit(v->state, depth + 1);
  }
};

std::string CheckView(const PyValue& t) {
  const PyValue& s = *t.storage;
  if (t.offset < 0) return "negative storage offset";
  int64_t last = t.offset;
  for (size_t k = 0; k < t.size.size(); ++k) {
    if (t.size[k] < 0 || t.stride[k] < 0) return "negative size or stride";
    if (t.size[k] == 0) return "";
    if (t.stride[k] != 0 && (t.size[k] - 1) > (std::numeric_limits<int64_t>::max() - last) / t.stride[k]) {
      return "size and stride overflow";
    }
    last += (t.size[k] - 1) * t.stride[k];
  }
  if (last >= s.numel) {
    return "view reaches element " + std::to_string(last) + " of a storage of " + std::to_string(s.numel);
  }
  return "";
}

uint32_t Crc32(const unsigned char* p, size_t n, uint32_t crc = 0) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint64_t LeAt(const std::string& b, size_t off, int n) {
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b[off + static_cast<size_t>(k)]);
  return v;
}

// The CRC-32 of every entry of a zip archive, by name, from its central
// directory (zip64 too). The archive reader of this libtorch does not check
// them, so a flipped byte in a tensor's data would read as fine.
Status ZipCrcs(int fd, int64_t size, std::map<std::string, uint32_t>* out) {
  const int64_t tail_len = std::min<int64_t>(size, 65557);
  std::string tail(static_cast<size_t>(tail_len), '\0');
  if (!PreadAll(fd, size - tail_len, tail.data(), tail_len)) return Status::Corrupt("zip", "cannot read its end");
  size_t eocd = tail.rfind(std::string("PK\x05\x06", 4));
  if (eocd == std::string::npos || eocd + 22 > tail.size()) return Status::Corrupt("zip", "no end of central directory");
  uint64_t entries = LeAt(tail, eocd + 10, 2), cd_size = LeAt(tail, eocd + 12, 4), cd_off = LeAt(tail, eocd + 16, 4);
  if (cd_off == 0xffffffffu || entries == 0xffffu || cd_size == 0xffffffffu) {
    if (eocd < 20 || tail.compare(eocd - 20, 4, std::string("PK\x06\x07", 4)) != 0) {
      return Status::Corrupt("zip", "zip64 locator missing");
    }
    const uint64_t z64 = LeAt(tail, eocd - 20 + 8, 8);
    std::string rec(56, '\0');
    if (z64 > static_cast<uint64_t>(size) - 56 || !PreadAll(fd, static_cast<int64_t>(z64), rec.data(), 56) ||
        rec.compare(0, 4, std::string("PK\x06\x06", 4)) != 0) {
      return Status::Corrupt("zip", "zip64 end of central directory missing");
    }
    entries = LeAt(rec, 32, 8);
    cd_size = LeAt(rec, 40, 8);
    cd_off = LeAt(rec, 48, 8);
  }
  if (cd_off > static_cast<uint64_t>(size) || cd_size > static_cast<uint64_t>(size) - cd_off || cd_size > (1u << 30)) {
    return Status::Corrupt("zip", "central directory out of range");
  }
  std::string cd(cd_size, '\0');
  if (!PreadAll(fd, static_cast<int64_t>(cd_off), cd.data(), static_cast<int64_t>(cd_size))) {
    return Status::Corrupt("zip", "cannot read the central directory");
  }
  size_t pos = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (pos + 46 > cd.size() || cd.compare(pos, 4, std::string("PK\x01\x02", 4)) != 0) {
      return Status::Corrupt("zip", "central directory entry " + std::to_string(e) + " is damaged");
    }
    const size_t n = LeAt(cd, pos + 28, 2), x = LeAt(cd, pos + 30, 2), c = LeAt(cd, pos + 32, 2);
    if (pos + 46 + n > cd.size()) return Status::Corrupt("zip", "central directory entry runs past its end");
    (*out)[cd.substr(pos + 46, n)] = static_cast<uint32_t>(LeAt(cd, pos + 16, 4));
    pos += 46 + n + x + c;
  }
  return Status::Ok();
}

// The name of the first entry of a zip file, from its local header.
std::string FirstZipName(int fd, int64_t size) {
  unsigned char h[30];
  if (size < 30 || !PreadAll(fd, 0, reinterpret_cast<char*>(h), 30)) return "";
  const int64_t n = h[26] | (h[27] << 8);
  std::string name(static_cast<size_t>(n), '\0');
  if (30 + n > size || !PreadAll(fd, 30, name.data(), n)) return "";
  return name;
}

bool EndsWith(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

FileReading ReadTorchZip(int fd, int64_t size) {
  FileReading r;
  r.format = "torch";
  try {
    caffe2::serialize::PyTorchStreamReader zip(std::make_shared<FdAdapter>(fd, size));
    if (!zip.hasRecord("data.pkl")) return Failed("torch", "zip archive without data.pkl");
    std::map<std::string, uint32_t> crcs;
    Status cs = ZipCrcs(fd, size, &crcs);
    if (!cs.ok()) return Failed("torch", cs.Message());
    const std::string first = FirstZipName(fd, size);
    const std::string prefix = first.substr(0, first.find('/') + 1);
    // A record's bytes against the CRC-32 its archive recorded.
    auto crc_ok = [&](const std::string& rec, const at::DataPtr& p, size_t n) {
      auto it = crcs.find(prefix + rec);
      return it != crcs.end() && Crc32(static_cast<const unsigned char*>(p.get()), n) == it->second;
    };
    auto [pkl, pkl_size] = zip.getRecord("data.pkl");
    if (!crc_ok("data.pkl", pkl, pkl_size)) return Failed("torch", "data.pkl: CRC-32 does not match the archive's");
    if (static_cast<int64_t>(pkl_size) > kMaxPickle) return Failed("torch", "data.pkl is larger than 1 GiB");
    UnpickleOptions opts;
    opts.torch_storages = true;
    Result<Pickle> p = Unpickle(std::string_view(static_cast<const char*>(pkl.get()), pkl_size), "data.pkl", opts);
    if (!p.ok()) {
      if (p.status().code() == Code::kCorrupt) return Failed("torch", p.status().Message());
      r.detail = p.status().Message();  // a class only the program knows: not readable, not broken
      return r;
    }
    for (const PyValue* st : p->storages) {
      const std::string rec = "data/" + st->s;
      if (!zip.hasRecord(rec)) return Failed("torch", "storage " + rec + " is missing from the archive");
      auto [bytes, n] = zip.getRecord(rec);
      if (!crc_ok(rec, bytes, n)) return Failed("torch", "storage " + rec + ": CRC-32 does not match the archive's");
      if (static_cast<int64_t>(n) != st->numel * st->elem_size) {
        return Failed("torch", "storage " + rec + " holds " + std::to_string(n) + " bytes, its " + st->dtype +
                                   " tensor needs " + std::to_string(st->numel * st->elem_size));
      }
    }
    Walk w;
    w.Visit(p->root, 0);
    for (const PyValue* t : w.tensors) {
      const std::string bad = CheckView(*t);
      if (!bad.empty()) return Failed("torch", "a tensor on storage data/" + t->storage->s + ": " + bad);
    }
    r.readable = true;
    r.tensors = static_cast<int64_t>(w.tensors.size());
    r.optimizer_state = w.optimizer;
    std::string top = p->root->kind == PyValue::kDict ? "a dict of " + std::to_string(p->root->dict.size()) + " keys"
                                                      : "a value";
    r.detail = top + ", " + std::to_string(r.tensors) + " tensors over " + std::to_string(p->storages.size()) +
               " storages" + (w.optimizer ? ", optimizer state" : "");
    if (!w.objects.empty()) {
      // Read as names and state, never constructed (runner/ckpt/pickle.h).
      std::string names;
      for (const std::string& o : w.objects) names += (names.empty() ? "" : ", ") + o;
      r.detail += "; objects not constructed: " + names;
    }
    return r;
  } catch (const std::exception& e) {
    return Failed("torch", "not a readable torch.save archive: " + ExceptionText(e));
  }
}

}  // namespace

bool IsDcpShardName(const std::string& name) {
  if (name.rfind("__", 0) != 0 || !EndsWith(name, ".distcp")) return false;
  const std::string mid = name.substr(2, name.size() - 2 - 7);
  const size_t us = mid.find('_');
  if (us == std::string::npos || us == 0 || us + 1 == mid.size()) return false;
  for (size_t k = 0; k < mid.size(); ++k) {
    if (k != us && (mid[k] < '0' || mid[k] > '9')) return false;
  }
  return true;
}

namespace {

// ---- the single-file rows' recognisers and readers -------------------------

bool IsZip(const FileHead& f) { return f.bytes.substr(0, 4) == std::string_view("PK\x03\x04", 4); }

// A zip archive whose first entry is one torch.save writes first.
bool IsTorchZip(const FileHead& f) {
  if (!IsZip(f)) return false;
  const std::string first = FirstZipName(f.fd, f.size);
  return EndsWith(first, "/data.pkl") || EndsWith(first, "/version") ||
         EndsWith(first, "/.format_version") || EndsWith(first, "/byteorder");
}

FileReading ReadTorchZipFile(const FileHead& f) { return ReadTorchZip(f.fd, f.size); }

FileReading ReadOtherZip(const FileHead&) {
  FileReading r;
  r.format = "other";
  r.detail = "a zip archive that is not a torch.save archive";
  return r;
}

bool IsLegacyTorch(const FileHead& f) {
  return f.bytes.substr(0, 14) == std::string_view(kLegacyMagic, 14);
}

FileReading ReadLegacyTorch(const FileHead&) {
  FileReading r;
  r.format = "torch-legacy";
  r.detail =
      "a torch.save of the format before 1.6 (not a zip archive): readable only by Python's "
      "unpickler";
  return r;
}

// The 8-byte little-endian header length, 0 when the bytes after it do not
// open a JSON object.
uint64_t SafetensorsHeaderLength(const FileHead& f) {
  if (f.bytes.size() < 9 || f.bytes[8] != '{') return 0;
  uint64_t hl = 0;
  for (int k = 7; k >= 0; --k) {
    hl = (hl << 8) | static_cast<unsigned char>(f.bytes[static_cast<size_t>(k)]);
  }
  return hl;
}

bool IsSafetensors(const FileHead& f) {
  const uint64_t hl = SafetensorsHeaderLength(f);
  return hl >= 2 && hl <= static_cast<uint64_t>(kMaxHeader);
}

FileReading ReadSafetensorsFile(const FileHead& f) {
  return ReadSafetensors(f.fd, f.size, SafetensorsHeaderLength(f));
}

bool IsNumpy(const FileHead& f) { return f.bytes.substr(0, 6) == std::string_view("\x93NUMPY", 6); }

FileReading ReadNumpy(const FileHead&) {
  FileReading r;
  r.format = "other";
  r.detail = "a NumPy array file";
  return r;
}

FileReading NoFormat() {
  FileReading r;
  r.format = "other";
  r.detail = "contents of no format read independently";
  return r;
}

bool IsSmall(const FileHead& f) { return f.size <= kMaxMetadataText; }

// Small text (JSON, YAML, notes): no NUL byte. Anything else small is of no
// format.
FileReading ReadSmallText(const FileHead& f) {
  std::string text(static_cast<size_t>(f.size), '\0');
  if (f.size > 0 && !PreadAll(f.fd, 0, text.data(), f.size)) return Failed("other", "cannot read");
  if (text.find('\0') != std::string::npos) return NoFormat();
  FileReading r;
  r.format = "metadata";
  r.readable = true;
  r.detail = "text, " + std::to_string(f.size) + " bytes";
  return r;
}

// ---- the directory rows ----------------------------------------------------

bool IsDcpMember(const std::string& name) { return name == ".metadata" || IsDcpShardName(name); }

}  // namespace

const std::vector<ProgramFormat>& ProgramFormats() {
  // program_files.h says what a row is and how to add one. Rows are tried
  // in this order: the first whose `recognise` accepts a file reads it.
  static const std::vector<ProgramFormat> kProgramFormats = {
      {.name = "torch", .checkpoint = true, .recognise = IsTorchZip, .read = ReadTorchZipFile},
      {.name = "other", .checkpoint = false, .recognise = IsZip, .read = ReadOtherZip},
      {.name = "torch-legacy",
       .checkpoint = false,
       .recognise = IsLegacyTorch,
       .read = ReadLegacyTorch},
      {.name = "safetensors",
       .checkpoint = true,
       .recognise = IsSafetensors,
       .read = ReadSafetensorsFile},
      {.name = "other", .checkpoint = false, .recognise = IsNumpy, .read = ReadNumpy},
      {.name = "metadata", .checkpoint = false, .recognise = IsSmall, .read = ReadSmallText},
      {.name = "dcp",
       .checkpoint = true,
       .member = IsDcpMember,
       .index = ".metadata",
       .read_directory = ReadDcpDirectory},
  };
  return kProgramFormats;
}

const ProgramFormat* DirectoryFormatOf(const std::string& file_name) {
  for (const ProgramFormat& f : ProgramFormats()) {
    if (f.member != nullptr && f.member(file_name)) return &f;
  }
  return nullptr;
}

bool IsCheckpointFormat(const std::string& format) {
  for (const ProgramFormat& f : ProgramFormats()) {
    if (f.checkpoint && format == f.name) return true;
  }
  return false;
}

FileReading ReadProgramFile(int fd, int64_t size, const std::string& label) {
  (void)label;
  char head[16] = {};
  const int64_t n = std::min<int64_t>(size, 16);
  if (n > 0 && !PreadAll(fd, 0, head, n)) return Failed("other", "cannot read");
  const FileHead f{fd, size, std::string_view(head, static_cast<size_t>(n))};
  for (const ProgramFormat& row : ProgramFormats()) {
    if (row.recognise != nullptr && row.recognise(f)) return row.read(f);
  }
  return NoFormat();
}

namespace {

// An attribute of a pickled instance: BUILD's state is its __dict__, or
// (None, slots) for a class with __slots__.
const PyValue* Attr(const PyValue* o, const char* name) {
  if (o == nullptr || o->kind != PyValue::kObject || o->state == nullptr) return nullptr;
  const PyValue* st = o->state;
  if (st->kind == PyValue::kTuple && st->items.size() == 2) {
    const PyValue* d = st->items[0]->kind == PyValue::kDict ? st->items[0] : st->items[1];
    const PyValue* v = d->Get(name);
    if (v != nullptr || d == st->items[1]) return v;
    return st->items[1]->Get(name);
  }
  return st->Get(name);
}

}  // namespace

DcpReading ReadDcpDirectory(const std::string& metadata, int64_t metadata_size,
                            const std::map<std::string, int64_t>& sizes, const std::string& label) {
  DcpReading out;
  FileReading meta;
  meta.format = "dcp";
  std::set<std::string> named;
  std::string why;
  if (metadata_size == 0) {
    meta.failed = true;
    meta.detail = "empty";
  } else if (metadata.empty()) {
    why = "larger than 256 MiB, or it could not be read";
  } else {
    UnpickleOptions opts;
    Result<Pickle> p = Unpickle(metadata, label + "/.metadata", opts);
    const PyValue* storage = nullptr;
    const PyValue* sdm = nullptr;
    if (!p.ok()) {
      why = p.status().Message();
    } else if ((storage = Attr(p->root, "storage_data")) == nullptr || storage->kind != PyValue::kDict ||
               (sdm = Attr(p->root, "state_dict_metadata")) == nullptr || sdm->kind != PyValue::kDict) {
      why = "not a Metadata with state_dict_metadata and storage_data";
    } else {
      for (const auto& [k, v] : sdm->dict) {
        if (v->kind == PyValue::kObject && EndsWith(v->s, "TensorStorageMetadata")) ++out.tensors;
        if (k->kind == PyValue::kStr && k->s.rfind("optim", 0) == 0 && k->s.find("state.") != std::string::npos) {
          out.optimizer_state = true;
        }
      }
      // Every stored item: a file of this directory, its byte range inside it.
      for (const auto& [k, v] : storage->dict) {
        const PyValue* rel = Attr(v, "relative_path");
        const PyValue* off = Attr(v, "offset");
        const PyValue* len = Attr(v, "length");
        if (rel == nullptr || rel->kind != PyValue::kStr || off == nullptr || off->kind != PyValue::kInt ||
            len == nullptr || len->kind != PyValue::kInt) {
          meta.failed = true;
          meta.detail = "a storage_data entry without relative_path, offset and length";
          break;
        }
        named.insert(rel->s);
        auto it = sizes.find(rel->s);
        if (it == sizes.end()) {
          meta.failed = true;
          meta.detail = "names " + rel->s + ", which is not in the directory";
          break;
        }
        if (off->i < 0 || len->i < 0 || off->i > it->second - len->i) {
          meta.failed = true;
          meta.detail = "names bytes " + std::to_string(off->i) + "+" + std::to_string(len->i) + " of " + rel->s +
                        ", which has " + std::to_string(it->second);
          break;
        }
      }
      if (!meta.failed) {
        meta.readable = true;
        meta.tensors = out.tensors;
        meta.detail = std::to_string(sdm->dict.size()) + " items, " + std::to_string(out.tensors) + " tensors, " +
                      std::to_string(storage->dict.size()) + " stored ranges in " + std::to_string(named.size()) +
                      " files";
      }
    }
  }
  if (!why.empty()) {
    meta.detail = "could not be read (" + why + "); only the shards' presence was checked";
  }
  out.readings[".metadata"] = meta;
  for (const auto& [name, size] : sizes) {
    if (!IsDcpShardName(name) && !named.count(name)) continue;
    ++out.shards;
    FileReading r;
    r.format = "dcp";
    if (size == 0) {
      r.failed = true;
      r.detail = "empty shard";
    } else if (meta.readable) {
      r.readable = named.count(name) > 0;
      r.detail = r.readable ? "its ranges lie within the file" : "a shard .metadata does not name";
    } else {
      r.detail = "non-empty; .metadata could not be read";
    }
    out.readings[name] = r;
  }
  return out;
}

}  // namespace pilot::runner
