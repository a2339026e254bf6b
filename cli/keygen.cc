// pilot keygen [--force]: create the verdict signing key (root only).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cli/options.h"
#include "cli/verdict_store.h"
#include "core/atomic_file.h"
#include "core/crypto.h"

namespace pilot::cli {

int RunKeygen(const Invocation& inv) {
  CommandLine cl("pilot keygen [--force] [--policy FILE]",
                 "Create the HMAC-SHA256 key that signs verdicts, at the policy's key_file,\n"
                 "mode 0600, owned by the caller (run it as root). An existing key is kept\n"
                 "unless --force: replacing it makes every stored verdict unverifiable.");
  cl.options.add_options()
      ("force", po::bool_switch(), "replace an existing key")
      ("policy", po::value<std::string>()->default_value(""),
       "site policy (default: $PILOT_POLICY, else the installed pilot.conf)");
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  Result<Policy> policy = LoadCliPolicy(vm["policy"].as<std::string>());
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  const std::string& path = policy->key_file;
  struct stat sb {};
  if (stat(path.c_str(), &sb) == 0 && !vm["force"].as<bool>()) {
    inv.err << Status::Invalid(path, "a key exists already")
                   .WithHint("keep it, or pass --force to replace it (stored verdicts then "
                             "fail their signature check)")
                   .ToString()
            << "\n";
    return kExitNo;
  }
  if (geteuid() != 0) {
    inv.err << "pilot: keygen: warning: not root; the key will belong to uid " << geteuid()
            << "\n";
  }
  const std::string dir = DirName(path);
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    inv.err << Status::IoError(dir, std::strerror(errno)).ToString() << "\n";
    return kExitNo;
  }
  Result<std::string> contents = NewKeyFileContents();
  if (!contents.ok()) {
    inv.err << contents.status().ToString() << "\n";
    return kExitInternal;
  }
  if (Status s = WriteFileAtomic(path, *contents, 0600); !s.ok()) {
    inv.err << s.ToString() << "\n";
    return kExitNo;
  }
  Result<std::string> key = ReadKeyFile(path);
  if (!key.ok()) {
    inv.err << key.status().ToString() << "\n";
    return kExitNo;
  }
  inv.out << "pilot: keygen: wrote " << path << " (key id " << KeyId(*key) << ")\n";
  return kExitOk;
}

}  // namespace pilot::cli
