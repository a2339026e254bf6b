// A config against the site's policy: what pilot.conf(5) allows a user's
// [container] keys to ask for. The loader checks a config on its own; this
// is the part only a reader of the site's policy can check, done by the
// plugin at submission and by `pilot check --policy` (the supervisor checks
// again before it starts anything).
//
// Thread-safety: pure.
#pragma once

#include "core/base/status.h"
#include "core/config/config.h"
#include "core/records/policy.h"

namespace pilot {

// container.runtime among the site's allowed_runtimes, and each
// container.mounts source under allowed_mounts. Errors: kInvalid
// "FILE:LINE: container.runtime: ..." (the line the key is on, c.path the
// file) with a hint naming pilot.conf.
Status CheckConfigAgainstSite(const Config& c, const ContainerPolicy& site);

}  // namespace pilot
