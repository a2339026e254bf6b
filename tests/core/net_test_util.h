// Helpers for tests that need the loopback network or child processes:
// a temporary directory, a child process whose first stdout line is read
// (servers print their port), a free loopback port.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace pilot::testutil {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pilot-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    path_ = p != nullptr ? p : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A port on 127.0.0.1 that was free a moment ago.
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// A child process (argv[0] looked up in PATH); stopped with SIGTERM (then
// SIGKILL) when the object goes away.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv, bool capture_stdout = true) {
    int fds[2] = {-1, -1};
    if (capture_stdout && ::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      if (capture_stdout) {
        ::dup2(fds[1], 1);
        ::close(fds[0]);
        ::close(fds[1]);
      }
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    if (capture_stdout) {
      ::close(fds[1]);
      out_ = ::fdopen(fds[0], "r");
    }
  }
  ~Child() { Stop(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // The next line the child prints ("" at end of output).
  std::string ReadLine() {
    if (out_ == nullptr) return "";
    char buf[4096];
    if (std::fgets(buf, sizeof buf, out_) == nullptr) return "";
    std::string s = buf;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  void Stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      for (int i = 0; i < 50; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
          pid_ = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
      }
    }
    if (out_ != nullptr) {
      std::fclose(out_);
      out_ = nullptr;
    }
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

// A Python http.server receiver on 127.0.0.1. Records every POST as
// DIR/<n>.body and DIR/<n>.sig (the X-Pilot-Signature-256 header); answers
// HTTP 500 to the first `fail_first` requests, then `code`.
inline constexpr char kReceiverPy[] = R"PY(
import http.server, os, sys
out, fail_first, code = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
count = [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n)
        count[0] += 1
        if count[0] <= fail_first:
            status = 500
        else:
            status = code
            k = len([f for f in os.listdir(out) if f.endswith('.body')])
            with open(os.path.join(out, '%d.body' % k), 'wb') as f: f.write(body)
            with open(os.path.join(out, '%d.sig' % k), 'w') as f:
                f.write(self.headers.get('X-Pilot-Signature-256', ''))
            with open(os.path.join(out, '%d.type' % k), 'w') as f:
                f.write(self.headers.get('Content-Type', ''))
        self.send_response(status)
        self.send_header('Content-Length', '0')
        self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
)PY";

class Receiver {
 public:
  Receiver(const std::string& dir, int fail_first = 0, int code = 200)
      : script_(dir + "/receiver.py"), out_(dir + "/received") {
    std::filesystem::create_directories(out_);
    WriteText(script_, kReceiverPy);
    child_ = std::make_unique<Child>(std::vector<std::string>{
        "python3", script_, out_, std::to_string(fail_first), std::to_string(code)});
    port_ = std::atoi(child_->ReadLine().c_str());
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/verdicts"; }
  const std::string& out() const { return out_; }
  int Count() const {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(out_)) {
      if (e.path().extension() == ".body") ++n;
    }
    return n;
  }

 private:
  std::string script_;
  std::string out_;
  std::unique_ptr<Child> child_;
  int port_ = 0;
};

}  // namespace pilot::testutil
