// The field list of a format's memory record (core/records/memory_figures.h):
// the figures of MemoryFigures' one list that the format's MemoryKey list
// names, in that list's order, each with its rule as a record attribute.
// Used by the formats' Fields functions:
//
//   template <class V, class S>
//   void Fields(V& v, S& s, std::type_identity<NodeMemoryStats>) {
//     MemoryFields(v, s, kNodeMemoryKeys);
//   }
//
// Thread-safety: pure functions over values.
#pragma once

#include <span>
#include <string_view>
#include <type_traits>

#include "core/records/memory_figures.h"
#include "core/records/record.h"

namespace pilot {
namespace memory_internal {

// Passes the one figure named `key` on to the format's visitor.
template <class V>
struct OneKey {
  V* v;
  MemoryKey key;
  template <class T>
  void operator()(const char* name, T& member) const {
    if (std::string_view(key.key) != name) return;
    switch (key.rule) {
      case MemoryKeyRule::kRequired:
        (*v)(name, member);
        break;
      case MemoryKeyRule::kMayBeAbsent:
        (*v)(name, member, kMayBeAbsent);
        break;
      case MemoryKeyRule::kOmitIfUnset:
        (*v)(name, member, kOmitIfUnset);
        break;
    }
  }
};

}  // namespace memory_internal

// `s` is a format's struct (a MemoryFigures), const when writing.
template <class V, class S>
void MemoryFields(V& v, S& s, std::span<const MemoryKey> keys) {
  using Figures = std::conditional_t<std::is_const_v<S>, const MemoryFigures, MemoryFigures>;
  Figures& figures = s;
  for (const MemoryKey& k : keys) {
    memory_internal::OneKey<V> one{&v, k};
    Fields(one, figures, std::type_identity<MemoryFigures>{});
  }
}

}  // namespace pilot
