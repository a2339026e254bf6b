// The restricted pickle machine: the opcodes of protocols 2 to 5 that
// torch.save and pickle.dump write, over a value stack with marks and a memo.
#include "runner/ckpt/pickle.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

namespace pilot::runner {
namespace {

struct StorageClass {
  const char* name;
  const char* dtype;
  int64_t size;
};
constexpr StorageClass kStorages[] = {
    {"FloatStorage", "F32", 4},        {"DoubleStorage", "F64", 8},
    {"HalfStorage", "F16", 2},         {"BFloat16Storage", "BF16", 2},
    {"LongStorage", "I64", 8},         {"IntStorage", "I32", 4},
    {"ShortStorage", "I16", 2},        {"CharStorage", "I8", 1},
    {"ByteStorage", "U8", 1},          {"BoolStorage", "BOOL", 1},
    {"ComplexFloatStorage", "C64", 8}, {"ComplexDoubleStorage", "C128", 16},
    {"QInt8Storage", "I8", 1},         {"QUInt8Storage", "U8", 1},
    {"QInt32Storage", "I32", 4},       {"UntypedStorage", "U8", 1},
};


class Machine {
 public:
  Machine(std::string_view data, const std::string& label, const UnpickleOptions& opts)
      : d_(data), label_(label), opts_(opts) {}

  Result<Pickle> Run() {
    while (true) {
      if (pos_ >= d_.size()) return Bad("ends without STOP");
      const auto op = static_cast<unsigned char>(d_[pos_++]);
      Status s = Step(op);
      if (!s.ok()) return s;
      if (stopped_) break;
      if (out_.arena.size() > kMaxPickleValues) {
        return Status::Invalid(label_, "more than " + std::to_string(kMaxPickleValues) + " values");
      }
    }
    if (stack_.size() != 1)
      return Bad("STOP with " + std::to_string(stack_.size()) + " values on the stack");
    out_.root = stack_.back();
    return std::move(out_);
  }

