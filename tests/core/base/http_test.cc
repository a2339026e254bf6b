#include "core/base/http.h"

#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

#include "core/base/crypto.h"
#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

using std::chrono::milliseconds;

// Answers from a script; records requests.
class ScriptedHttpClient : public HttpClient {
 public:
  std::deque<Result<HttpResponse>> answers;
  std::vector<HttpRequest> requests;
  Result<HttpResponse> Send(const HttpRequest& req, const HttpOptions&) override {
    requests.push_back(req);
    if (answers.empty()) return Status::Internal("script", "no more answers");
    auto a = answers.front();
    answers.pop_front();
    return a;
  }
};

HttpResponse Code(long code) {  // NOLINT(runtime/int)
  HttpResponse r;
  r.code = code;
  return r;
}

RetryOptions Recording(std::vector<milliseconds>* sleeps, int retries = 3) {
  RetryOptions r;
  r.retries = retries;
  r.sleep = [sleeps](milliseconds d) { sleeps->push_back(d); };
  return r;
}

TEST(PostJson, RetriesWithExponentialBackoff) {
  struct Case {
    const char* name;
    std::vector<Result<HttpResponse>> answers;
    bool ok;
    size_t attempts;
    std::string message;
  };
  const Status down = Status::Unavailable("POST http://x/", "Couldn't connect to server");
  const Case cases[] = {
      {"first try", {Code(200)}, true, 1, ""},
      {"any 2xx", {Code(204)}, true, 1, ""},
      {"503 then ok", {Code(503), Code(502), Code(201)}, true, 3, ""},
      {"down then ok", {down, Code(200)}, true, 2, ""},
      {"always 500",
       {Code(500), Code(500), Code(500), Code(500)},
       false,
       4,
       "pilot: POST http://x/: HTTP 500 (4 attempts)"},
      {"always down",
       {down, down, down, down},
       false,
       4,
       "pilot: POST http://x/: Couldn't connect to server (4 attempts)"},
      {"400 is final", {Code(400)}, false, 1, "pilot: POST http://x/: HTTP 400 (1 attempt)"},
      {"429 retried", {Code(429), Code(200)}, true, 2, ""},
      {"redirect is not success",
       {Code(302)},
       false,
       1,
       "pilot: POST http://x/: HTTP 302 (1 attempt)"},
  };
  for (const auto& c : cases) {
    ScriptedHttpClient client;
    for (const auto& a : c.answers) client.answers.push_back(a);
    std::vector<milliseconds> sleeps;
    Status s =
        PostJson(client, "http://x/", "{}", {{"X-A", "1"}}, HttpOptions{}, Recording(&sleeps));
    EXPECT_EQ(s.ok(), c.ok) << c.name << ": " << s.ToString();
    EXPECT_EQ(client.requests.size(), c.attempts) << c.name;
    if (!c.ok) {
      EXPECT_EQ(s.code(), pilot::Code::kUnavailable) << c.name;
      EXPECT_EQ(s.ToString(), c.message) << c.name;
    }
    // 500 ms, doubled per retry.
    std::vector<milliseconds> want;
    for (size_t i = 1; i < c.attempts; ++i) want.push_back(milliseconds(500 << (i - 1)));
    EXPECT_EQ(sleeps, want) << c.name;
  }
}

TEST(PostJson, SendsJsonWithHeaders) {
  ScriptedHttpClient client;
  client.answers.push_back(Code(200));
  std::vector<milliseconds> sleeps;
  ASSERT_TRUE(PostJson(client, "http://x/", "{\"a\":1}",
                       {{kSignatureHeader, SignatureHeaderValue("k", "{\"a\":1}")}}, HttpOptions{},
                       Recording(&sleeps))
                  .ok());
  const HttpRequest& r = client.requests[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.body, "{\"a\":1}");
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0],
            (std::pair<std::string, std::string>{"Content-Type", "application/json"}));
  EXPECT_EQ(r.headers[1].first, "X-Pilot-Signature-256");
  EXPECT_EQ(r.headers[1].second, "sha256=" + HmacSha256Hex("k", "{\"a\":1}"));
}

TEST(PostJson, BackoffIsCapped) {
  ScriptedHttpClient client;
  for (int i = 0; i < 6; ++i) client.answers.push_back(Code(503));
  std::vector<milliseconds> sleeps;
  RetryOptions r = Recording(&sleeps, 5);
  r.max_backoff = milliseconds(1500);
  EXPECT_FALSE(PostJson(client, "http://x/", "{}", {}, HttpOptions{}, r).ok());
  EXPECT_EQ(sleeps,
            (std::vector<milliseconds>{milliseconds(500), milliseconds(1000), milliseconds(1500),
                                       milliseconds(1500), milliseconds(1500)}));
}

