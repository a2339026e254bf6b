#include "core/base/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>
#include <thread>

#include "core/base/crypto.h"
#include "core/base/strings.h"

namespace pilot {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  HttpResponse* response;
  size_t max_body;
  bool too_large = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  if (t->response->body.size() + len > t->max_body) {
    t->too_large = true;
    return 0;  // makes curl abort the transfer
  }
  t->response->body.append(data, len);
  return len;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  std::string line(data, len);
  // A new status line (after a redirect or 100-continue) starts a new set.
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();
    return len;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return len;
  std::string name = AsciiLower(line.substr(0, colon));
  size_t b = colon + 1;
  while (b < line.size() && (line[b] == ' ' || line[b] == '\t')) ++b;
  size_t e = line.size();
  while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ')) --e;
  t->response->headers[name] = line.substr(b, e - b);
  return len;
}

struct CurlFree {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

class CurlHttpClient final : public HttpClient {
 public:
  Result<HttpResponse> Send(const HttpRequest& req, const HttpOptions& opt) override {
    GlobalInit();
    std::unique_ptr<CURL, CurlFree> curl(curl_easy_init());
    if (!curl) return Status::Internal("http", "curl_easy_init failed");
    CURL* c = curl.get();
    HttpResponse resp;
    Transfer t{&resp, opt.max_body_bytes};
    char errbuf[CURL_ERROR_SIZE] = {0};

    std::unique_ptr<curl_slist, SlistFree> headers;
    for (const auto& [name, value] : req.headers) {
      std::string line = name + ": " + value;
      curl_slist* next = curl_slist_append(headers.get(), line.c_str());
      if (next == nullptr) return Status::Internal("http", "out of memory");
      headers.release();
      headers.reset(next);
    }
    // Without this, curl sends "Expect: 100-continue" for larger bodies and
    // waits for an answer some small servers never give.
    headers.reset(curl_slist_append(headers.release(), "Expect:"));

    curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(opt.connect_timeout.count()));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(opt.total_timeout.count()));
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, opt.follow_redirects ? 1L : 0L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "slurm-pilot");
    if (!opt.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, opt.ca_file.c_str());

    if (req.method == "HEAD") {
      curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
      if (req.method != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    } else if (req.method != "GET") {
      curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    }

    CURLcode rc = curl_easy_perform(c);
    const std::string what = req.method + " " + req.url;
    if (t.too_large) {
      return Status::Corrupt(
          what, "response larger than " + std::to_string(opt.max_body_bytes) + " bytes");
    }
    if (rc != CURLE_OK) {
      std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
      if (rc == CURLE_URL_MALFORMAT || rc == CURLE_UNSUPPORTED_PROTOCOL) {
        return Status::Invalid(what, detail);
      }
      return Status::Unavailable(what, detail);
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.code);
    return resp;
  }
};

bool Retryable(long code) {  // NOLINT(runtime/int)
  return code == 408 || code == 429 || code >= 500;
}

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

std::unique_ptr<HttpClient> NewCurlHttpClient() { return std::make_unique<CurlHttpClient>(); }

Status PostJson(HttpClient& client, const std::string& url, const std::string& body,
                const std::vector<std::pair<std::string, std::string>>& headers,
                const HttpOptions& options, const RetryOptions& retry) {
  HttpRequest req;
  req.method = "POST";
  req.url = url;
  req.body = body;
  req.headers.emplace_back("Content-Type", "application/json");
  for (const auto& h : headers) req.headers.push_back(h);

  // A redirected POST turns into a GET whose 200 would look like a
  // delivery: redirects are answers, not successes.
  HttpOptions opts = options;
  opts.follow_redirects = false;
  auto backoff = retry.initial_backoff;
  Status last;
  const int attempts = 1 + std::max(0, retry.retries);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) {
      if (retry.sleep) {
        retry.sleep(backoff);
      } else {
        std::this_thread::sleep_for(backoff);
      }
      auto next = std::chrono::milliseconds(
          static_cast<int64_t>(static_cast<double>(backoff.count()) * retry.multiplier));
      backoff = std::min(next, retry.max_backoff);
    }
    auto resp = client.Send(req, opts);
    bool again;
    if (!resp.ok()) {
      last = resp.status();
      again = resp.status().code() == Code::kUnavailable;
    } else if (resp->code >= 200 && resp->code < 300) {
      return Status::Ok();
    } else {
      last = Status::Unavailable("POST " + url, "HTTP " + std::to_string(resp->code));
      again = Retryable(resp->code);
    }
    if (!again || attempt == attempts) {
      std::string detail = last.detail() + " (" + std::to_string(attempt) +
                           (attempt == 1 ? " attempt)" : " attempts)");
      return Status::Unavailable("POST " + url, detail);
    }
  }
  return last;  // not reached
}

std::string SignatureHeaderValue(std::string_view key, std::string_view body) {
  return "sha256=" + HmacSha256Hex(key, body);
}

std::string UrlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  return out;
}

}  // namespace pilot
