#include "runner/workload/report.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/base/atomic_file.h"

namespace pilot::runner {

Status WriteReport(const RunOptions& opts, const std::string& name, const Results& r) {
  const std::string text = ResultsToJson(r);
  if (opts.report_fd < 0) return WriteFileAtomic(opts.out + "/" + name, text);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(opts.report_fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "short write";
      ::close(opts.report_fd);
      return Status::IoError("report pipe", why);
    }
    done += static_cast<size_t>(n);
  }
  ::close(opts.report_fd);
  return Status::Ok();
}

}  // namespace pilot::runner
