#include "core/base/oci.h"

#include <algorithm>
#include <cctype>
#include <thread>

#include "core/base/crypto.h"
#include "core/base/json_util.h"
#include "core/base/strings.h"

namespace pilot {
namespace {

constexpr char kDockerHub[] = "docker.io";
constexpr char kDockerHubApi[] = "registry-1.docker.io";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool IsRepoChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
         c == '/';
}

bool IsTagChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// One "key=value" or key="value" list entry of a WWW-Authenticate header.
std::map<std::string, std::string> ParseChallenge(const std::string& header, std::string* scheme) {
  std::map<std::string, std::string> out;
  size_t sp = header.find(' ');
  *scheme = AsciiLower(header.substr(0, sp));
  if (sp == std::string::npos) return out;
  size_t i = sp + 1;
  while (i < header.size()) {
    while (i < header.size() && (header[i] == ' ' || header[i] == ',')) ++i;
    size_t eq = header.find('=', i);
    if (eq == std::string::npos) break;
    std::string key = AsciiLower(header.substr(i, eq - i));
    i = eq + 1;
    std::string value;
    if (i < header.size() && header[i] == '"') {
      ++i;
      while (i < header.size() && header[i] != '"') {
        if (header[i] == '\\' && i + 1 < header.size()) ++i;
        value.push_back(header[i++]);
      }
      ++i;  // closing quote
    } else {
      size_t end = header.find(',', i);
      if (end == std::string::npos) end = header.size();
      value = header.substr(i, end - i);
      i = end;
    }
    out[key] = value;
  }
  return out;
}

class Resolver {
 public:
  Resolver(const ImageReference& ref, HttpClient& client, const OciOptions& opt)
      : ref_(ref), client_(client), opt_(opt) {
    http_.connect_timeout = opt.connect_timeout;
    http_.total_timeout = opt.total_timeout;
    http_.ca_file = opt.ca_file;
    http_.max_body_bytes = 4u << 20;  // manifests are small
    bool insecure = std::find(opt.insecure_registries.begin(), opt.insecure_registries.end(),
                              ref.registry) != opt.insecure_registries.end();
    base_ = std::string(insecure ? "http://" : "https://") + ref.registry + "/v2/" +
            ref.repository + "/manifests/" + ref.tag;
  }

  Result<std::string> Run() {
    PILOT_ASSIGN_OR_RETURN(HttpResponse head, Request("HEAD"));
    if (head.code == 200) {
      std::string d = head.Header("docker-content-digest");
      if (!d.empty()) return CheckDigest(d);
    }
    // Some registries omit the digest header on HEAD (or refuse HEAD):
    // the digest is then the sha256 of the manifest bytes.
    PILOT_ASSIGN_OR_RETURN(HttpResponse get, Request("GET"));
    if (get.code != 200) return CodeError(get);
    std::string computed = "sha256:" + Sha256Hex(get.body);
    std::string d = get.Header("docker-content-digest");
    if (!d.empty() && d.rfind("sha256:", 0) == 0 && d != computed) {
      return Status::Corrupt(
          what(), "registry digest " + d + " does not match the manifest (" + computed + ")");
    }
    return computed;
  }

 private:
  std::string what() const { return "container " + ref_.ToString(); }

  Result<std::string> CheckDigest(const std::string& d) {
    if (d.rfind("sha256:", 0) != 0 || !IsSha256Hex(d.substr(7))) {
      return Status::Corrupt(what(), "registry sent a malformed digest \"" + d + "\"");
    }
    return d;
  }

  Status CodeError(const HttpResponse& r) {
    std::string detail = "registry answered HTTP " + std::to_string(r.code);
    if (r.code == 404) return Status::NotFound(what(), "no such image or tag (HTTP 404)");
    if (r.code == 401 || r.code == 403) {
      return Status::Permission(what(), detail)
          .WithHint("the prolog pulls anonymously; use a public image or a local image file");
    }
    return Status::Unavailable(what(), detail);
  }

