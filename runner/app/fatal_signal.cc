#include "runner/app/fatal_signal.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <initializer_list>

namespace pilot::runner {
namespace {

void Put(const char* s) {
  const ssize_t ignored = ::write(STDERR_FILENO, s, ::strlen(s));
  (void)ignored;
}

// Only async-signal-safe calls: write, backtrace_symbols_fd (its first use
// is made at install time, so that libgcc is loaded already), signal, raise.
const char* Name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV (segmentation fault)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGFPE: return "SIGFPE (arithmetic exception)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGABRT: return "SIGABRT (aborted)";
    default: return "?";
  }
}

void Report(int sig) {
  Put("pilot: runner: fatal signal ");
  Put(Name(sig));
  Put("; stack:\n");
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void InstallFatalSignalReport() {
#if !defined(__SANITIZE_ADDRESS__)  // the sanitizer's own report is the better one
  void* warm[1];
  (void)::backtrace(warm, 1);
  static char alt[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt;
  ss.ss_size = sizeof(alt);
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_handler = Report;
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
#endif
}

}  // namespace pilot::runner
