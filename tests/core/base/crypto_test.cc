#include "core/base/crypto.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "tests/core/net_test_util.h"

namespace pilot {
namespace {

using testutil::TempDir;
using testutil::WriteText;

std::string Unhex(const std::string& h) { return HexDecode(h).value(); }

struct ShaCase {
  std::string input;
  std::string digest;
};

// FIPS 180-2 / NIST CAVS examples.
TEST(Sha256, NistVectors) {
  const ShaCase cases[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Sha256Hex(c.input), c.digest) << c.input.substr(0, 20);
  }
}

TEST(Sha256, FileStreamsAcrossChunks) {
  TempDir dir;
  // 2.5 MiB: more than two 1 MiB read chunks.
  std::string data(5 << 19, 'a');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 23);
  WriteText(dir / "f", data);
  int64_t bytes = 0;
  auto h = Sha256File(dir / "f", &bytes);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(*h, Sha256Hex(data));
  EXPECT_EQ(bytes, static_cast<int64_t>(data.size()));

  WriteText(dir / "empty", "");
  EXPECT_EQ(Sha256File(dir / "empty").value(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, DescriptorFromWhereItStands) {
  TempDir dir;
  std::string data(3 << 19, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
  WriteText(dir / "f", data);
  const int fd = ::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  int64_t bytes = 0;
  auto h = Sha256Fd(fd, "f", &bytes);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(*h, Sha256Hex(data));
  EXPECT_EQ(bytes, static_cast<int64_t>(data.size()));
  // At its end now: what is left is nothing.
  EXPECT_EQ(Sha256Fd(fd, "f").value(), Sha256Hex(""));
  ::close(fd);
  EXPECT_EQ(Sha256Fd(fd, "f").status().code(), Code::kIoError);
}

TEST(Sha256, FileErrors) {
  TempDir dir;
  auto missing = Sha256File(dir / "nope");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().ToString(), "pilot: " + (dir / "nope") + ": no such file");
  auto d = Sha256File(dir.path());
  EXPECT_EQ(d.status().code(), Code::kIoError);
  EXPECT_EQ(d.status().ToString(), "pilot: " + dir.path() + ": is a directory");
  // A FIFO named as a data file must not hang the prolog.
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(Sha256File(dir / "fifo").status().ToString(),
            "pilot: " + (dir / "fifo") + ": not a regular file");
}

struct HmacCase {
  const char* name;
  std::string key;
  std::string data;
  std::string mac;  // may be truncated (test case 5)
};

// Every HMAC-SHA256 test case of RFC 4231 (section 4).
TEST(Hmac, Rfc4231) {
  const std::string key131(131, '\xaa');
  const HmacCase cases[] = {
      {"1", std::string(20, '\x0b'), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {"2", "Jefe", "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {"3", std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {"4", Unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"), std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {"5", std::string(20, '\x0c'), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b"},
      {"6", key131, "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {"7", key131,
       "This is a test using a larger than block-size key and a larger than block-size data. "
       "The key needs to be hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (const auto& c : cases) {
    std::string mac = HmacSha256Hex(c.key, c.data);
    EXPECT_EQ(mac.substr(0, c.mac.size()), c.mac) << "RFC 4231 test case " << c.name;
    EXPECT_TRUE(HmacVerify(c.key, c.data, mac)) << c.name;
  }
}

TEST(Hmac, VerifyRejectsChanges) {
  std::string mac = HmacSha256Hex("key", "body");
  EXPECT_TRUE(HmacVerify("key", "body", mac));
  std::string upper = mac;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_TRUE(HmacVerify("key", "body", upper));
  EXPECT_FALSE(HmacVerify("key", "Body", mac));
  EXPECT_FALSE(HmacVerify("kez", "body", mac));
  EXPECT_FALSE(HmacVerify("key", "body", mac.substr(0, 63)));
  EXPECT_FALSE(HmacVerify("key", "body", ""));
  std::string flipped = mac;
  flipped[63] = flipped[63] == '0' ? '1' : '0';
  EXPECT_FALSE(HmacVerify("key", "body", flipped));
}

TEST(Hex, RoundTripAndErrors) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  EXPECT_EQ(HexDecode(HexEncode(all)).value(), all);
  EXPECT_EQ(HexEncode("\x01\xab"), "01ab");
  EXPECT_EQ(HexDecode("ABcd").value(), "\xab\xcd");
  EXPECT_EQ(HexDecode("abc").status().ToString(), "pilot: hex: odd number of digits");
  EXPECT_EQ(HexDecode("zz").status().ToString(), "pilot: hex: not a hex digit at offset 0");
  EXPECT_TRUE(IsSha256Hex(Sha256Hex("x")));
  EXPECT_FALSE(IsSha256Hex(std::string(64, 'A')));
  EXPECT_FALSE(IsSha256Hex(std::string(63, 'a')));
}

TEST(Random, BytesDifferAndHaveLength) {
  auto a = RandomBytes(32);
  auto b = RandomBytes(32);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), 32u);
  EXPECT_NE(*a, *b);
  EXPECT_EQ(RandomBytes(0).value(), "");
}

TEST(KeyFile, NewReadAndPermissions) {
  TempDir dir;
  auto contents = NewKeyFileContents();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->size(), 65u);
  const std::string path = dir / "verdict.key";
  WriteText(path, *contents);
  ::chmod(path.c_str(), 0600);
  auto key = ReadKeyFile(path);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(HexEncode(*key) + "\n", *contents);
  EXPECT_EQ(KeyId(*key), Sha256Hex(*key).substr(0, 16));

  ::chmod(path.c_str(), 0640);
  auto open = ReadKeyFile(path);
  EXPECT_EQ(open.status().code(), Code::kPermission);
  EXPECT_EQ(
      open.status().ToString(),
      "pilot: " + path + ": signing key is accessible to group or others\nHINT: chmod 600 " + path);

  WriteText(path, "abcd\n");
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(ReadKeyFile(path).status().ToString(),
            "pilot: " + path + ": signing key must be 64 hex characters");
  EXPECT_EQ(ReadKeyFile(dir / "none").status().code(), Code::kNotFound);
}

// RFC 8032, section 7.1, TEST 1 and TEST 2.
TEST(Ed25519, Rfc8032Vectors) {
  struct Case {
    std::string seed, public_key, message, signature;
  };
  const Case cases[] = {
      {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
       "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
       "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e3970"
       "1cf9b46bd25bf5f0595bbe24655141438e7a100b"},
      {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
       "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "\x72",
       "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613"
       "d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
  };
  for (const Case& c : cases) {
    const std::string seed = Unhex(c.seed);
    EXPECT_EQ(HexEncode(Ed25519PublicKeyOf(seed).value()), c.public_key);
    auto sig = Ed25519SignHex(seed, c.message);
    ASSERT_TRUE(sig.ok()) << sig.status().ToString();
    EXPECT_EQ(*sig, c.signature);
    EXPECT_TRUE(Ed25519Verify(Unhex(c.public_key), c.message, c.signature));
  }
}

TEST(Ed25519, VerifyRejectsChangesAndOtherKeys) {
  const std::string seed = RandomBytes(32).value();
  const std::string pub = Ed25519PublicKeyOf(seed).value();
  const std::string other = Ed25519PublicKeyOf(RandomBytes(32).value()).value();
  const std::string sig = Ed25519SignHex(seed, "body").value();
  ASSERT_EQ(sig.size(), 128u);
  EXPECT_TRUE(Ed25519Verify(pub, "body", sig));
  std::string upper = sig;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_TRUE(Ed25519Verify(pub, "body", upper));
  EXPECT_FALSE(Ed25519Verify(pub, "Body", sig));
  EXPECT_FALSE(Ed25519Verify(other, "body", sig));
  std::string flipped = sig;
  flipped[10] = flipped[10] == '0' ? '1' : '0';
  EXPECT_FALSE(Ed25519Verify(pub, "body", flipped));
  EXPECT_FALSE(Ed25519Verify(pub, "body", sig.substr(0, 126)));
  EXPECT_FALSE(Ed25519Verify(pub, "body", std::string(128, 'z')));
  EXPECT_FALSE(Ed25519Verify(pub.substr(0, 31), "body", sig));
  EXPECT_EQ(Ed25519SignHex("short", "body").status().code(), Code::kInvalid);
}

TEST(Ed25519KeyFile, NewReadAndPermissions) {
  TempDir dir;
  auto files = NewEd25519KeyFiles();
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->private_pem.rfind("-----BEGIN PRIVATE KEY-----\n", 0), 0u);
  EXPECT_EQ(files->public_pem.rfind("-----BEGIN PUBLIC KEY-----\n", 0), 0u);
  const std::string priv = dir / "ed.key", pub = dir / "ed.pub";
  WriteText(priv, files->private_pem);
  WriteText(pub, files->public_pem);
  ::chmod(priv.c_str(), 0600);
  ::chmod(pub.c_str(), 0644);
  auto seed = ReadEd25519PrivateKeyFile(priv);
  ASSERT_TRUE(seed.ok()) << seed.status().ToString();
  auto raw = ReadEd25519PublicKeyFile(pub);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(*raw, files->public_key);
  EXPECT_EQ(Ed25519PublicKeyOf(*seed).value(), *raw);
  // The same pair written again from its private key.
  EXPECT_EQ(Ed25519KeyFilesOf(*seed).value().public_pem, files->public_pem);
  EXPECT_TRUE(Ed25519Verify(*raw, "x", Ed25519SignHex(*seed, "x").value()));

  for (mode_t open : {0640, 0604, 0620}) {
    ::chmod(priv.c_str(), open);
    Status s = ReadEd25519PrivateKeyFile(priv).status();
    EXPECT_EQ(s.code(), Code::kPermission) << std::oct << open;
    EXPECT_EQ(s.ToString(), "pilot: " + priv +
                                ": Ed25519 signing key is accessible to group or others\n"
                                "HINT: chmod 600 " + priv);
  }
  ::chmod(priv.c_str(), 0400);
  EXPECT_TRUE(ReadEd25519PrivateKeyFile(priv).ok());
  ::chmod(pub.c_str(), 0666);
  EXPECT_EQ(ReadEd25519PublicKeyFile(pub).status().ToString(),
            "pilot: " + pub + ": Ed25519 public key is writable by others\nHINT: chmod 644 " + pub);
  ::chmod(pub.c_str(), 0664);
  EXPECT_TRUE(ReadEd25519PublicKeyFile(pub).ok());

  // The wrong kind of file: a public key as private, an HMAC key, garbage.
  const std::string wrong = dir / "wrong";
  for (const std::string& text : {files->public_pem, NewKeyFileContents().value(),
                                  std::string("-----BEGIN PRIVATE KEY-----\nAAAA\n")}) {
    WriteText(wrong, text);
    ::chmod(wrong.c_str(), 0600);
    EXPECT_EQ(ReadEd25519PrivateKeyFile(wrong).status().code(), Code::kCorrupt) << text;
  }
  WriteText(wrong, files->private_pem);
  EXPECT_EQ(ReadEd25519PublicKeyFile(wrong).status().code(), Code::kCorrupt);
  Status missing = ReadEd25519PrivateKeyFile(dir / "none").status();
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_EQ(missing.hint(), "create it as root with 'pilot keygen'");
  EXPECT_EQ(ReadEd25519PublicKeyFile(dir.path()).status().code(), Code::kIoError);
}

}  // namespace
}  // namespace pilot
