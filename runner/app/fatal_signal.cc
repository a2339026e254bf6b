#include "runner/app/fatal_signal.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <ucontext.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdint>
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

void PutHex(uintptr_t v) {
  char buf[2 + 2 * sizeof(v) + 1];
  int i = sizeof(buf) - 1;
  buf[i] = '\0';
  do {
    buf[--i] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v && i > 2);
  buf[--i] = 'x';
  buf[--i] = '0';
  Put(buf + i);
}

// The loaded object (and symbol) `pc` lies in; false when none.
bool Resolve(uintptr_t pc, Dl_info* dl) {
  *dl = Dl_info{};
  return ::dladdr(reinterpret_cast<void*>(pc), dl) && dl->dli_fname;
}

// " in LIBRARY +OFFSET (SYMBOL)" of a resolved `pc`.
void PutCodeAddress(uintptr_t pc, const Dl_info& dl) {
  Put(" in ");
  Put(dl.dli_fname);
  Put(" +");
  PutHex(pc - reinterpret_cast<uintptr_t>(dl.dli_fbase));
  if (dl.dli_sname) {
    Put(" (");
    Put(dl.dli_sname);
    Put(")");
  }
}

// The faulting instruction and the stack pointer (0 and 0 on other CPUs).
struct Registers {
  uintptr_t pc = 0, sp = 0;
};
Registers RegistersOf(const void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  Registers r;
#if defined(__x86_64__)
  r.pc = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  r.sp = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  r.pc = static_cast<uintptr_t>(uc->uc_mcontext.pc);
  r.sp = static_cast<uintptr_t>(uc->uc_mcontext.sp);
#else
  (void)uc;
#endif
  return r;
}

// write, backtrace_symbols_fd (its first use is made at install time, so
// that libgcc is loaded already), signal and raise are async-signal-safe;
// dladdr is not, but names the library of a faulting instruction that the
// stack walk cannot get past (code without unwind tables), and the process
// ends next whatever it does.
void Report(int sig, siginfo_t* info, void* context) {
  Put("pilot: runner: fatal signal ");
  Put(Name(sig));
  if (sig == SIGSEGV || sig == SIGBUS) {
    Put(" at address ");
    PutHex(reinterpret_cast<uintptr_t>(info->si_addr));
  }
  const Registers regs = RegistersOf(context);
  Put("; instruction ");
  PutHex(regs.pc);
  Dl_info dl;
  const bool known = Resolve(regs.pc, &dl);
  if (known) PutCodeAddress(regs.pc, dl);
  Put("; stack:\n");
  // A call through a null or wild pointer leaves nothing to walk from: the
  // words on top of the stack that point into code are its likely callers.
  if (regs.sp && !known) {
    const auto* words = reinterpret_cast<const uintptr_t*>(regs.sp);
    for (int i = 0, shown = 0; i < 64 && shown < 12; ++i) {
      if (words[i] && Resolve(words[i], &dl)) {
        Put("  stack word ");
        PutHex(static_cast<uintptr_t>(i));
        Put(":");
        PutCodeAddress(words[i], dl);
        Put("\n");
        ++shown;
      }
    }
  }
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
  sa.sa_sigaction = Report;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  ::sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::sigaction(sig, &sa, nullptr);
#endif
}

}  // namespace pilot::runner
