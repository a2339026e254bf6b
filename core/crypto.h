// Hashing and signing: SHA-256 of bytes and files, HMAC-SHA256, hex, random
// bytes and the verdict signing key file.
//
// All functions are thread-safe (OpenSSL 3 EVP/HMAC are reentrant) and keep
// no state between calls.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace pilot {

// Lower-case hex of `bytes` (two characters per byte).
std::string HexEncode(std::string_view bytes);
// Inverse of HexEncode; accepts upper and lower case. Errors: kInvalid for an
// odd length or a non-hex character.
Result<std::string> HexDecode(std::string_view hex);
// True when `s` is exactly 64 lower-case hex characters (a sha256 digest).
bool IsSha256Hex(std::string_view s);

// SHA-256 of `data` as 64 lower-case hex characters.
std::string Sha256Hex(std::string_view data);

// SHA-256 of a file's contents, read in 1 MiB chunks (constant memory).
// Errors: kNotFound (no such file), kIoError (cannot open or read; also
// anything but a regular file: directory, FIFO, device). If `bytes_read` is non-null it receives
// the file size hashed.
Result<std::string> Sha256File(const std::string& path, int64_t* bytes_read = nullptr);

// HMAC-SHA256(key, data) as 64 lower-case hex characters (RFC 2104).
std::string HmacSha256Hex(std::string_view key, std::string_view data);

// True when `signature_hex` (case-insensitive) equals HMAC-SHA256(key, data).
// The comparison takes the same time wherever the first difference is.
bool HmacVerify(std::string_view key, std::string_view data, std::string_view signature_hex);

// Compares two byte strings in time that depends only on their lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// `n` bytes from the operating system's CSPRNG. Errors: kInternal when the
// generator fails (it does not on a healthy system).
Result<std::string> RandomBytes(size_t n);

// ---- Signing key file -------------------------------------------------------
// The verdict key file holds 64 hex characters (32 random bytes) and an
// optional trailing newline. It must be a regular file, not readable or
// writable by group or others (mode 0600 or 0400).

// Bytes of a new key file (hex + "\n"), from RandomBytes(32).
Result<std::string> NewKeyFileContents();
// Reads and checks a key file; returns the raw key bytes (32 bytes).
// Errors: kNotFound, kIoError, kPermission (group/other may read or write),
// kCorrupt (not 64 hex characters).
Result<std::string> ReadKeyFile(const std::string& path);
// A short public name of a key: the first 16 hex characters of SHA-256 of
// the raw key bytes. Recorded in verdicts so a rotated key is recognised.
std::string KeyId(std::string_view key);

}  // namespace pilot
