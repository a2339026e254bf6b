// The one `main` guard of the project's executables: no exception leaves
// `main` (STYLE.md), because one that escaped would end the program with a
// signal instead of its exit status, and a prolog or epilog ended so drains
// the node.
//
// Thread-safety: call it once, from main.
#pragma once

#include <functional>
#include <string_view>

namespace pilot {

// Runs `body` (the program's main) and returns its exit status. When an
// exception escapes it, prints one line to stderr,
//   pilot: WHAT: internal error: DETAIL    (`what` names the program)
//   pilot: internal error: DETAIL          (`what` empty)
// DETAIL being what() of a std::exception and "unknown exception" for
// anything else (a thrown int, a foreign library's type), and returns
// `crash_status`. A program that knows a library's own exception type
// (pilot-runner's c10::Error) catches it inside `body`.
int GuardedMain(std::string_view what, int crash_status, const std::function<int()>& body);

}  // namespace pilot