  // One request with retries on transport errors and 5xx, and the bearer
  // token dance on a 401. Returns the last response for other codes.
  Result<HttpResponse> Request(const std::string& method) {
    HttpRequest req;
    req.method = method;
    req.url = base_;
    req.headers = {{"Accept", ManifestAcceptHeader()}};
    if (!token_.empty()) req.headers.emplace_back("Authorization", "Bearer " + token_);
    bool tried_token = false;
    auto backoff = opt_.backoff;
    for (int attempt = 0;; ++attempt) {
      auto r = client_.Send(req, http_);
      // Transport errors, 5xx and 429 fall through to a retry.
      if (!r.ok()) {
        if (r.status().code() != Code::kUnavailable) return r.status();
      } else if (r->code == 401 && !tried_token) {
        tried_token = true;
        PILOT_RETURN_IF_ERROR(FetchToken(r->Header("www-authenticate")));
        req.headers = {{"Accept", ManifestAcceptHeader()}, {"Authorization", "Bearer " + token_}};
        --attempt;  // the token round is not a retry
        continue;
      } else if (r->code < 500 && r->code != 429) {
        if (r->code != 200 && !(method == "HEAD" && r->code == 405)) return CodeError(*r);
        return r;
      }
      if (attempt >= opt_.retries) {
        if (!r.ok()) return Status::Unavailable(what(), r.status().Message());
        return CodeError(*r);
      }
      std::this_thread::sleep_for(backoff);
      backoff *= 2;
    }
  }

  Status FetchToken(const std::string& challenge) {
    std::string scheme;
    auto params = ParseChallenge(challenge, &scheme);
    if (scheme != "bearer" || params["realm"].empty()) {
      return Status::Permission(what(), "registry requires authentication (" +
                                            (challenge.empty() ? "no challenge" : challenge) + ")");
    }
    std::string url = params["realm"];
    std::string sep = url.find('?') == std::string::npos ? "?" : "&";
    if (!params["service"].empty()) {
      url += sep + "service=" + UrlEncode(params["service"]);
      sep = "&";
    }
    std::string scope = params["scope"];
    if (scope.empty()) scope = "repository:" + ref_.repository + ":pull";
    url += sep + "scope=" + UrlEncode(scope);
    HttpRequest req;
    req.url = url;
    HttpOptions o = http_;
    o.max_body_bytes = 1u << 20;
    auto r = client_.Send(req, o);
    if (!r.ok()) return Status::Unavailable(what(), "token: " + r.status().Message());
    if (r->code != 200) {
      return Status::Permission(what(), "token service answered HTTP " + std::to_string(r->code));
    }
    auto j = ParseJsonText(r->body, "token response", o.max_body_bytes);
    if (!j.ok()) return Status::Unavailable(what(), j.status().Message());
    for (const char* key : {"token", "access_token"}) {
      if (j->is_object() && j->contains(key) && (*j)[key].is_string()) {
        token_ = (*j)[key].get<std::string>();
        if (!token_.empty()) return Status::Ok();
      }
    }
    return Status::Unavailable(what(), "token response has no token");
  }

  const ImageReference& ref_;
  HttpClient& client_;
  const OciOptions& opt_;
  HttpOptions http_;
  std::string base_;
  std::string token_;
};

}  // namespace

std::string ImageReference::ToString() const {
  std::string s = registry + "/" + repository;
  if (!digest.empty()) return s + "@" + digest;
  return s + ":" + tag;
}

std::string ImageReference::Pinned(const std::string& digest_value) const {
  return registry + "/" + repository + "@" + digest_value;
}

const std::string& ManifestAcceptHeader() {
  static const std::string k =
      "application/vnd.oci.image.index.v1+json, "
      "application/vnd.oci.image.manifest.v1+json, "
      "application/vnd.docker.distribution.manifest.list.v2+json, "
      "application/vnd.docker.distribution.manifest.v2+json";
  return k;
}

bool IsLocalImageFile(const std::string& ref) {
  if (ref.empty()) return false;
  if (ref[0] == '/' || ref[0] == '.') return true;
  return EndsWith(ref, ".sqsh") || EndsWith(ref, ".squashfs") || EndsWith(ref, ".sif");
}

