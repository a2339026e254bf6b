// HTTP for the epilog (posting verdicts) and the prolog (OCI registries).
//
// HttpClient is the narrow interface; NewCurlHttpClient() is the libcurl
// implementation, FakeHttpClient-style fakes implement it in tests.
// PostJson() adds what posting needs on top: retries with exponential
// backoff and the 2xx-is-success rule.
//
// Thread-safety: a CurlHttpClient may be used from one thread at a time;
// create one per thread. curl_global_init runs once, on first use.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"

namespace pilot {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, POST, PUT, PATCH, DELETE
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // name, value
  std::string body;                                          // sent for POST/PUT/PATCH
};

struct HttpResponse {
  long code = 0;  // NOLINT(runtime/int): libcurl's type
  // Header names lower-cased; for repeated headers the last one wins.
  std::map<std::string, std::string> headers;
  std::string body;
  // Value of a header by lower-case name, "" when absent.
  std::string Header(const std::string& lower_name) const;
};

struct HttpOptions {
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds total_timeout{20000};  // whole request
  std::string ca_file;                             // "" = system trust store
  size_t max_body_bytes = 8u << 20;                // a larger response is an error
  bool follow_redirects = true;                    // at most 5; registries redirect blobs
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // Performs one request. Any HTTP status is a successful transfer (the
  // caller judges the code). Errors: kUnavailable for transport failures
  // ("url: Couldn't connect to server", timeouts, TLS), kInvalid for a bad
  // URL, kCorrupt for a body over max_body_bytes.
  virtual Result<HttpResponse> Send(const HttpRequest& request, const HttpOptions& options) = 0;
};

// The libcurl implementation.
std::unique_ptr<HttpClient> NewCurlHttpClient();

struct RetryOptions {
  int retries = 3;                                 // extra attempts after the first
  std::chrono::milliseconds initial_backoff{500};  // before the first retry
  double multiplier = 2.0;                         // backoff growth per retry
  std::chrono::milliseconds max_backoff{10000};
  // How to wait between attempts (tests pass a recorder instead of sleeping).
  std::function<void(std::chrono::milliseconds)> sleep;  // default: this_thread::sleep_for
};

// POSTs `body` as application/json to `url` with `headers`, retrying
// transport errors, 408, 429 and 5xx with exponential backoff; other 4xx
// are final. Success is any 2xx; redirects are not followed (a 3xx is a
// final failure). Errors: kUnavailable "POST url: HTTP 503"
// or "POST url: <curl error>" (the last attempt's), with the attempt count.
Status PostJson(HttpClient& client, const std::string& url, const std::string& body,
                const std::vector<std::pair<std::string, std::string>>& headers,
                const HttpOptions& options, const RetryOptions& retry);

// The header the epilog signs posted verdicts with, and its value
// "sha256=<hex HMAC-SHA256(key, body)>".
inline constexpr char kSignatureHeader[] = "X-Pilot-Signature-256";
std::string SignatureHeaderValue(std::string_view key, std::string_view body);

// Percent-encodes everything except unreserved characters (RFC 3986).
std::string UrlEncode(std::string_view s);

}  // namespace pilot
