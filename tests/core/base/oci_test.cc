#include "core/base/oci.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <thread>

#include "core/base/crypto.h"
#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

using std::chrono::milliseconds;

TEST(ImageReference, Parsing) {
  struct Case {
    std::string in;
    std::string registry, repository, tag, digest;
  };
  const std::string d = "sha256:" + std::string(64, 'a');
  const Case cases[] = {
      {"ubuntu", "registry-1.docker.io", "library/ubuntu", "latest", ""},
      {"ubuntu:22.04", "registry-1.docker.io", "library/ubuntu", "22.04", ""},
      {"docker.io/ubuntu", "registry-1.docker.io", "library/ubuntu", "latest", ""},
      {"pytorch/pytorch:2.5.1-cuda12.4", "registry-1.docker.io", "pytorch/pytorch",
       "2.5.1-cuda12.4", ""},
      {"ghcr.io/org/team/img:v1", "ghcr.io", "org/team/img", "v1", ""},
      {"127.0.0.1:5000/tiny:v1", "127.0.0.1:5000", "tiny", "v1", ""},
      {"localhost/tiny", "localhost", "tiny", "latest", ""},
      {"registry.local:8443/a/b", "registry.local:8443", "a/b", "latest", ""},
      {"nvcr.io/nvidia/pytorch@" + d, "nvcr.io", "nvidia/pytorch", "", d},
      {"nvcr.io/nvidia/pytorch:24.01@" + d, "nvcr.io", "nvidia/pytorch", "24.01", d},
      {"docker://ghcr.io/x/y:1", "ghcr.io", "x/y", "1", ""},
      {"nvcr.io#nvidia/pytorch:24.01", "nvcr.io", "nvidia/pytorch", "24.01", ""},
      {"alpine@" + d, "registry-1.docker.io", "library/alpine", "", d},
  };
  for (const auto& c : cases) {
    auto r = ParseImageReference(c.in);
    ASSERT_TRUE(r.ok()) << c.in << ": " << r.status().ToString();
    EXPECT_EQ(r->registry, c.registry) << c.in;
    EXPECT_EQ(r->repository, c.repository) << c.in;
    EXPECT_EQ(r->tag, c.tag) << c.in;
    EXPECT_EQ(r->digest, c.digest) << c.in;
  }
  EXPECT_EQ(ParseImageReference("ubuntu").value().ToString(),
            "registry-1.docker.io/library/ubuntu:latest");
  EXPECT_EQ(ParseImageReference("x/y@" + d).value().ToString(), "registry-1.docker.io/x/y@" + d);
}

TEST(ImageReference, Errors) {
  struct Case {
    std::string in;
    std::string message;
  };
  const Case cases[] = {
      {"", "pilot: container image \"\": empty reference"},
      {"Ubuntu",
       "pilot: container image \"Ubuntu\": repository \"library/Ubuntu\" may only use "
       "a-z, 0-9, '.', '_', '-' and '/'"},
      {"x@sha256:abc",
       "pilot: container image \"x@sha256:abc\": digest must be sha256: followed "
       "by 64 lower-case hex digits"},
      {"x:", "pilot: container image \"x:\": bad tag \"\""},
      {"x:bad$tag", "pilot: container image \"x:bad$tag\": bad tag \"bad$tag\""},
      {"host.io/", "pilot: container image \"host.io/\": empty repository"},
      {"a//b", "pilot: container image \"a//b\": empty path component in \"a//b\""},
      {"#x", "pilot: container image \"#x\": empty registry before '#'"},
  };
  for (const auto& c : cases) {
    auto r = ParseImageReference(c.in);
    ASSERT_FALSE(r.ok()) << c.in;
    EXPECT_EQ(r.status().code(), Code::kInvalid);
    EXPECT_EQ(r.status().ToString(), c.message);
  }
}

TEST(ImageReference, LocalFiles) {
  EXPECT_TRUE(IsLocalImageFile("/images/pytorch.sqsh"));
  EXPECT_TRUE(IsLocalImageFile("./img.sif"));
  EXPECT_TRUE(IsLocalImageFile("img.squashfs"));
  EXPECT_FALSE(IsLocalImageFile("ubuntu:22.04"));
  EXPECT_FALSE(IsLocalImageFile(""));
}

// No network for pinned references and files: a client that fails every call.
class NoNetwork : public HttpClient {
 public:
  Result<HttpResponse> Send(const HttpRequest& r, const HttpOptions&) override {
    return Status::Internal("network used", r.url);
  }
};