Result<ImageReference> ParseImageReference(const std::string& reference) {
  auto bad = [&](const std::string& detail) {
    return Status::Invalid("container image \"" + reference + "\"", detail);
  };
  std::string s = reference;
  if (s.rfind("docker://", 0) == 0) s = s.substr(9);
  if (s.empty()) return bad("empty reference");
  ImageReference ref;

  size_t at = s.find('@');
  if (at != std::string::npos) {
    ref.digest = s.substr(at + 1);
    s = s.substr(0, at);
    if (ref.digest.rfind("sha256:", 0) != 0 || !IsSha256Hex(ref.digest.substr(7))) {
      return bad("digest must be sha256: followed by 64 lower-case hex digits");
    }
  }
  // enroot/pyxis spelling: "nvcr.io#nvidia/pytorch:24.01".
  size_t hash = s.find('#');
  std::string rest;
  if (hash != std::string::npos) {
    ref.registry = s.substr(0, hash);
    rest = s.substr(hash + 1);
    if (ref.registry.empty()) return bad("empty registry before '#'");
  } else {
    size_t slash = s.find('/');
    std::string first = s.substr(0, slash);
    if (slash != std::string::npos &&
        (first.find('.') != std::string::npos || first.find(':') != std::string::npos ||
         first == "localhost")) {
      ref.registry = first;
      rest = s.substr(slash + 1);
    } else {
      ref.registry = kDockerHub;
      rest = s;
    }
  }
  // Tag: after the last ':' of the last path component.
  size_t last_slash = rest.find_last_of('/');
  size_t colon = rest.find(':', last_slash == std::string::npos ? 0 : last_slash);
  if (colon != std::string::npos) {
    ref.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (ref.tag.empty() || ref.tag.size() > 128 ||
        !std::all_of(ref.tag.begin(), ref.tag.end(), IsTagChar) || ref.tag[0] == '.' ||
        ref.tag[0] == '-') {
      return bad("bad tag \"" + ref.tag + "\"");
    }
  } else if (ref.digest.empty()) {
    ref.tag = "latest";
  }
  if (ref.registry == kDockerHub || ref.registry == "index.docker.io") {
    ref.registry = kDockerHubApi;
  }
  if (ref.registry == kDockerHubApi && rest.find('/') == std::string::npos) {
    rest = "library/" + rest;
  }
  if (rest.empty()) return bad("empty repository");
  if (!std::all_of(rest.begin(), rest.end(), IsRepoChar)) {
    return bad("repository \"" + rest + "\" may only use a-z, 0-9, '.', '_', '-' and '/'");
  }
  if (rest.front() == '/' || rest.back() == '/' || rest.find("//") != std::string::npos) {
    return bad("empty path component in \"" + rest + "\"");
  }
  ref.repository = rest;
  for (char c : ref.registry) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
          c == '[' || c == ']')) {
      return bad("bad registry host \"" + ref.registry + "\"");
    }
  }
  return ref;
}

Result<ResolvedImage> ResolveImage(const std::string& reference, HttpClient& client,
                                   const OciOptions& options) {
  if (IsLocalImageFile(reference)) {
    auto h = Sha256File(reference);
    if (!h.ok()) return h.status().Context("container image");
    return ResolvedImage{"sha256:" + *h, reference, "file"};
  }
  PILOT_ASSIGN_OR_RETURN(ImageReference ref, ParseImageReference(reference));
  if (!ref.digest.empty()) return ResolvedImage{ref.digest, ref.Pinned(ref.digest), "registry"};
  Resolver resolver(ref, client, options);
  PILOT_ASSIGN_OR_RETURN(std::string digest, resolver.Run());
  return ResolvedImage{digest, ref.Pinned(digest), "registry"};
}

Result<std::string> ResolveDigest(const std::string& reference, HttpClient& client,
                                  const OciOptions& options) {
  PILOT_ASSIGN_OR_RETURN(ResolvedImage r, ResolveImage(reference, client, options));
  return r.digest;
}

}  // namespace pilot
