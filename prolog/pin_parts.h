// What a pilot-prolog pins into the lock, each part on its own: the seed,
// the container's digest, the model's and data's files, a program's pins
// (run as the job's user: pilot-prolog --pins), the versions of the
// software, the GPUs. What cannot be pinned is a problem of the lock
// (PinSession::Problem), never a failed prolog. Internal to pilot_prolog.
//
// Thread-safety: as PinSession's.
#pragma once

#include <optional>
#include <string>

#include "core/config/config.h"
#include "prolog/pin_session.h"

namespace pilot::prolog {

// The config's seed, else one derived from the job id (SeedFromJobId).
void PinSeed(PinSession& s, const std::optional<Config>& cfg);

// What the run identity holds beside the config's bytes: the container
// (the config's image, else pyxis' --container-image), the model and
// data files, the program's pins. One place for a pilot's prolog and a
// long job's binding check, so that both pin the same way.
void PinIdentityParts(PinSession& s, const std::optional<Config>& cfg);

// The image by digest: a local image file hashed as the user, else the
// registry's digest (PrologDeps::resolve_image).
void PinContainer(PinSession& s, const std::string& image);

// pilot-runner's versions (as the user), slurmd's, the OS's and the kernel's.
void PinVersions(PinSession& s);

// nvidia-smi's GPUs and driver, when it is installed.
void PinGpus(PinSession& s);

}  // namespace pilot::prolog
