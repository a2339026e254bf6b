// A restricted reader of Python pickles (protocols 2 to 5), for the files a
// training program saves with torch.save and torch.distributed.checkpoint:
// it runs no code and imports nothing. It builds plain values (None, bool,
// int, float, str, bytes, list, tuple, dict, set), the storages and tensors
// of a torch.save archive (torch._utils._rebuild_tensor_v2 and friends over
// persistent ids), collections.OrderedDict as a dict, and instances of
// every other class (a program's config dataclass, NumPy's arrays in a
// saved RNG state) as opaque objects holding their arguments and state:
// their code never runs, and the tensors beside them are read all the same.
//
// Hostile input: every length is checked against what is left of the
// input, the values made are capped (kMaxPickleValues), and values live in
// one arena, so neither deep nesting nor reference cycles cost a deep
// recursion or a leak.
//
// Thread-safety: a Pickle is a plain value; Unpickle keeps no state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"

namespace pilot::runner {

inline constexpr size_t kMaxPickleValues = 4'000'000;

struct PyValue {
  enum Kind {
    kNone, kBool, kInt, kBigInt, kFloat, kStr, kBytes, kList, kTuple, kDict, kSet,
    kGlobal,   // a class or function named by module and name (s = "module.name")
    kStorage,  // a torch.save storage: s = its key, dtype, elem_size, numel
    kTensor,   // storage, offset, size, stride
    kObject,   // an allowed class's instance: s = class, items = arguments, state
  };
  Kind kind = kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                  // str, bytes, the name of a global/class, a storage's key
  std::vector<PyValue*> items;    // list, tuple, set, an object's arguments
  std::vector<std::pair<PyValue*, PyValue*>> dict;
  // storage
  std::string dtype;              // "F32", ... (safetensors' names)
  int64_t elem_size = 0;
  int64_t numel = 0;
  // tensor
  PyValue* storage = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> size, stride;
  // object
  PyValue* state = nullptr;       // what BUILD gave it (nullptr: none)

  bool IsStr(std::string_view v) const { return kind == kStr && s == v; }
  // A dict's value under the string key `key`, or nullptr.
  const PyValue* Get(std::string_view key) const;
};

struct Pickle {
  PyValue* root = nullptr;
  std::vector<PyValue*> storages;  // one per distinct persistent id key
  std::vector<std::unique_ptr<PyValue>> arena;
};

struct UnpickleOptions {
  // torch.save persistent ids ('storage', type, key, location, numel) allowed.
  bool torch_storages = false;
};

// Errors: kCorrupt (a malformed pickle: where and what), kInvalid (a class
// or function it does not know how to read without the program, named).
Result<Pickle> Unpickle(std::string_view data, const std::string& label, const UnpickleOptions& opts);

// The element size of a torch storage class ("FloatStorage") and its dtype
// name; 0 when unknown.
int64_t TorchStorageElemSize(const std::string& storage_class, std::string* dtype);

}  // namespace pilot::runner
