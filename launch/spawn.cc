#include "launch/spawn.h"

#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "core/records/hostlist.h"

namespace pilot::launch {

pid_t SpawnProcess(const std::string& exe, const std::vector<std::string>& args,
                   const std::vector<std::string>& env, int stderr_fd) {
  std::vector<std::string> a = args, e = env;
  std::vector<char*> argv, envp;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  for (auto& s : e) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::fflush(nullptr);
  pid_t pid = 0;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (stderr_fd >= 0) posix_spawn_file_actions_adddup2(&fa, stderr_fd, STDERR_FILENO);
  const int rc = exe.find('/') == std::string::npos
                     ? ::posix_spawnp(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data())
                     : ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    std::fprintf(stderr, "pilot: node: cannot start %s: %s\n", exe.c_str(), std::strerror(rc));
    return -1;
  }
  return pid;
}

std::string ExecSearchingPath(const std::vector<std::string>& argv_in,
                              const std::vector<std::string>& env) {
  if (argv_in.empty()) return "no command";
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string& name = argv_in[0];
  if (name.find('/') != std::string::npos) {
    execve(name.c_str(), argv.data(), envp.data());
    return "cannot run " + name + ": " + std::strerror(errno);
  }
  std::string path;
  for (const std::string& e : env) {
    if (std::string_view(e).substr(0, 5) == "PATH=") {
      path = e.substr(5);
      break;
    }
  }
  size_t start = 0;
  int why = ENOENT;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != ':') continue;
    std::string dir = path.substr(start, i - start);
    start = i + 1;
    if (dir.empty()) continue;
    const std::string full = dir + "/" + name;
    execve(full.c_str(), argv.data(), envp.data());
    if (errno != ENOENT && errno != ENOTDIR) why = errno;
  }
  return name + ": " +
         (why == ENOENT ? std::string("not found in PATH ") + path : std::strerror(why));
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return kPortBase;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = kPortBase;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "status " + std::to_string(status);
}

}  // namespace pilot::launch
