#include "core/base/guarded_main.h"

#include <cstdio>
#include <exception>

namespace pilot {
namespace {

// Allocates nothing: the exception may be std::bad_alloc.
void PrintInternalError(std::string_view what, const char* detail) {
  std::fprintf(stderr, "pilot: %.*s%sinternal error: %s\n", static_cast<int>(what.size()), what.data(),
               what.empty() ? "" : ": ", detail);
}

}  // namespace

int GuardedMain(std::string_view what, int crash_status, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    PrintInternalError(what, e.what());
  } catch (...) {
    PrintInternalError(what, "unknown exception");
  }
  return crash_status;
}

}  // namespace pilot