TEST(ResolveDigest, PinnedAndLocalNeedNoNetwork) {
  NoNetwork net;
  const std::string d = "sha256:" + std::string(64, 'e');
  auto pinned = ResolveImage("ghcr.io/a/b:1@" + d, net, OciOptions{});
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_EQ(pinned->digest, d);
  EXPECT_EQ(pinned->pinned, "ghcr.io/a/b@" + d);

  testutil::TempDir dir;
  testutil::WriteText(dir / "img.sqsh", "squashfs bytes");
  auto file = ResolveImage(dir / "img.sqsh", net, OciOptions{});
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->digest, "sha256:" + Sha256Hex("squashfs bytes"));
  EXPECT_EQ(file->method, "file");
  auto missing = ResolveDigest(dir / "none.sif", net, OciOptions{});
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().ToString(),
            "pilot: container image: " + (dir / "none.sif") + ": no such file");
}

OciOptions Insecure(int port) {
  OciOptions o;
  o.insecure_registries = {"127.0.0.1:" + std::to_string(port)};
  o.connect_timeout = milliseconds(1000);
  o.total_timeout = milliseconds(3000);
  o.retries = 1;
  o.backoff = milliseconds(10);
  return o;
}

// ---- A registry that demands a bearer token (Python) -----------------------

constexpr char kTokenRegistryPy[] = R"PY(
import http.server, hashlib, sys, urllib.parse
MANIFEST = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}'
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, body):
        p = urllib.parse.urlparse(self.path)
        if p.path == '/token':
            q = urllib.parse.parse_qs(p.query)
            ok = q.get('service') == ['test-registry'] and q.get('scope') == ['repository:team/app:pull']
            b = b'{"token":"tok-123"}' if ok else b'{}'
            self.send_response(200 if ok else 400)
            self.send_header('Content-Length', str(len(b))); self.end_headers()
            if body: self.wfile.write(b)
            return
        if p.path != '/v2/team/app/manifests/v7':
            self.send_response(404); self.send_header('Content-Length', '0'); self.end_headers(); return
        if self.headers.get('Authorization') != 'Bearer tok-123':
            port = self.server.server_address[1]
            self.send_response(401)
            self.send_header('WWW-Authenticate', 'Bearer realm="http://127.0.0.1:%d/token",service="test-registry",scope="repository:team/app:pull"' % port)
            self.send_header('Content-Length', '0'); self.end_headers(); return
        if 'application/vnd.oci.image.manifest.v1+json' not in self.headers.get('Accept', ''):
            self.send_response(406); self.send_header('Content-Length', '0'); self.end_headers(); return
        # No Docker-Content-Digest header: the client must hash the body.
        self.send_response(200)
        self.send_header('Content-Type', 'application/vnd.oci.image.manifest.v1+json')
        self.send_header('Content-Length', str(len(MANIFEST))); self.end_headers()
        if body: self.wfile.write(MANIFEST)
    def do_HEAD(self): self.reply(False)
    def do_GET(self): self.reply(True)
    def log_message(self, *a): pass
s = http.server.HTTPServer(('127.0.0.1', 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
)PY";

TEST(ResolveDigest, BearerTokenChallengeAndBodyHash) {
  testutil::TempDir dir;
  testutil::WriteText(dir / "reg.py", kTokenRegistryPy);
  testutil::Child server({"python3", dir / "reg.py"});
  int port = std::atoi(server.ReadLine().c_str());
  ASSERT_GT(port, 0);
  auto client = NewCurlHttpClient();
  const std::string host = "127.0.0.1:" + std::to_string(port);
  auto r = ResolveImage(host + "/team/app:v7", *client, Insecure(port));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::string manifest =
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]})";
  EXPECT_EQ(r->digest, "sha256:" + Sha256Hex(manifest));
  EXPECT_EQ(r->pinned, host + "/team/app@" + r->digest);

  auto missing = ResolveDigest(host + "/team/app:v8", *client, Insecure(port));
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().ToString(),
            "pilot: container " + host + "/team/app:v8: no such image or tag (HTTP 404)");
}

TEST(ResolveDigest, UnreachableRegistry) {
  auto client = NewCurlHttpClient();
  int port = testutil::FreePort();
  auto r = ResolveDigest("127.0.0.1:" + std::to_string(port) + "/x:1", *client, Insecure(port));
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  // https by default: a plain-http registry not listed as insecure fails.
  OciOptions secure = Insecure(port);
  secure.insecure_registries.clear();
  EXPECT_FALSE(ResolveDigest("127.0.0.1:" + std::to_string(port) + "/x:1", *client, secure).ok());
}

// ---- Debian's docker-registry ----------------------------------------------

