// pilot keygen [--force | --if-missing]: create the verdict signing keys
// (root only): the HMAC key and the Ed25519 pair.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/base/atomic_file.h"
#include "core/base/crypto.h"

namespace pilot::cli {
namespace {

bool Exists(const std::string& path) {
  struct stat sb {};
  return stat(path.c_str(), &sb) == 0;
}

// Makes the folder of `path` (0755) when missing.
Status MakeParent(const std::string& path) {
  const std::string dir = DirName(path);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::IoError(dir, std::strerror(errno));
  }
  return Status::Ok();
}

// The HMAC key: kept when it exists (unless force), else written 0600.
Status HmacKey(const Invocation& inv, const std::string& path, bool force) {
  if (Exists(path) && !force) {
    PILOT_ASSIGN_OR_RETURN(std::string key, ReadKeyFile(path));
    inv.out << "pilot: keygen: kept " << path << " (key id " << KeyId(key) << ")\n";
    return Status::Ok();
  }
  PILOT_RETURN_IF_ERROR(MakeParent(path));
  PILOT_ASSIGN_OR_RETURN(std::string contents, NewKeyFileContents());
  PILOT_RETURN_IF_ERROR(WriteFileAtomic(path, contents, 0600));
  PILOT_ASSIGN_OR_RETURN(std::string key, ReadKeyFile(path));
  inv.out << "pilot: keygen: wrote " << path << " (key id " << KeyId(key) << ")\n";
  return Status::Ok();
}

// The Ed25519 pair: an existing private key is kept (unless force) and its
// public key written again from it, so the two always match.
Status Ed25519Pair(const Invocation& inv, const std::string& private_path,
                   const std::string& public_path, bool force) {
  const bool keep = Exists(private_path) && !force;
  Ed25519KeyFiles files;
  if (keep) {
    PILOT_ASSIGN_OR_RETURN(std::string seed, ReadEd25519PrivateKeyFile(private_path));
    PILOT_ASSIGN_OR_RETURN(files, Ed25519KeyFilesOf(seed));
  } else {
    PILOT_ASSIGN_OR_RETURN(files, NewEd25519KeyFiles());
    PILOT_RETURN_IF_ERROR(MakeParent(private_path));
    PILOT_RETURN_IF_ERROR(WriteFileAtomic(private_path, files.private_pem, 0600));
  }
  PILOT_RETURN_IF_ERROR(MakeParent(public_path));
  PILOT_RETURN_IF_ERROR(WriteFileAtomic(public_path, files.public_pem, 0644));
  PILOT_ASSIGN_OR_RETURN(std::string check, ReadEd25519PublicKeyFile(public_path));
  if (check != files.public_key) {
    return Status::Internal(public_path, "the public key read back differs from the one written");
  }
  const std::string id = KeyId(files.public_key);
  inv.out << "pilot: keygen: " << (keep ? "kept " : "wrote ") << private_path << " (ed25519, key id "
          << id << ")\n"
          << "pilot: keygen: wrote " << public_path << " (ed25519 public key, key id " << id
          << ")\n";
  return Status::Ok();
}

}  // namespace

int RunKeygen(const Invocation& inv) {
  CommandLine cl("pilot keygen [--force | --if-missing] [--policy FILE]",
                 "Create the keys that sign verdicts, owned by the caller (run it as root):\n"
                 "the HMAC-SHA256 key at the policy's key_file (mode 0600) and the Ed25519\n"
                 "pair at signing_key_file (private, 0600) and public_key_file (public, 0644).\n"
                 "An existing key is kept unless --force (the public key is written again from\n"
                 "its private key): replacing one makes the stored verdicts' signatures by it\n"
                 "unverifiable. --if-missing succeeds without a change when every key exists\n"
                 "(a package's installation runs it at every upgrade).");
  cl.options.add_options()
      ("force", po::bool_switch(), "replace existing keys")
      ("if-missing", po::bool_switch(), "exit 0, changing nothing, when every key exists")
      ("policy", PolicyValue(), PolicyHelp().c_str());
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  Result<Policy> policy = LoadCliPolicy(vm["policy"].as<std::string>());
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  const bool force = vm["force"].as<bool>();
  const bool if_missing = vm["if-missing"].as<bool>();
  if (force && if_missing) {
    inv.err << "pilot: keygen: --force and --if-missing: choose one\n";
    return kExitUsage;
  }
  if (!force && Exists(policy->key_file) && Exists(policy->signing_key_file) &&
      Exists(policy->public_key_file)) {
    if (if_missing) {
      inv.out << "pilot: keygen: kept " << policy->key_file << ", " << policy->signing_key_file
              << " and " << policy->public_key_file << "\n";
      return kExitOk;
    }
    inv.err << Status::Invalid(policy->key_file + ", " + policy->signing_key_file,
                               "the keys exist already")
                   .WithHint("keep them, or pass --force to replace them (stored verdicts then "
                             "fail their signature checks)")
                   .ToString()
            << "\n";
    return kExitNo;
  }
  if (geteuid() != 0) {
    inv.err << "pilot: keygen: warning: not root; the keys will belong to uid " << geteuid()
            << "\n";
  }
  Status s = HmacKey(inv, policy->key_file, force);
  if (s.ok() && (policy->signing_key_file.empty() || policy->public_key_file.empty())) {
    inv.err << "pilot: keygen: signing_key_file or public_key_file is empty: no Ed25519 pair\n";
  } else if (s.ok()) {
    s = Ed25519Pair(inv, policy->signing_key_file, policy->public_key_file, force);
  }
  if (!s.ok()) {
    inv.err << s.ToString() << "\n";
    return s.code() == Code::kInternal ? kExitInternal : kExitNo;
  }
  return kExitOk;
}

}  // namespace pilot::cli