 private:
  Status Bad(const std::string& what) const {
    return Status::Corrupt(label_, "pickle at byte " + std::to_string(pos_) + ": " + what);
  }
  PyValue* New(PyValue::Kind k) {
    out_.arena.push_back(std::make_unique<PyValue>());
    out_.arena.back()->kind = k;
    return out_.arena.back().get();
  }
  bool Need(size_t n) const { return d_.size() - pos_ >= n; }
  uint64_t Le(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(d_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  Status ReadLen(size_t width, uint64_t* n) {
    if (!Need(width)) return Bad("length runs past the end");
    *n = Le(width);
    if (!Need(*n)) return Bad("a string of " + std::to_string(*n) + " bytes runs past the end");
    return Status::Ok();
  }
  Status Line(std::string* out) {
    const size_t nl = d_.find('\n', pos_);
    if (nl == std::string_view::npos) return Bad("line without end");
    *out = std::string(d_.substr(pos_, nl - pos_));
    pos_ = nl + 1;
    return Status::Ok();
  }
  Status Pop(PyValue** v) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return Bad("stack underflow");
    *v = stack_.back();
    stack_.pop_back();
    return Status::Ok();
  }
  Status PopMark(std::vector<PyValue*>* items) {
    if (marks_.empty()) return Bad("no mark");
    const size_t m = marks_.back();
    marks_.pop_back();
    if (m > stack_.size()) return Bad("mark past the stack");
    items->assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return Status::Ok();
  }
  Status Top(PyValue** v) {
    if (stack_.empty()) return Bad("stack underflow");
    *v = stack_.back();
    return Status::Ok();
  }
  void Push(PyValue* v) { stack_.push_back(v); }
  PyValue* Str(std::string_view s, PyValue::Kind k = PyValue::kStr) {
    PyValue* v = New(k);
    v->s = std::string(s);
    return v;
  }
  PyValue* Int(int64_t i) {
    PyValue* v = New(PyValue::kInt);
    v->i = i;
    return v;
  }
  Status PushLong(uint64_t n) {
    if (!Need(n)) return Bad("long runs past the end");
    if (n > 8) {
      Push(Str(d_.substr(pos_, n), PyValue::kBigInt));
      pos_ += n;
      return Status::Ok();
    }
    uint64_t v = n == 0 ? 0 : Le(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign
    Push(Int(static_cast<int64_t>(v)));
    return Status::Ok();
  }
  Status Global(const std::string& module, const std::string& name) {
    // Any class or function is only a name here: torch's rebuild functions
    // are applied (Apply), anything else (a program's config dataclass,
    // NumPy's arrays in a saved RNG state) makes an opaque object when
    // called, and nothing of it runs.
    const std::string full = module + "." + name;
    Push(Str(full.substr(0, 256), PyValue::kGlobal));
    return Status::Ok();
  }
  static bool Ints(const PyValue* t, std::vector<int64_t>* out) {
    if (t == nullptr || (t->kind != PyValue::kTuple && t->kind != PyValue::kList)) return false;
    out->clear();
    for (const PyValue* x : t->items) {
      if (x->kind != PyValue::kInt) return false;
      out->push_back(x->i);
    }
    return true;
  }
  Status Tensor(const std::vector<PyValue*>& a, PyValue** out) {
    if (a.size() < 4 || a[0]->kind != PyValue::kStorage || a[1]->kind != PyValue::kInt) {
      return Bad("_rebuild_tensor without (storage, offset, size, stride)");
    }
    PyValue* t = New(PyValue::kTensor);
    t->storage = a[0];
    t->offset = a[1]->i;
    if (!Ints(a[2], &t->size) || !Ints(a[3], &t->stride) || t->size.size() != t->stride.size()) {
      return Bad("tensor size and stride are not tuples of integers of one length");
    }
    *out = t;
    return Status::Ok();
  }
  // What calling `fn` with `args` would make, for the functions read above.
  Status Apply(PyValue* fn, PyValue* args, PyValue** out) {
    if (fn->kind != PyValue::kGlobal) return Bad("call of a value that is not a class or function");
    if (args->kind != PyValue::kTuple) return Bad("call arguments are not a tuple");
    const std::string& f = fn->s;
    const auto& a = args->items;
    if (f == "collections.OrderedDict") {
      *out = New(PyValue::kDict);
      return Status::Ok();
    }
    if (f == "torch._utils._rebuild_tensor_v2" || f == "torch._utils._rebuild_tensor")
      return Tensor(a, out);
    if (f == "torch._utils._rebuild_parameter" ||
        f == "torch._utils._rebuild_parameter_with_state") {
      if (a.empty() || a[0]->kind != PyValue::kTensor)
        return Bad("_rebuild_parameter without a tensor");
      *out = a[0];
      return Status::Ok();
    }
    if (f == "torch._tensor._rebuild_from_type_v2") {
      if (a.size() < 3) return Bad("_rebuild_from_type_v2 without (function, type, arguments)");
      if (a[0]->kind == PyValue::kGlobal && (a[0]->s == f || a[0]->s == "copyreg._reconstructor")) {
        return Bad("_rebuild_from_type_v2 of itself");
      }
      return Apply(a[0], a[2], out);
    }
    if (f == "torch.device") {
      std::string dev;
      for (const PyValue* x : a) {
        if (x->kind == PyValue::kStr) dev += x->s;
        if (x->kind == PyValue::kInt) dev += ":" + std::to_string(x->i);
      }
      *out = Str(dev);
      return Status::Ok();
    }
    if (f == "torch.serialization._get_layout") {
      if (a.size() != 1 || a[0]->kind != PyValue::kStr) return Bad("_get_layout without a name");
      *out = a[0];
      return Status::Ok();
    }
    if (f == "torch.Size") {
      *out = a.empty() ? New(PyValue::kTuple) : a[0];
      return Status::Ok();
    }
    if (f == "_codecs.encode") {
      if (a.empty() || a[0]->kind != PyValue::kStr) return Bad("_codecs.encode without a string");
      // latin1 of the UTF-8 text: each code point below 256 is one byte.
      std::string bytes;
      const std::string& u = a[0]->s;
      for (size_t k = 0; k < u.size(); ++k) {
        const auto c = static_cast<unsigned char>(u[k]);
        if (c < 0x80) {
          bytes += static_cast<char>(c);
        } else if ((c & 0xe0) == 0xc0 && k + 1 < u.size()) {
          bytes +=
              static_cast<char>(((c & 0x1f) << 6) | (static_cast<unsigned char>(u[k + 1]) & 0x3f));
          ++k;
        } else {
          return Bad("_codecs.encode of a string outside latin1");
        }
      }
      *out = Str(bytes, PyValue::kBytes);
      return Status::Ok();
    }
    if (f == "builtins.set" || f == "builtins.frozenset") {
      PyValue* s = New(PyValue::kSet);
      if (!a.empty()) s->items = a[0]->items;
      *out = s;
      return Status::Ok();
    }
    if (f == "copyreg._reconstructor") {
      if (a.empty()) return Bad("copyreg._reconstructor without a class");
      return Apply(a[0], New(PyValue::kTuple), out);
    }
    // An allowed class's instance, or any other call: an object holding
    // its arguments and, after BUILD, its state, never constructed.
    PyValue* o = New(PyValue::kObject);
    o->s = f;
    o->items = a;
    *out = o;
    return Status::Ok();
  }
  Status PersistentLoad(PyValue* pid) {
    if (!opts_.torch_storages)
      return Status::Invalid(label_, "persistent ids are not expected here");
    const auto& a = pid->items;
    if (pid->kind != PyValue::kTuple || a.size() != 5 || !a[0]->IsStr("storage") ||
        a[1]->kind != PyValue::kGlobal || a[2]->kind != PyValue::kStr ||
        a[4]->kind != PyValue::kInt) {
      return Bad("a persistent id that is not ('storage', type, key, location, numel)");
    }
    auto it = storages_.find(a[2]->s);
    if (it != storages_.end()) {
      Push(it->second);
      return Status::Ok();
    }
    const std::string cls = a[1]->s.rfind("torch.", 0) == 0 ? a[1]->s.substr(6) : a[1]->s;
    PyValue* st = New(PyValue::kStorage);
    st->s = a[2]->s;
    st->elem_size = TorchStorageElemSize(cls, &st->dtype);
    if (st->elem_size == 0)
      return Status::Invalid(label_, "storage type " + a[1]->s + " is not known");
    st->numel = a[4]->i;
    if (st->numel < 0 || st->numel > std::numeric_limits<int64_t>::max() / st->elem_size) {
      return Bad("storage of " + std::to_string(st->numel) + " elements");
    }
    storages_.emplace(st->s, st);
    out_.storages.push_back(st);
    Push(st);
    return Status::Ok();
  }
  Status Memo(uint64_t key) {
    PyValue* v = nullptr;
    PILOT_RETURN_IF_ERROR(Top(&v));
    if (memo_.size() > kMaxPickleValues) return Status::Invalid(label_, "memo too large");
    memo_[key] = v;
    return Status::Ok();
  }
  Status Get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return Bad("memo key " + std::to_string(key) + " was never stored");
    Push(it->second);
    return Status::Ok();
  }
  Status SetItems(std::vector<PyValue*> kv) {
    PyValue* d = nullptr;
    PILOT_RETURN_IF_ERROR(Top(&d));
    if (d->kind != PyValue::kDict) return Bad("SETITEM(S) on a value that is not a dict");
    if (kv.size() % 2 != 0) return Bad("SETITEMS with an odd number of values");
    for (size_t k = 0; k + 1 < kv.size(); k += 2) d->dict.emplace_back(kv[k], kv[k + 1]);
    return Status::Ok();
  }
  Status Append(std::vector<PyValue*> xs, bool set) {
    PyValue* l = nullptr;
    PILOT_RETURN_IF_ERROR(Top(&l));
    if (l->kind != (set ? PyValue::kSet : PyValue::kList)) {
      return Bad(set ? "ADDITEMS on a value that is not a set"
                     : "APPEND(S) on a value that is not a list");
    }
    l->items.insert(l->items.end(), xs.begin(), xs.end());
    return Status::Ok();
  }

  // Reads opcode `op` and its operands. Each group below reads its own
  // opcodes and returns nullopt for any other.
  Status Step(unsigned char op);
  // Framing, STOP, and the stack's marks: PROTO, FRAME, STOP, MARK, POP_MARK,
  // POP, DUP.
  std::optional<Status> StackOp(unsigned char op);
  // None, booleans, integers (binary, long and text) and floats.
  std::optional<Status> ScalarOp(unsigned char op);
  // Text and byte strings of every width.
  std::optional<Status> StringOp(unsigned char op);
  // Tuples, lists, dicts and sets: empty, from a mark or the stack's top, and
  // filled in place (SETITEM(S), APPEND(S), ADDITEMS).
  std::optional<Status> ContainerOp(unsigned char op);
  // The memo: PUT and GET in their binary, long and text forms, MEMOIZE.
  std::optional<Status> MemoOp(unsigned char op);
  // Globals, calls (REDUCE, NEWOBJ, NEWOBJ_EX), BUILD and persistent ids.
  std::optional<Status> ObjectOp(unsigned char op);

  std::string_view d_;
  size_t pos_ = 0;
  const std::string& label_;
  const UnpickleOptions& opts_;
  std::vector<PyValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, PyValue*> memo_;
  std::unordered_map<std::string, PyValue*> storages_;
  Pickle out_;
  bool stopped_ = false;
};

std::optional<Status> Machine::StackOp(unsigned char op) {
  PyValue* a = nullptr;
  std::vector<PyValue*> items;
  switch (op) {
    case 0x80:  // PROTO
      if (!Need(1)) return Bad("PROTO without a version");
      if (static_cast<unsigned char>(d_[pos_]) > 5) return Bad("protocol above 5");
      ++pos_;
      return Status::Ok();
    case 0x95:  // FRAME
      if (!Need(8)) return Bad("FRAME without a length");
      pos_ += 8;
      return Status::Ok();
    case '.':
      stopped_ = true;
      return Status::Ok();
    case '(':
      marks_.push_back(stack_.size());
      return Status::Ok();
    case '1':  // POP_MARK
      return PopMark(&items);
    case '0':  // POP
      return Pop(&a);
    case '2':  // DUP
      PILOT_RETURN_IF_ERROR(Top(&a));
      Push(a);
      return Status::Ok();
    default:
      return std::nullopt;
  }
}

std::optional<Status> Machine::ScalarOp(unsigned char op) {
  uint64_t n = 0;
  PyValue* a = nullptr;
  switch (op) {
    case 'N':
      Push(New(PyValue::kNone));
      return Status::Ok();
    case 0x88:
    case 0x89:
      a = New(PyValue::kBool);
      a->b = op == 0x88;
      Push(a);
      return Status::Ok();
    case 'J':
      if (!Need(4)) return Bad("BININT runs past the end");
      Push(Int(static_cast<int32_t>(static_cast<uint32_t>(Le(4)))));
      return Status::Ok();
    case 'K':
      if (!Need(1)) return Bad("BININT1 runs past the end");
      Push(Int(static_cast<int64_t>(Le(1))));
      return Status::Ok();
    case 'M':
      if (!Need(2)) return Bad("BININT2 runs past the end");
      Push(Int(static_cast<int64_t>(Le(2))));
      return Status::Ok();
    case 0x8a:  // LONG1
      if (!Need(1)) return Bad("LONG1 runs past the end");
      return PushLong(Le(1));
    case 0x8b:  // LONG4
      if (!Need(4)) return Bad("LONG4 runs past the end");
      n = Le(4);
      if (n > (1u << 20)) return Bad("LONG4 of more than 1 MiB");
      return PushLong(n);
    case 'I':
    case 'L': {
      std::string line;
      PILOT_RETURN_IF_ERROR(Line(&line));
      if (!line.empty() && line.back() == 'L') line.pop_back();
      if (op == 'I' && (line == "00" || line == "01")) {
        a = New(PyValue::kBool);
        a->b = line == "01";
        Push(a);
        return Status::Ok();
      }
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(line.c_str(), &end, 10);
      if (line.empty() || *end != '\0' || errno != 0) {
        Push(Str(line, PyValue::kBigInt));
      } else {
        Push(Int(v));
      }
      return Status::Ok();
    }
    case 'G': {
      if (!Need(8)) return Bad("BINFLOAT runs past the end");
      uint64_t bits = 0;
      for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<unsigned char>(d_[pos_ + k]);
      pos_ += 8;
      a = New(PyValue::kFloat);
      std::memcpy(&a->f, &bits, 8);
      Push(a);
      return Status::Ok();
    }
    case 'F': {
      std::string line;
      PILOT_RETURN_IF_ERROR(Line(&line));
      a = New(PyValue::kFloat);
      a->f = std::strtod(line.c_str(), nullptr);
      Push(a);
      return Status::Ok();
    }
    default:
      return std::nullopt;
  }
}

std::optional<Status> Machine::StringOp(unsigned char op) {
  uint64_t n = 0;
  switch (op) {
    case 'X':
    case 0x8c:
    case 0x8d:
    case 'B':
    case 'C':
    case 0x8e:
    case 0x96:
    case 'U':
    case 'T': {
      const size_t width = (op == 0x8c || op == 'C' || op == 'U')     ? 1
                           : (op == 0x8d || op == 0x8e || op == 0x96) ? 8
                                                                      : 4;
      PILOT_RETURN_IF_ERROR(ReadLen(width, &n));
      const bool text = op == 'X' || op == 0x8c || op == 0x8d || op == 'U' || op == 'T';
      Push(Str(d_.substr(pos_, n), text ? PyValue::kStr : PyValue::kBytes));
      pos_ += n;
      return Status::Ok();
    }
    default:
      return std::nullopt;
  }
}

std::optional<Status> Machine::ContainerOp(unsigned char op) {
  PyValue* a = nullptr;
  PyValue* b = nullptr;
  std::vector<PyValue*> items;
  switch (op) {
    case ')':
      Push(New(PyValue::kTuple));
      return Status::Ok();
    case ']':
      Push(New(PyValue::kList));
      return Status::Ok();
    case '}':
      Push(New(PyValue::kDict));
      return Status::Ok();
    case 0x8f:
      Push(New(PyValue::kSet));
      return Status::Ok();
    case 't':
    case 'l':
    case 0x91:  // FROZENSET
      PILOT_RETURN_IF_ERROR(PopMark(&items));
      a = New(op == 't' ? PyValue::kTuple : op == 'l' ? PyValue::kList : PyValue::kSet);
      a->items = std::move(items);
      Push(a);
      return Status::Ok();
    case 0x85:
    case 0x86:
    case 0x87: {
      const size_t k = op - 0x84;
      if (stack_.size() < k || (!marks_.empty() && stack_.size() - k < marks_.back()))
        return Bad("stack underflow");
      a = New(PyValue::kTuple);
      a->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
      stack_.resize(stack_.size() - k);
      Push(a);
      return Status::Ok();
    }
    case 'd':
      PILOT_RETURN_IF_ERROR(PopMark(&items));
      Push(New(PyValue::kDict));
      return SetItems(std::move(items));
    case 's':
      PILOT_RETURN_IF_ERROR(Pop(&b));
      PILOT_RETURN_IF_ERROR(Pop(&a));
      return SetItems({a, b});
    case 'u':
      PILOT_RETURN_IF_ERROR(PopMark(&items));
      return SetItems(std::move(items));
    case 'a':
      PILOT_RETURN_IF_ERROR(Pop(&a));
      return Append({a}, false);
    case 'e':
      PILOT_RETURN_IF_ERROR(PopMark(&items));
      return Append(std::move(items), false);
    case 0x90:
      PILOT_RETURN_IF_ERROR(PopMark(&items));
      return Append(std::move(items), true);
    default:
      return std::nullopt;
  }
}

std::optional<Status> Machine::MemoOp(unsigned char op) {
  switch (op) {
    case 'q':
      if (!Need(1)) return Bad("BINPUT runs past the end");
      return Memo(Le(1));
    case 'r':
      if (!Need(4)) return Bad("LONG_BINPUT runs past the end");
      return Memo(Le(4));
    case 0x94:
      return Memo(memo_.size());
    case 'h':
      if (!Need(1)) return Bad("BINGET runs past the end");
      return Get(Le(1));
    case 'j':
      if (!Need(4)) return Bad("LONG_BINGET runs past the end");
      return Get(Le(4));
    case 'p':
    case 'g': {
      std::string line;
      PILOT_RETURN_IF_ERROR(Line(&line));
      char* end = nullptr;
      const unsigned long long k = std::strtoull(line.c_str(), &end, 10);
      if (line.empty() || *end != '\0') return Bad("memo key is not a number");
      return op == 'p' ? Memo(k) : Get(k);
    }
    default:
      return std::nullopt;
  }
}

std::optional<Status> Machine::ObjectOp(unsigned char op) {
  PyValue* a = nullptr;
  PyValue* b = nullptr;
  switch (op) {
    case 'c': {
      std::string module, name;
      PILOT_RETURN_IF_ERROR(Line(&module));
      PILOT_RETURN_IF_ERROR(Line(&name));
      return Global(module, name);
    }
    case 0x93:  // STACK_GLOBAL
      PILOT_RETURN_IF_ERROR(Pop(&b));
      PILOT_RETURN_IF_ERROR(Pop(&a));
      if (a->kind != PyValue::kStr || b->kind != PyValue::kStr)
        return Bad("STACK_GLOBAL of non-strings");
      return Global(a->s, b->s);
    case 'R':     // REDUCE
    case 0x81: {  // NEWOBJ
      PILOT_RETURN_IF_ERROR(Pop(&b));
      PILOT_RETURN_IF_ERROR(Pop(&a));
      PyValue* r = nullptr;
      PILOT_RETURN_IF_ERROR(Apply(a, b, &r));
      Push(r);
      return Status::Ok();
    }
    case 0x92: {  // NEWOBJ_EX: cls, args, kwargs
      PyValue* kw = nullptr;
      PILOT_RETURN_IF_ERROR(Pop(&kw));
      PILOT_RETURN_IF_ERROR(Pop(&b));
      PILOT_RETURN_IF_ERROR(Pop(&a));
      PyValue* r = nullptr;
      PILOT_RETURN_IF_ERROR(Apply(a, b, &r));
      Push(r);
      return Status::Ok();
    }
    case 'b': {  // BUILD
      PILOT_RETURN_IF_ERROR(Pop(&b));
      PILOT_RETURN_IF_ERROR(Top(&a));
      // An OrderedDict's attributes (a state_dict's _metadata) and a
      // tensor's Python attributes carry nothing this reader checks.
      if (a->kind == PyValue::kObject)
        a->state = b;
      else if (a->kind != PyValue::kDict && a->kind != PyValue::kTensor)
        return Bad("BUILD on a plain value");
      return Status::Ok();
    }
    case 'Q':  // BINPERSID
      PILOT_RETURN_IF_ERROR(Pop(&a));
      return PersistentLoad(a);
    default:
      return std::nullopt;
  }
}

Status Machine::Step(unsigned char op) {
  for (auto read : {&Machine::StackOp, &Machine::ScalarOp, &Machine::StringOp,
                    &Machine::ContainerOp, &Machine::MemoOp, &Machine::ObjectOp}) {
    if (std::optional<Status> s = (this->*read)(op)) return *std::move(s);
  }
  char hex[8];
  std::snprintf(hex, sizeof(hex), "0x%02x", op);
  return Bad(std::string("opcode ") + hex + " is not read");
}

}  // namespace

const PyValue* PyValue::Get(std::string_view key) const {
  if (kind != kDict) return nullptr;
  for (const auto& [k, v] : dict) {
    if (k->IsStr(key)) return v;
  }
  return nullptr;
}

int64_t TorchStorageElemSize(const std::string& storage_class, std::string* dtype) {
  for (const auto& s : kStorages) {
    if (storage_class == s.name) {
      if (dtype != nullptr) *dtype = s.dtype;
      return s.size;
    }
  }
  return 0;
}

Result<Pickle> Unpickle(std::string_view data, const std::string& label,
                        const UnpickleOptions& opts) {
  Machine m(data, label, opts);
  return m.Run();
}

}  // namespace pilot::runner
