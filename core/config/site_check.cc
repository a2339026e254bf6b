#include "core/config/site_check.h"

#include <algorithm>
#include <string>

#include "core/base/strings.h"
#include "core/config/mounts.h"

namespace pilot {
namespace {

// "FILE:LINE: key", or the key alone for a config not read from a file.
std::string Where(const Config& c, const std::string& key) {
  if (c.path.empty()) return key;
  auto s = c.sources.find(key);
  const int line = s != c.sources.end() && s->second.line > 0 ? s->second.line : 1;
  return c.path + ":" + std::to_string(line) + ": " + key;
}

}  // namespace

Status CheckConfigAgainstSite(const Config& c, const ContainerPolicy& site) {
  const std::string& rt = c.container.runtime;
  const auto& allowed = site.allowed_runtimes;
  if (!rt.empty() && rt != "none" &&
      std::find(allowed.begin(), allowed.end(), rt) == allowed.end()) {
    return Status::Invalid(Where(c, "container.runtime"),
                           Quote(rt) +
                               " is not allowed on this cluster (pilot.conf [container] "
                               "allowed_runtimes: " +
                               Join(allowed, ", ") + ")")
        .WithHint("use one of those, or ask the site to allow it");
  }
  for (const std::string& text : c.container.mounts) {
    Result<Mount> m = ParseMount(text);
    if (!m.ok()) return Status::Invalid(Where(c, "container.mounts"), m.status().detail());
    if (!MountSourceAllowed(m->source, site.allowed_mounts)) {
      return Status::Invalid(Where(c, "container.mounts"),
                             Quote(m->source) +
                                 " is outside the folders this cluster allows "
                                 "(pilot.conf [container] allowed_mounts: " +
                                 (site.allowed_mounts.empty() ? std::string("none")
                                                              : Join(site.allowed_mounts, ", ")) +
                                 ")")
          .WithHint("bind a folder below one of those");
    }
  }
  return Status::Ok();
}

}  // namespace pilot
