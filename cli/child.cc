#include "cli/child.h"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace pilot::cli {

int RunChild(const std::vector<std::string>& argv, const std::string* input, const std::string& who,
             std::string* error) {
  int fds[2] = {-1, -1};
  if (input != nullptr && pipe(fds) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    if (input != nullptr) {
      close(fds[0]);
      close(fds[1]);
    }
    return -1;
  }
  if (pid == 0) {
    if (input != nullptr) {
      dup2(fds[0], 0);
      close(fds[0]);
      close(fds[1]);
    }
    execvp(args[0], args.data());
    std::fprintf(stderr, "pilot: %s: cannot run %s: %s\n", who.c_str(), args[0], std::strerror(errno));
    _exit(127);
  }
  if (input != nullptr) {
    close(fds[0]);
    size_t done = 0;
    while (done < input->size()) {
      const ssize_t n = write(fds[1], input->data() + done, input->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the child ended early: its status says why
      done += static_cast<size_t>(n);
    }
    close(fds[1]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *error = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  *error = argv[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
  return -1;
}

}  // namespace pilot::cli
