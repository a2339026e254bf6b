// Hashing and signing: SHA-256 of bytes and files, HMAC-SHA256, hex, random
// bytes, the verdict signing key file, and Ed25519 (RFC 8032) signatures
// with their key files.
//
// All functions are thread-safe (OpenSSL 3 EVP/HMAC are reentrant) and keep
// no state between calls.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/base/status.h"

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

// SHA-256 of what is left to read from the open descriptor `fd` (read in
// 1 MiB chunks, constant memory; the descriptor is left open, at its end).
// For callers that opened the file themselves (beneath a directory, without
// following links). `label` names the file in errors. Errors: kIoError
// (read failed). If `bytes_read` is non-null it receives the bytes hashed.
Result<std::string> Sha256Fd(int fd, const std::string& label, int64_t* bytes_read = nullptr);

// Git's object name of a blob: SHA-1 of "blob <size>\0" and the `size`
// bytes left to read from `fd`, as 40 lower-case hex characters. Errors:
// kIoError (read failed, or the file holds other than `size` bytes).
Result<std::string> GitBlobSha1Fd(int fd, int64_t size, const std::string& label);

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
// For an Ed25519 key pair it is taken of the raw 32-byte public key.
std::string KeyId(std::string_view key);

// ---- Ed25519 ------------------------------------------------------------------
// Keys travel as raw bytes: a private key is its 32-byte seed, a public key
// its 32-byte encoding (RFC 8032). Signatures are 64 bytes, written as 128
// lower-case hex characters.
//
// Key files are PEM, as `openssl pkey` reads and writes them: the private
// key as PKCS#8 ("-----BEGIN PRIVATE KEY-----", unencrypted), a regular file
// not readable or writable by group or others (mode 0600 or 0400); the
// public key as SubjectPublicKeyInfo ("-----BEGIN PUBLIC KEY-----"), meant to
// be world-readable (mode 0644) but not writable by others.

inline constexpr size_t kEd25519KeyBytes = 32;

// The contents of a new key pair's two files, from RandomBytes(32).
struct Ed25519KeyFiles {
  std::string private_pem;
  std::string public_pem;
  std::string public_key;  // raw, for KeyId()
};
Result<Ed25519KeyFiles> NewEd25519KeyFiles();
// The two files of the pair whose private key (seed) is `private_key`.
// Errors: kInvalid (not 32 bytes), kInternal (OpenSSL failed).
Result<Ed25519KeyFiles> Ed25519KeyFilesOf(std::string_view private_key);

// Reads and checks a private key file; returns the raw 32-byte seed.
// Errors: kNotFound (with a hint to run `pilot keygen`), kIoError,
// kPermission (group/other may read or write), kCorrupt (not an unencrypted
// Ed25519 private key in PEM).
Result<std::string> ReadEd25519PrivateKeyFile(const std::string& path);
// Reads and checks a public key file; returns the raw 32-byte public key.
// Errors: kNotFound, kIoError, kPermission (others may write it: anyone
// could replace it), kCorrupt (not an Ed25519 public key in PEM).
Result<std::string> ReadEd25519PublicKeyFile(const std::string& path);

// The public key of a private key (seed). Errors: kInvalid (not 32 bytes).
Result<std::string> Ed25519PublicKeyOf(std::string_view private_key);
// The Ed25519 signature of `data` as 128 hex characters. Errors: kInvalid
// (a key not of 32 bytes), kInternal (OpenSSL failed).
Result<std::string> Ed25519SignHex(std::string_view private_key, std::string_view data);
// True when `signature_hex` (case-insensitive) is a valid Ed25519 signature
// of `data` under `public_key`; false for anything malformed.
bool Ed25519Verify(std::string_view public_key, std::string_view data,
                   std::string_view signature_hex);

}  // namespace pilot
