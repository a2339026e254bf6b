// A runner that dies of a fatal signal (a segmentation fault in a library,
// an abort) says so on stderr with the stack it died on, before the signal
// ends it as it would have: the supervisor still sees the signal, and the
// log that reaches the verdict names where it happened.
#pragma once

namespace pilot::runner {

// Installs the report for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, on
// an alternate stack (a stack overflow still reports). Call once, early.
void InstallFatalSignalReport();

}  // namespace pilot::runner
