// The real world behind PrologDeps: fork/exec, the clock, libcurl.
#include <ctime>
#include <memory>

#include "core/base/http.h"
#include "core/base/oci.h"
#include "prolog/prolog.h"

namespace pilot::prolog {

PrologDeps RealPrologDeps(const Policy& policy) {
  PrologDeps d;
  d.run = job::RunCommand;
  d.now_unix = [] { return static_cast<int64_t>(std::time(nullptr)); };
  const OciOptions oci = OciOptionsFrom(policy.registry);
  d.resolve_image = [oci](const std::string& reference) {
    std::unique_ptr<HttpClient> client = NewCurlHttpClient();
    return ResolveImage(reference, *client, oci);
  };
  return d;
}

}  // namespace pilot::prolog