class DockerRegistry {
 public:
  explicit DockerRegistry(const std::string& dir) : port_(testutil::FreePort()) {
    const std::string config = dir + "/config.yml";
    testutil::WriteText(config,
                        "version: 0.1\n"
                        "log:\n  level: error\n  accesslog:\n    disabled: true\n"
                        "storage:\n  filesystem:\n    rootdirectory: " +
                            dir +
                            "/data\n"
                            "http:\n  addr: 127.0.0.1:" +
                            std::to_string(port_) + "\n");
    child_ = std::make_unique<testutil::Child>(
        std::vector<std::string>{"/usr/bin/docker-registry", "serve", config}, false);
    auto client = NewCurlHttpClient();
    HttpRequest req;
    req.url = base() + "/v2/";
    for (int i = 0; i < 100 && !ready_; ++i) {
      auto r = client->Send(req, HttpOptions{});
      ready_ = r.ok() && r->code == 200;
      if (!ready_) std::this_thread::sleep_for(milliseconds(50));
    }
  }
  bool ready() const { return ready_; }
  int port() const { return port_; }
  std::string host() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string base() const { return "http://" + host(); }

  // Uploads a blob through the HTTP API (POST, then PUT with the digest).
  std::string PushBlob(HttpClient& c, const std::string& repo, const std::string& bytes) {
    HttpRequest start;
    start.method = "POST";
    start.url = base() + "/v2/" + repo + "/blobs/uploads/";
    auto r = c.Send(start, HttpOptions{});
    EXPECT_TRUE(r.ok() && r->code == 202) << (r.ok() ? r->code : 0);
    if (!r.ok()) return "";
    std::string loc = r->Header("location");
    if (loc.rfind("http", 0) != 0) loc = base() + loc;
    std::string digest = "sha256:" + Sha256Hex(bytes);
    HttpRequest put;
    put.method = "PUT";
    put.url =
        loc + (loc.find('?') == std::string::npos ? "?" : "&") + "digest=" + UrlEncode(digest);
    put.headers = {{"Content-Type", "application/octet-stream"}};
    put.body = bytes;
    auto p = c.Send(put, HttpOptions{});
    EXPECT_TRUE(p.ok() && p->code == 201) << (p.ok() ? p->body : p.status().ToString());
    return digest;
  }

  // Pushes a Docker v2 image manifest with one layer under `tag`; returns
  // the manifest bytes.
  std::string PushImage(HttpClient& c, const std::string& repo, const std::string& tag,
                        const std::string& layer) {
    const std::string config =
        R"({"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}})";
    std::string cd = PushBlob(c, repo, config);
    std::string ld = PushBlob(c, repo, layer);
    std::string manifest =
        R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",)"
        R"("config":{"mediaType":"application/vnd.docker.container.image.v1+json","size":)" +
        std::to_string(config.size()) + R"(,"digest":")" + cd +
        R"("},"layers":[{"mediaType":)"
        R"("application/vnd.docker.image.rootfs.diff.tar.gzip","size":)" +
        std::to_string(layer.size()) + R"(,"digest":")" + ld + R"("}]})";
    HttpRequest put;
    put.method = "PUT";
    put.url = base() + "/v2/" + repo + "/manifests/" + tag;
    put.headers = {{"Content-Type", "application/vnd.docker.distribution.manifest.v2+json"}};
    put.body = manifest;
    auto p = c.Send(put, HttpOptions{});
    EXPECT_TRUE(p.ok() && p->code == 201) << (p.ok() ? p->body : p.status().ToString());
    return manifest;
  }

 private:
  int port_;
  std::unique_ptr<testutil::Child> child_;
  bool ready_ = false;
};

TEST(ResolveDigest, RealRegistryTagThenMovedTag) {
  if (!std::filesystem::exists("/usr/bin/docker-registry")) {
    GTEST_SKIP() << "docker-registry not installed (scripts/setup installs it)";
  }
  testutil::TempDir dir;
  DockerRegistry reg(dir.path());
  ASSERT_TRUE(reg.ready()) << "docker-registry did not start on " << reg.host();
  auto client = NewCurlHttpClient();

  std::string m1 = reg.PushImage(*client, "pilot/tiny", "v1", "layer one");
  auto d1 = ResolveImage(reg.host() + "/pilot/tiny:v1", *client, Insecure(reg.port()));
  ASSERT_TRUE(d1.ok()) << d1.status().ToString();
  EXPECT_EQ(d1->digest, "sha256:" + Sha256Hex(m1));
  EXPECT_EQ(d1->method, "registry");
  EXPECT_EQ(d1->pinned, reg.host() + "/pilot/tiny@" + d1->digest);

  // Move the tag: the next resolution sees the new manifest.
  std::string m2 = reg.PushImage(*client, "pilot/tiny", "v1", "layer two");
  auto d2 = ResolveDigest(reg.host() + "/pilot/tiny:v1", *client, Insecure(reg.port()));
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  EXPECT_EQ(*d2, "sha256:" + Sha256Hex(m2));
  EXPECT_NE(*d2, d1->digest);

  auto none = ResolveDigest(reg.host() + "/pilot/tiny:v9", *client, Insecure(reg.port()));
  EXPECT_EQ(none.status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace pilot
