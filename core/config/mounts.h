// [container] mounts: the extra binds a program in a container needs, and
// the site's allow-list of their sources (pilot.conf(5), [container]
// allowed_mounts).
//
// A mount is written "PATH" (the same path inside), "SRC:DST" or
// "SRC:DST:ro". Both paths are absolute and normal (no "." or ".."
// component, no doubled '/'), and hold no ',' ':' or control character:
// pyxis and Apptainer take their binds as one comma-separated list and
// podman as colon-separated fields, so such a character would split a
// path into two binds (launch/container.h builds those arguments).
//
// Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace pilot {

struct Mount {
  std::string source;       // on the node
  std::string destination;  // in the container
  bool read_only = false;

  bool operator==(const Mount&) const = default;
};

// Parses one mount. Errors: kInvalid, the detail naming what is wrong
// with `text` (the caller adds the key and its line).
Result<Mount> ParseMount(std::string_view text);

// Whether `source` is one of `allowed` or beneath one of them (whole
// components: "/data" allows "/data/x", not "/database").
bool MountSourceAllowed(const std::string& source, const std::vector<std::string>& allowed);

}  // namespace pilot
