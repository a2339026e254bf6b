// Container image pinning: tag -> digest through the OCI distribution API,
// local image files -> sha256 of their bytes.
//
// References follow the Docker/OCI conventions:
//   ubuntu                      -> registry-1.docker.io, library/ubuntu:latest
//   ghcr.io/org/img:1.2         -> ghcr.io, org/img:1.2
//   127.0.0.1:5000/tiny:v1      -> 127.0.0.1:5000, tiny:v1 (a port marks a host)
//   repo@sha256:<64 hex>        -> already pinned, no network
// Also accepted: a "docker://" prefix and enroot/pyxis's "REGISTRY#IMAGE".
// A path ending in .sqsh, .squashfs or .sif (or starting with '/' or '.')
// is a local image file.
//
// Thread-safety: pure functions plus the HttpClient passed in.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/base/http.h"
#include "core/base/status.h"

namespace pilot {

struct ImageReference {
  std::string registry;    // "registry-1.docker.io", "127.0.0.1:5000"
  std::string repository;  // "library/ubuntu"
  std::string tag;         // "latest" when none given and no digest
  std::string digest;      // "sha256:<hex>" when pinned in the reference
  // "registry/repository" + (":tag" | "@digest"), the canonical spelling.
  std::string ToString() const;
  // "registry/repository@<digest>" for a given digest.
  std::string Pinned(const std::string& digest_value) const;
};

// Parses a registry reference. Errors: kInvalid naming the problem
// (empty, bad characters, bad digest, upper case in the repository).
Result<ImageReference> ParseImageReference(const std::string& reference);

// True when `reference` names a local image file rather than a registry
// image (see above).
bool IsLocalImageFile(const std::string& reference);

struct OciOptions {
  std::vector<std::string> insecure_registries;  // "host:port" over plain http
  std::string ca_file;
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds total_timeout{20000};  // per request
  int retries = 2;                                 // extra attempts on transport errors and 5xx
  std::chrono::milliseconds backoff{500};          // doubled per retry
};

struct ResolvedImage {
  std::string digest;  // "sha256:<hex>"
  std::string pinned;  // "registry/repo@sha256:<hex>", or the file path
  std::string method;  // "registry" | "file"
};

// Resolves `reference` to a digest:
// - a local image file: sha256 of its bytes;
// - a reference with a digest: that digest (no network);
// - otherwise HEAD /v2/<repo>/manifests/<tag> (Accept: OCI index, OCI
//   manifest, Docker manifest list, Docker v2 manifest) and its
//   Docker-Content-Digest; when the header is missing, GET and sha256 of the
//   body. A 401 with "WWW-Authenticate: Bearer realm=..,service=..,scope=.."
//   fetches an anonymous token from the realm and retries once with it.
// Errors: kInvalid (bad reference), kNotFound (file or tag unknown: 404),
// kPermission (401/403 after the token), kUnavailable (network, 5xx,
// timeouts), kCorrupt (malformed digest header).
Result<ResolvedImage> ResolveImage(const std::string& reference, HttpClient& client,
                                   const OciOptions& options);
// The digest only ("sha256:<hex>").
Result<std::string> ResolveDigest(const std::string& reference, HttpClient& client,
                                  const OciOptions& options);

// The Accept header value used for manifest requests.
const std::string& ManifestAcceptHeader();

}  // namespace pilot