TEST(UrlEncode, Reserved) {
  EXPECT_EQ(UrlEncode("repository:lib/x:pull"), "repository%3Alib%2Fx%3Apull");
  EXPECT_EQ(UrlEncode("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(UrlEncode("a b"), "a%20b");
}

// ---- Against a real receiver on 127.0.0.1 ---------------------------------

RetryOptions Fast(int retries = 3) {
  RetryOptions r;
  r.retries = retries;
  r.initial_backoff = milliseconds(20);
  return r;
}

TEST(CurlHttpClient, PostsToRealReceiver) {
  testutil::TempDir dir;
  testutil::Receiver rx(dir.path());
  ASSERT_GT(rx.port(), 0);
  auto client = NewCurlHttpClient();
  const std::string body = R"({"decision":"GO","job":{"id":7}})";
  Status s =
      PostJson(*client, rx.url(), body, {{kSignatureHeader, SignatureHeaderValue("secret", body)}},
               HttpOptions{}, Fast());
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(rx.Count(), 1);
  EXPECT_EQ(testutil::ReadText(rx.out() + "/0.body"), body);
  EXPECT_EQ(testutil::ReadText(rx.out() + "/0.type"), "application/json");
  std::string sig = testutil::ReadText(rx.out() + "/0.sig");
  ASSERT_EQ(sig.rfind("sha256=", 0), 0u);
  EXPECT_TRUE(HmacVerify("secret", body, sig.substr(7)));
}

TEST(CurlHttpClient, RetriesUntilReceiverRecovers) {
  testutil::TempDir dir;
  testutil::Receiver rx(dir.path(), /*fail_first=*/2);
  auto client = NewCurlHttpClient();
  Status s = PostJson(*client, rx.url(), "{}", {}, HttpOptions{}, Fast());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(rx.Count(), 1);
}

TEST(CurlHttpClient, ReportsHttpCodeAndConnectionErrors) {
  testutil::TempDir dir;
  testutil::Receiver rx(dir.path(), 0, /*code=*/403);
  auto client = NewCurlHttpClient();
  Status s = PostJson(*client, rx.url(), "{}", {}, HttpOptions{}, Fast());
  EXPECT_EQ(s.ToString(), "pilot: POST " + rx.url() + ": HTTP 403 (1 attempt)");

  testutil::TempDir dir2;
  testutil::Receiver moved(dir2.path(), 0, /*code=*/301);
  EXPECT_EQ(PostJson(*client, moved.url(), "{}", {}, HttpOptions{}, Fast()).ToString(),
            "pilot: POST " + moved.url() + ": HTTP 301 (1 attempt)");

  // Nobody listens on this port.
  std::string url = "http://127.0.0.1:" + std::to_string(testutil::FreePort()) + "/v";
  Status down = PostJson(*client, url, "{}", {}, HttpOptions{}, Fast(1));
  EXPECT_EQ(down.code(), pilot::Code::kUnavailable);
  EXPECT_NE(down.ToString().find("(2 attempts)"), std::string::npos) << down.ToString();
  EXPECT_EQ(down.ToString().rfind("pilot: POST " + url + ": ", 0), 0u) << down.ToString();
}

// A server that accepts and never answers: the total timeout ends each
// attempt, and the retries are bounded.
TEST(CurlHttpClient, TotalTimeoutBoundsASilentServer) {
  testutil::Child silent({"python3", "-c",
                          "import socket,time\n"
                          "s=socket.socket();s.bind(('127.0.0.1',0));s.listen(8)\n"
                          "print(s.getsockname()[1],flush=True)\n"
                          "c=[]\n"
                          "while True: c.append(s.accept())\n"});
  int port = std::atoi(silent.ReadLine().c_str());
  ASSERT_GT(port, 0);
  auto client = NewCurlHttpClient();
  HttpOptions o;
  o.total_timeout = milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  Status s =
      PostJson(*client, "http://127.0.0.1:" + std::to_string(port) + "/", "{}", {}, o, Fast(1));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), pilot::Code::kUnavailable);
  EXPECT_NE(s.ToString().find("(2 attempts)"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("timed out"), std::string::npos) << s.ToString();
  EXPECT_LT(took, std::chrono::seconds(3));
}

TEST(CurlHttpClient, GetHeadersAndBodyLimit) {
  testutil::TempDir dir;
  testutil::WriteText(dir / "f.txt", std::string(5000, 'x'));
  testutil::Child server(
      {"python3", "-c",
       "import http.server,functools,sys\n"
       "h=functools.partial(http.server.SimpleHTTPRequestHandler,directory=sys.argv[1])\n"
       "http.server.SimpleHTTPRequestHandler.log_message=lambda *a:None\n"
       "s=http.server.HTTPServer(('127.0.0.1',0),h)\n"
       "print(s.server_address[1],flush=True)\n"
       "s.serve_forever()\n",
       dir.path()});
  int port = std::atoi(server.ReadLine().c_str());
  ASSERT_GT(port, 0);
  auto client = NewCurlHttpClient();
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(port) + "/f.txt";
  auto r = client->Send(req, HttpOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->code, 200);
  EXPECT_EQ(r->body.size(), 5000u);
  EXPECT_EQ(r->Header("content-length"), "5000");
  HttpOptions small;
  small.max_body_bytes = 100;
  auto big = client->Send(req, small);
  EXPECT_EQ(big.status().code(), pilot::Code::kCorrupt);
  req.method = "HEAD";
  auto head = client->Send(req, HttpOptions{});
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->body, "");
  req.url = "nope://x";
  EXPECT_EQ(client->Send(req, HttpOptions{}).status().code(), pilot::Code::kInvalid);
}

}  // namespace
}  // namespace pilot
