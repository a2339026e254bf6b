#include "cli/verdict_store.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/base/crypto.h"
#include "core/base/rfc3339.h"
#include "job/env_names.h"
#include "job/state_layout.h"

namespace pilot::cli {

Result<Policy> LoadCliPolicy(const std::string& flag_value) {
  if (!flag_value.empty()) return LoadPolicy(flag_value);
  if (const char* env = std::getenv(job::kUserPolicy); env != nullptr && *env != '\0') {
    return LoadPolicy(env);
  }
  return LoadPolicy(DefaultPolicyPath(), /*missing_ok=*/true);
}

std::optional<int> OpenStore(const Invocation& inv, const std::string& policy_flag, Store* out) {
  Result<Policy> policy = LoadCliPolicy(policy_flag);
  if (!policy.ok()) {
    inv.err << policy.status().ToString() << "\n";
    return kExitUsage;
  }
  out->policy = std::move(policy).value();
  Result<std::vector<StoredVerdict>> verdicts = ListStoredVerdicts(out->policy.state_dir, &out->skipped);
  if (!verdicts.ok()) {
    inv.err << verdicts.status().ToString() << "\n";
    return kExitNo;
  }
  out->verdicts = std::move(verdicts).value();
  return std::nullopt;
}

Result<std::vector<StoredVerdict>> ListStoredVerdicts(const std::string& state_dir,
                                                      std::vector<std::string>* skipped) {
  namespace fs = std::filesystem;
  std::vector<StoredVerdict> out;
  const fs::path dir = job::StateLayout(state_dir).VerdictsDir();
  std::error_code ec;
  if (!fs::exists(dir, ec)) return out;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::IoError(dir.string(), ec.message());
  for (const fs::directory_entry& e : it) {
    const std::optional<int64_t> job_id =
        job::StateLayout::JobOfVerdictFile(e.path().filename().string());
    if (!job_id) continue;
    Result<Verdict> v = ReadVerdict(e.path().string());
    if (!v.ok()) {
      if (skipped != nullptr) skipped->push_back(v.status().Message());
      continue;
    }
    out.push_back({*job_id, e.path().string(), std::move(v).value()});
  }
  std::sort(out.begin(), out.end(),
            [](const StoredVerdict& a, const StoredVerdict& b) { return a.job_id < b.job_id; });
  return out;
}

Result<std::vector<StoredVerdict>> ListVerdictHistory(const std::string& state_dir, int64_t job_id,
                                                      std::vector<std::string>* skipped) {
  namespace fs = std::filesystem;
  std::vector<StoredVerdict> out;
  const fs::path dir = job::StateLayout(state_dir).VerdictHistoryDir();
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return out;
  fs::directory_iterator it(dir, ec);
  if (ec) return Status::IoError(dir.string(), ec.message());
  for (const fs::directory_entry& e : it) {
    if (job::StateLayout::JobOfHistoryFile(e.path().filename().string()) != job_id) continue;
    Result<Verdict> v = ReadVerdict(e.path().string());
    if (!v.ok()) {
      if (skipped != nullptr) skipped->push_back(v.status().Message());
      continue;
    }
    out.push_back({job_id, e.path().string(), std::move(v).value()});
  }
  auto issued = [](const StoredVerdict& sv) {
    Result<int64_t> t = ParseRfc3339(sv.verdict.issued);
    return t.ok() ? *t : int64_t{0};
  };
  std::sort(out.begin(), out.end(), [&](const StoredVerdict& a, const StoredVerdict& b) {
    const int64_t ta = issued(a), tb = issued(b);
    return ta != tb ? ta < tb : a.path < b.path;
  });
  return out;
}

bool SignatureCheck::Bad() const {
  if (ed25519 == "invalid" || hmac == "invalid") return true;
  if (ed25519 == "valid" || hmac == "valid") return false;
  return (ed25519 == "unsigned" && hmac == "unsigned") || root;
}

std::string SignatureCheck::Summary(const Verdict& v) const {
  if (ed25519 == "invalid") return "signature INVALID: " + ed25519_detail;
  if (hmac == "invalid") return "signature INVALID: " + hmac_detail;
  if (ed25519 == "valid" || hmac == "valid") return "signature valid";
  if (ed25519 == "unsigned" && hmac == "unsigned") return "UNSIGNED";
  if (ed25519 == "unchecked") {
    return "signed with ed25519 key " + v.public_key_id + ", cannot check: " + ed25519_detail;
  }
  if (root) return "signed with key " + v.key_id + ", cannot check: " + hmac_detail;
  return "signed with key " + v.key_id + " (only root can check the signature)";
}

namespace {

std::string Line(const std::string& state, const std::string& detail, const std::string& what) {
  if (state == "valid") return "valid (" + what + ")";
  if (state == "invalid") return "INVALID (" + what + "): " + detail;
  if (state == "unchecked") return "not checked (" + what + "): " + detail;
  return "unsigned";
}

}  // namespace

std::string SignatureCheck::Ed25519Line(const Verdict& v) const {
  return ed25519 == "unsigned" ? "unsigned (no ed25519 signature)"
                               : Line(ed25519, ed25519_detail, "ed25519, key " + v.public_key_id);
}

std::string SignatureCheck::HmacLine(const Verdict& v) const {
  return Line(hmac, hmac_detail, "hmac-sha256, key " + v.key_id);
}

Json SignatureCheck::ToJson() const {
  return Json{{"ed25519", ed25519},
              {"ed25519_detail", ed25519_detail},
              {"hmac", hmac},
              {"hmac_detail", hmac_detail}};
}

SignatureCheck CheckSignatures(const Verdict& v, const Policy& policy) {
  SignatureCheck c;
  c.root = getuid() == 0;
  if (!v.signature_ed25519.empty()) {
    Result<std::string> pub = ReadEd25519PublicKeyFile(policy.public_key_file);
    if (!pub.ok()) {
      c.ed25519 = "unchecked";
      c.ed25519_detail = pub.status().Message();
    } else if (Status s = VerifyVerdictEd25519(v, *pub); !s.ok()) {
      c.ed25519 = "invalid";
      c.ed25519_detail = s.detail();
    } else {
      c.ed25519 = "valid";
    }
  }
  if (!v.signature.empty()) {
    Result<std::string> key = ReadKeyFile(policy.key_file);
    if (!key.ok()) {
      c.hmac = "unchecked";
      c.hmac_detail = c.root || key.status().code() != Code::kPermission
                          ? key.status().Message()
                          : "only root can read " + policy.key_file;
    } else if (Status s = VerifyVerdictHmac(v, *key); !s.ok()) {
      c.hmac = "invalid";
      c.hmac_detail = s.detail();
    } else {
      c.hmac = "valid";
    }
  }
  return c;
}

std::string CallerName() {
  if (struct passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return std::to_string(getuid());
}

}  // namespace pilot::cli
