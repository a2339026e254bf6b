#include "core/config/mounts.h"

#include "core/base/strings.h"

namespace pilot {
namespace {

// "" when `path` may be a mount's path, else why not.
std::string PathProblem(std::string_view path) {
  if (path.empty() || path.front() != '/') return "is not an absolute path";
  for (unsigned char ch : path) {
    if (ch < 0x20 || ch == 0x7f) return "contains a control character";
    if (ch == ',') return "contains ',' (pyxis and Apptainer separate binds with it)";
  }
  if (path.size() > 1 && path.back() == '/') return "ends with '/'";
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (part.empty() && path.size() > 1) return "has an empty component ('//')";
    if (part == "." || part == "..") return "has a '" + std::string(part) + "' component";
    start = end + 1;
  }
  return "";
}

}  // namespace

Result<Mount> ParseMount(std::string_view text) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    fields.push_back(text.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (fields.size() > 3) {
    return Status::Invalid("mount", Quote(std::string(text)) +
                                        " has more than three ':'-separated fields (':' cannot "
                                        "be part of a path)")
        .WithHint("write \"PATH\", \"SRC:DST\" or \"SRC:DST:ro\"");
  }
  Mount m;
  m.source = std::string(fields[0]);
  m.destination = fields.size() > 1 ? std::string(fields[1]) : m.source;
  if (fields.size() == 3) {
    if (fields[2] != "ro" && fields[2] != "rw") {
      return Status::Invalid("mount", Quote(std::string(text)) +
                                          ": the third field must be "
                                          "\"ro\" or \"rw\", got " +
                                          Quote(std::string(fields[2])));
    }
    m.read_only = fields[2] == "ro";
  }
  for (const auto& [what, path] :
       {std::pair{"source", &m.source}, {"destination", &m.destination}}) {
    const std::string why = PathProblem(*path);
    if (!why.empty()) {
      return Status::Invalid(
          "mount", Quote(std::string(text)) + ": the " + what + " " + Quote(*path) + " " + why);
    }
  }
  return m;
}

bool MountSourceAllowed(const std::string& source, const std::vector<std::string>& allowed) {
  for (const std::string& a : allowed) {
    if (a == "/" || source == a) return true;
    if (source.size() > a.size() && StartsWith(source, a) && source[a.size()] == '/') return true;
  }
  return false;
}

}  // namespace pilot
