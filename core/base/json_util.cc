#include "core/base/json_util.h"

#include <exception>
#include <utility>
#include <vector>

#include "core/base/utf8.h"

namespace pilot {
namespace {

// Builds the value from nlohmann's SAX events as its own DOM parser does,
// except that an object's key is inserted, not assigned: a key the object
// already has stops the parse. The object (a std::map) is the set of its
// keys, so the check costs one lookup a key, which the insert did anyway.
class StrictJsonBuilder {
 public:
  explicit StrictJsonBuilder(Json* root) : root_(root) {}

  bool null() { return Scalar(Json(nullptr)); }
  bool boolean(bool v) { return Scalar(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Scalar(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Scalar(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) {
    return Scalar(Json(v));
  }
  bool string(Json::string_t& v) { return Scalar(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return Scalar(Json::binary(std::move(v))); }
  bool start_object(std::size_t /*elements*/) { return Open(Json::object()); }
  bool start_array(std::size_t /*elements*/) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }

  bool key(Json::string_t& k) {
    auto [it, inserted] = stack_.back().value->get_ref<Json::object_t&>().emplace(k, nullptr);
    if (!inserted) {
      duplicate_ = "duplicate key " + Shown(k);
      if (stack_.size() > 1) duplicate_ += " in \"" + Path() + "\"";
      return false;
    }
    slot_ = &it->second;
    slot_key_ = &it->first;
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const Json::exception& e) {
    error_ = e.what();
    return false;
  }

  const std::string& duplicate() const { return duplicate_; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    Json* value;
    const std::string* key;  // its key in the enclosing object; null in an array or at the top
  };

  // Places `v` where the text has it: the top, the end of the open array,
  // or the slot of the key just read.
  Json* Put(Json&& v) {
    if (stack_.empty()) {
      *root_ = std::move(v);
      return root_;
    }
    Json* parent = stack_.back().value;
    if (parent->is_array()) {
      auto& items = parent->get_ref<Json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool Scalar(Json&& v) {
    Put(std::move(v));
    return true;
  }
  // An array's element stays where it is while it is open: the array grows
  // only once the element is closed.
  bool Open(Json&& v) {
    const bool in_object = !stack_.empty() && stack_.back().value->is_object();
    const std::string* key = in_object ? slot_key_ : nullptr;
    stack_.push_back({Put(std::move(v)), key});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }

  // A key as a message shows it: in quotes, its controls spelled out, cut
  // at 64 bytes.
  static std::string Shown(const std::string& k) {
    const std::string_view head = Utf8Head(k, 64);
    return "\"" + VisibleText(head) + (head.size() < k.size() ? "...\"" : "\"");
  }
  // "stages.single", "checks[2]": where the open object is.
  std::string Path() const {
    std::string p;
    for (size_t i = 1; i < stack_.size(); ++i) {
      if (stack_[i].key != nullptr) {
        if (!p.empty()) p += '.';
        p += VisibleText(Utf8Head(*stack_[i].key, 64));
      } else {
        const auto& items = stack_[i - 1].value->get_ref<const Json::array_t&>();
        p += "[" + std::to_string(items.size() - 1) + "]";
      }
    }
    return p;
  }

  Json* root_;
  std::vector<Frame> stack_;
  Json* slot_ = nullptr;
  const std::string* slot_key_ = nullptr;
  std::string duplicate_;
  std::string error_;
};

Status JsonRefused(const std::string& label, std::string detail) {
  return Status::Corrupt(label, std::move(detail));
}

}  // namespace

Result<Json> ParseJsonText(std::string_view text, const std::string& label, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return JsonRefused(label, "larger than " + std::to_string(max_bytes) + " bytes");
  }
  Json root;
  StrictJsonBuilder builder(&root);
  // The builder takes every error as an event; only memory running out
  // could still throw.
  try {
    if (Json::sax_parse(text.begin(), text.end(), &builder)) return root;
  } catch (const std::exception& e) {
    return JsonRefused(label, std::string("not valid JSON: ") + e.what());
  }
  if (!builder.duplicate().empty()) return JsonRefused(label, builder.duplicate());
  std::string what = builder.error();
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
  size_t pos = what.find("] ");
  if (pos != std::string::npos) what = what.substr(pos + 2);
  return JsonRefused(label, "not valid JSON: " + what);
}

std::string DumpJson(const Json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::string DumpJson(const nlohmann::ordered_json& j, int indent) {
  return j.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::ordered_json::error_handler_t::replace);
}

Status CheckSchema(const std::string& label, const std::string& found,
                   const std::string& expected) {
  if (found == expected) return Status::Ok();
  // Same family, other version: say which one this build reads.
  size_t slash = expected.find_last_of('/');
  if (slash != std::string::npos && found.compare(0, slash + 1, expected, 0, slash + 1) == 0) {
    return Status::Corrupt(label + ": schema", "unsupported version \"" + found +
                                                   "\" (this build reads \"" + expected + "\")")
        .WithHint("read it with the slurm-pilot version that wrote it");
  }
  return Status::Corrupt(label + ": schema",
                         "expected \"" + expected + "\", got \"" + found + "\"");
}

}  // namespace pilot
