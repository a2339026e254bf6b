// The figures a Config derives from its own keys.
#include "core/config/config.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

namespace pilot {

double Config::RunTokensPerStep() const {
  return static_cast<double>(run.seq_len) * run.micro_batch * run.grad_accum * run.gpus_per_node *
         run.nodes;
}

int64_t Config::RunTotalSteps() const {
  if (run.target_steps > 0) return run.target_steps;
  const double tokens_per_step = RunTokensPerStep();
  if (tokens_per_step <= 0) return 0;
  const double steps = std::ceil(static_cast<double>(run.target_tokens) / tokens_per_step);
  return steps > 1e15 ? static_cast<int64_t>(1e15)
                      : std::max<int64_t>(1, static_cast<int64_t>(steps));
}

namespace {

bool NameChars(std::string_view s, std::string_view extra) {
  for (char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '.' || ch == '_' || ch == '-' || extra.find(ch) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// The parts of `s` between '/'.
std::vector<std::string_view> Parts(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t at = 0;;) {
    const size_t slash = s.find('/', at);
    out.push_back(s.substr(at, slash == std::string_view::npos ? slash : slash - at));
    if (slash == std::string_view::npos) return out;
    at = slash + 1;
  }
}

}  // namespace

Result<HubRef> ParseHubRef(std::string_view text) {
  HubRef ref;
  const size_t at = text.find('@');
  ref.repo = std::string(text.substr(0, at));
  ref.revision = at == std::string_view::npos ? "main" : std::string(text.substr(at + 1));
  const std::vector<std::string_view> parts = Parts(ref.repo);
  if (parts.size() > 2 || !NameChars(ref.repo, "/")) {
    return Status::Invalid("", "\"" + std::string(text) +
                                   "\" is not a hub repository \"org/name\" or \"org/name@revision\"");
  }
  for (std::string_view p : parts) {
    if (p.empty() || p.front() == '.' || p.find("--") != std::string_view::npos) {
      return Status::Invalid("", "\"" + ref.repo + "\": each part must be a name not starting "
                                 "with '.' and without \"--\"");
    }
  }
  if (ref.revision.empty() || !NameChars(ref.revision, "/")) {
    return Status::Invalid("", "\"" + std::string(text) + "\": the revision after '@' must be a "
                                   "branch, tag or commit of [A-Za-z0-9._/-]");
  }
  for (std::string_view p : Parts(ref.revision)) {
    if (p.empty() || p == "." || p == "..") {
      return Status::Invalid("", "\"" + ref.revision + "\": not a revision (empty, \".\" or "
                                     "\"..\" part)");
    }
  }
  return ref;
}

std::string PinPathProblem(std::string_view path) {
  if (path.empty()) return "is empty";
  if (path.front() == '/') return "is absolute; name it relative to program.workdir";
  if (path.find('\0') != std::string_view::npos) return "contains a NUL character";
  std::string_view p = path;
  if (p.back() == '/') p.remove_suffix(1);
  for (std::string_view part : Parts(p)) {
    if (part == "..") return "leaves program.workdir (\"..\")";
    if (part.empty() || part == ".") return "has an empty or \".\" part";
  }
  return "";
}

}  // namespace pilot
