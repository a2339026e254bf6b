// The built `pilot` run with arguments through the shell, its standard
// output and error together: what the cli tests that read one stream of
// text share.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace pilot::testutil {

struct Ran {
  int rc = -1;
  std::string output;  // stdout and stderr
};

// PILOT_BINARY ARGS 2>&1 (ARGS as the shell reads them); `prefix` goes
// before the binary ("env -u NAME").
inline Ran RunPilot(const std::string& args, const std::string& prefix = "") {
  Ran r;
  const std::string cmd = prefix + std::string(PILOT_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace pilot::testutil
