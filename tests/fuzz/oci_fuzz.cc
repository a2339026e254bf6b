// What a registry answers (core/base/oci.h): image references, then the
// resolution of a tag against a fake registry whose every answer comes from
// the input: status code, WWW-Authenticate challenge (the bearer token
// dance), Docker-Content-Digest, body (the manifest, or the token service's
// JSON).
#include <fuzzer/FuzzedDataProvider.h>

#include "core/base/oci.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

class FuzzedRegistry : public pilot::HttpClient {
 public:
  explicit FuzzedRegistry(FuzzedDataProvider* in) : in_(in) {}
  pilot::Result<pilot::HttpResponse> Send(const pilot::HttpRequest&, const pilot::HttpOptions&) override {
    if (++requests_ > 16) return pilot::Status::Unavailable("fuzz", "too many requests");
    static constexpr long kCodes[] = {200, 200, 401, 401, 403, 404, 405, 429, 500, 503, 301, 0};
    const long code = kCodes[in_->ConsumeIntegralInRange<size_t>(0, std::size(kCodes) - 1)];
    if (code == 0) return pilot::Status::Unavailable("fuzz", "connection refused");
    pilot::HttpResponse r;
    r.code = code;
    if (in_->ConsumeBool()) r.headers["www-authenticate"] = in_->ConsumeRandomLengthString(512);
    if (in_->ConsumeBool()) r.headers["docker-content-digest"] = in_->ConsumeRandomLengthString(128);
    r.body = in_->ConsumeRandomLengthString(4096);
    return r;
  }

 private:
  FuzzedDataProvider* in_;
  int requests_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string reference = in.ConsumeRandomLengthString(256);
  auto ref = pilot::ParseImageReference(reference);
  if (ref.ok()) (void)ref->ToString();
  pilot::OciOptions opts;
  opts.retries = in.ConsumeIntegralInRange<int>(0, 2);
  opts.backoff = std::chrono::milliseconds(0);
  FuzzedRegistry registry(&in);
  auto r = pilot::ResolveImage("registry.test/org/img:v1", registry, opts);
  if (r.ok()) {
    pilot::fuzz::Require(r->digest.rfind("sha256:", 0) == 0 && r->digest.size() == 71,
                         "a resolved digest is not sha256:<64 hex>", r->digest);
  }
  return 0;
}
