#include "core/records/outbox.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "core/base/crypto.h"
#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

using std::chrono::milliseconds;

TEST(Outbox, EnqueueListFlush) {
  testutil::TempDir dir;
  Outbox box(dir.path() + "/outbox");
  EXPECT_TRUE(box.List()->empty());  // no directory yet: empty
  ASSERT_TRUE(box.Enqueue("4242", "{\"job\":4242}").ok());
  ASSERT_TRUE(box.Enqueue("4243", "{\"job\":4243}").ok());
  ASSERT_TRUE(box.Enqueue("4241", "{\"job\":4241}").ok());
  auto files = box.List();
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0], box.dir() + "/4241.json");
  struct stat st {};
  ASSERT_EQ(::stat((*files)[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(box.dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // The receiver refuses 4242: it stays queued, the others go.
  std::vector<std::string> posted;
  auto report = box.Flush([&](const std::string& body) {
    if (body.find("4242") != std::string::npos) return Status::Unavailable("POST", "HTTP 503");
    posted.push_back(body);
    return Status::Ok();
  });
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->sent, 2);
  EXPECT_EQ(report->kept, 1);
  ASSERT_EQ(report->errors.size(), 1u);
  EXPECT_EQ(report->errors[0].ToString(), "pilot: " + box.dir() + "/4242.json: POST: HTTP 503");
  EXPECT_EQ(posted, (std::vector<std::string>{"{\"job\":4241}", "{\"job\":4243}"}));
  EXPECT_EQ(*box.List(), std::vector<std::string>{box.dir() + "/4242.json"});
}

TEST(Outbox, RejectsBadNamesAndIgnoresTempFiles) {
  testutil::TempDir dir;
  Outbox box(dir / "outbox");
  EXPECT_EQ(box.Enqueue("../etc/passwd", "x").code(), Code::kInvalid);
  EXPECT_EQ(box.Enqueue("", "x").code(), Code::kInvalid);
  ASSERT_TRUE(box.Enqueue("1", "x").ok());
  testutil::WriteText(box.dir() + "/.1.json.tmp.1.abc", "partial");
  testutil::WriteText(box.dir() + "/notes.txt", "x");
  EXPECT_EQ(box.List()->size(), 1u);
}

NotifyTarget Target(const std::string& url) {
  NotifyTarget t;
  t.url = url;
  t.key = "0123456789abcdef0123456789abcdef";
  t.http.connect_timeout = milliseconds(1000);
  t.http.total_timeout = milliseconds(3000);
  t.retry.retries = 1;
  t.retry.initial_backoff = milliseconds(10);
  return t;
}

// Receiver down: the verdict is queued; once it is up, flush delivers it
// with a valid signature and empties the outbox. Nothing is lost.
TEST(Outbox, ReceiverDownThenFlushDelivers) {
  testutil::TempDir dir;
  auto client = NewCurlHttpClient();
  Outbox box(dir / "outbox");
  const std::string body = R"({"decision":"GO","job":{"id":99}})";

  NotifyTarget down = Target("http://127.0.0.1:" + std::to_string(testutil::FreePort()) + "/v");
  Status s = DeliverOrQueue(*client, down, box, "99", body);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.ToString().find("queued in " + box.dir()), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("HINT: deliver it later with 'pilot flush'"), std::string::npos);
  ASSERT_EQ(box.List()->size(), 1u);
  EXPECT_EQ(testutil::ReadText(box.dir() + "/99.json"), body);

  testutil::Receiver rx(dir.path());
  NotifyTarget up = Target(rx.url());
  auto report = box.Flush([&](const std::string& b) { return PostSigned(*client, up, b); });
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->sent, 1);
  EXPECT_EQ(report->kept, 0);
  EXPECT_TRUE(box.List()->empty());
  ASSERT_EQ(rx.Count(), 1);
  EXPECT_EQ(testutil::ReadText(rx.out() + "/0.body"), body);
  std::string sig = testutil::ReadText(rx.out() + "/0.sig");
  EXPECT_TRUE(HmacVerify(up.key, body, sig.substr(7)));
}

TEST(Outbox, DeliverDirectlyAndNoUrl) {
  testutil::TempDir dir;
  auto client = NewCurlHttpClient();
  Outbox box(dir / "outbox");
  testutil::Receiver rx(dir.path());
  ASSERT_TRUE(DeliverOrQueue(*client, Target(rx.url()), box, "5", "{}").ok());
  EXPECT_EQ(rx.Count(), 1);
  EXPECT_TRUE(box.List()->empty());
  ASSERT_TRUE(DeliverOrQueue(*client, Target(""), box, "6", "{}").ok());
  EXPECT_TRUE(box.List()->empty());
}

}  // namespace
}  // namespace pilot
