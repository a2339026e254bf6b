// pilot: the command users and admins run (see pilot(1)). The commands live
// in cli/commands.cc; this file only hands argv over and guarantees that no
// exception leaves the process through main.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    const int rc = pilot::cli::Main(args, std::cout, std::cerr);
    std::cout.flush();
    if (!std::cout) {
      std::fputs("pilot: error writing output\n", stderr);
      return pilot::cli::kExitNo;
    }
    return rc;
  } catch (...) {
    // Main catches everything itself; this is the last line (e.g. bad_alloc
    // while building the argument vector).
    std::fputs("pilot: internal error\n", stderr);
    return pilot::cli::kExitInternal;
  }
}
