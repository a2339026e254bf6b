// `pilot-runner verify`: what the epilog re-checks in a fresh process, from
// the checkpoint files alone (plus the config and, with --expect, the run's
// results.json). Each failed check names the check and the file.
#include "runner/ckpt/verify.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "core/records/exit_codes.h"
#include "core/records/verify_report.h"
#include "runner/ckpt/checkpoint.h"
#include "runner/ckpt/safetensors.h"
#include "runner/train/format.h"
#include "runner/train/inputs.h"
#include "runner/train/session.h"

namespace pilot::runner {
namespace fs = std::filesystem;
namespace {

class Checker {
 public:
  explicit Checker(bool json) : json_(json) {}
  // Prints a failed check ("check: file: detail") and remembers the failure.
  void Fail(const std::string& check, const std::string& file, const std::string& detail) {
    failed_ = true;
    std::fprintf(stderr, "pilot: verify: %s: FAILED: %s: %s\n", check.c_str(), file.c_str(), detail.c_str());
  }
  void Pass(const std::string& check, const std::string& detail) {
    if (!json_) std::printf("pilot: verify: %s: ok (%s)\n", check.c_str(), detail.c_str());
  }
  bool failed() const { return failed_; }

 private:
  bool json_;
  bool failed_ = false;
};

void CheckManifest(const std::string& dir, VerifyReport* rep, Checker* ck) {
  Result<Manifest> man = ReadManifest(dir);
  if (!man.ok()) {
    rep->manifest_detail = man.status().Message();
    ck->Fail("manifest", dir + "/manifest.json", man.status().Message());
    return;
  }
  rep->manifest_ok = true;
  std::set<std::string> listed = {"manifest.json", "COMPLETE"};
  for (const ManifestFile& f : man->files) {
    listed.insert(f.name);
    const std::string path = dir + "/" + f.name;
    ++rep->files_checked;
    int64_t bytes = 0;
    std::string problem;
    // Sizes first: a file of the wrong size (a sparse file of terabytes) is
    // refused before a byte of it is read.
    struct stat sb {};
    if (::stat(path.c_str(), &sb) == 0 && S_ISREG(sb.st_mode) &&
        static_cast<int64_t>(sb.st_size) != f.bytes) {
      problem = std::to_string(static_cast<int64_t>(sb.st_size)) + " bytes, manifest says " +
                std::to_string(f.bytes);
      if (rep->manifest_ok) rep->manifest_detail = f.name + ": " + problem;
      rep->manifest_ok = false;
      ck->Fail("manifest", path, problem);
      continue;
    }
    Result<std::string> sha = Sha256File(path, &bytes);
    if (!sha.ok()) {
      problem = sha.status().code() == Code::kNotFound ? "missing" : sha.status().Message();
    } else if (bytes != f.bytes) {
      problem = std::to_string(bytes) + " bytes, manifest says " + std::to_string(f.bytes);
    } else if (*sha != f.sha256) {
      problem = "sha256 " + *sha + " does not match the manifest's " + f.sha256;
    }
    if (!problem.empty()) {
      if (rep->manifest_ok) rep->manifest_detail = f.name + ": " + problem;
      rep->manifest_ok = false;
      ck->Fail("manifest", path, problem);
    }
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (!listed.count(n)) {
      if (rep->manifest_ok) rep->manifest_detail = n + ": not listed in manifest.json";
      rep->manifest_ok = false;
      ck->Fail("manifest", e.path().string(), "not listed in manifest.json");
    }
  }
  if (rep->manifest_ok) ck->Pass("manifest", std::to_string(rep->files_checked) + " files, sha256 and size");
}

// Every parameter present in the model file and in each optimizer file, with
// matching shape and step.
void CheckCompleteness(const std::string& dir, const Model& model, const TrainState& ts,
                       const Optimizer& optim, VerifyReport* rep, Checker* ck) {
  const std::string model_file = dir + "/model.safetensors";
  Result<SafetensorsHeader> mh = ReadSafetensorsHeader(model_file);
  if (!mh.ok()) {
    ck->Fail("parameters", model_file, mh.status().Message());
    return;
  }
  std::vector<std::pair<std::string, SafetensorsHeader>> opt;
  for (const std::string& st : optim.StateNames()) {
    const std::string f = dir + "/" + OptimFileName(st);
    Result<SafetensorsHeader> h = ReadSafetensorsHeader(f);
    if (!h.ok()) {
      ck->Fail("optimizer state", f, h.status().Message());
      continue;
    }
    auto step = h->metadata.find("step");
    if (step == h->metadata.end() || step->second != std::to_string(ts.step)) {
      ck->Fail("optimizer state", f,
               "metadata step " + (step == h->metadata.end() ? std::string("missing") : step->second) +
                   ", state.json step " + std::to_string(ts.step));
      continue;
    }
    opt.emplace_back(f, std::move(h).value());
  }
  const bool all_files = opt.size() == optim.StateNames().size();
  for (const auto& [name, p] : model.Parameters()) {
    const SafetensorsEntry* e = mh->Find(name);
    if (!e || e->shape != p.sizes().vec()) {
      ck->Fail("parameters", model_file, name + (e ? ": shape differs from the model's" : ": missing"));
      continue;
    }
    ++rep->params;
    bool with_state = all_files;
    for (const auto& [file, h] : opt) {
      const SafetensorsEntry* o = h.Find(name);
      if (!o || o->shape != p.sizes().vec()) {
        ck->Fail("optimizer state", file, name + (o ? ": shape differs from the parameter's" : ": missing"));
        with_state = false;
      }
    }
    if (with_state) ++rep->params_with_optimizer_state;
  }
  if (mh->entries.size() != model.Parameters().size()) {
    ck->Fail("parameters", model_file, std::to_string(mh->entries.size()) + " tensors, the model has " +
                                           std::to_string(model.Parameters().size()));
  }
  if (rep->params_with_optimizer_state == static_cast<int64_t>(model.Parameters().size())) {
    ck->Pass("parameters", std::to_string(rep->params) + " tensors, each with its optimizer state at step " +
                               std::to_string(ts.step));
  }
}

}  // namespace

int RunVerify(const VerifyOptions& o) {
  VerifyReport rep;
  rep.checkpoint = o.checkpoint;
  Checker ck(o.json);
  auto finish = [&](int code) {
    const std::string json = VerifyReportToJson(rep);
    if (o.json) std::printf("%s", json.c_str());
    if (!o.out.empty()) {
      Status w = WriteFileAtomic(o.out, json, 0644);
      if (!w.ok()) {
        std::fprintf(stderr, "%s\n", w.ToString().c_str());
        return static_cast<int>(kExitUsage);
      }
    }
    return code;
  };
  auto input_error = [&](const Status& s) {
    rep.error = s.Message();
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return finish(kExitUsage);
  };
  if (!fs::is_directory(o.checkpoint)) {
    return input_error(Status::NotFound(o.checkpoint, "no such checkpoint directory"));
  }
  Config cfg;
  Pins pins;
  Status in = LoadInputs(o.config, "", o.sets, &cfg, &pins);
  if (!in.ok()) return input_error(in);

  rep.complete_marker = fs::exists(o.checkpoint + "/COMPLETE");
  if (!rep.complete_marker) {
    ck.Fail("complete", o.checkpoint + "/COMPLETE", "missing: the checkpoint was never committed");
  }
  CheckManifest(o.checkpoint, &rep, &ck);
  Result<TrainState> ts = ReadTrainState(o.checkpoint);
  if (!ts.ok()) {
    ck.Fail("state", o.checkpoint + "/state.json", ts.status().Message());
    rep.ran = true;
    return finish(kExitFailed);
  }
  rep.step = ts->step;
  if (ts->config_sha256 != cfg.sha256) {
    ck.Fail("config", o.config, "sha256 differs from the one recorded in state.json");
  }
  pins.seed = ts->seed;
  cfg.training.optimizer = ts->optimizer;
  if (Status depth = ApplySavedDepth(*ts, o.checkpoint, &cfg); !depth.ok()) {
    ck.Fail("state", o.checkpoint + "/state.json", depth.detail());
    rep.ran = true;
    return finish(kExitFailed);
  }
  Result<std::unique_ptr<Session>> made = Session::Create(cfg, pins);
  if (!made.ok()) return input_error(made.status());
  Session& s = **made;
  CheckCompleteness(o.checkpoint, s.model(), *ts, s.optim(), &rep, &ck);

  // Weights into the freshly built model, eval recomputed.
  std::map<std::string, at::Tensor> dst;
  for (const auto& [name, p] : s.model().Parameters()) dst.emplace(name, p);
  const std::string model_file = o.checkpoint + "/model.safetensors";
  Result<FileDigest> loaded = [&]() -> Result<FileDigest> {
    c10::NoGradGuard no_grad;
    return LoadSafetensors(model_file, dst);
  }();
  rep.eval_tolerance = cfg.eval.restore_tolerance;
  rep.eval_loss_recorded = ts->eval.loss;
  if (!loaded.ok()) {
    ck.Fail("eval", model_file, "weights not loaded: " + loaded.status().Message());
  } else {
    Result<double> ev = s.Eval();
    if (!ev.ok()) return input_error(ev.status());
    rep.eval_recomputed = true;
    rep.eval_loss_recomputed = *ev;
    rep.eval_rel_diff = RelDiff(*ev, ts->eval.loss);
    rep.eval_within = rep.eval_rel_diff <= rep.eval_tolerance;
    char detail[160];
    std::snprintf(detail, sizeof(detail), "recomputed %.6f, recorded %.6f, rel diff %.3g, tolerance %.3g",
                  *ev, ts->eval.loss, rep.eval_rel_diff, rep.eval_tolerance);
    if (rep.eval_within) {
      ck.Pass("eval", detail);
    } else {
      ck.Fail("eval", o.checkpoint + "/state.json", detail);
    }
  }
  if (!o.expect.empty()) {
    Result<Results> r = ReadResultsFile(o.expect);
    if (!r.ok()) return input_error(r.status());
    if (!r->single) {
      ck.Fail("expect", o.expect, "no single-stage results");
    } else {
      const SingleStage& st = *r->single;
      std::error_code ec;
      if (st.checkpoint.step != ts->step || !fs::equivalent(st.checkpoint.path, o.checkpoint, ec)) {
        ck.Fail("expect", o.expect, "names checkpoint " + st.checkpoint.path + " step " +
                                        std::to_string(st.checkpoint.step) + ", not this one");
      } else if (RelDiff(st.eval.loss_at_checkpoint, ts->eval.loss) > rep.eval_tolerance) {
        rep.eval_within = false;
        ck.Fail("expect", o.expect, "eval.loss_at_checkpoint differs from the checkpoint's state.json");
      } else {
        ck.Pass("expect", "results.json agrees with the checkpoint");
      }
    }
  }
  rep.ran = true;
  const bool ok = !ck.failed() && rep.complete_marker && rep.manifest_ok && rep.eval_within &&
                  rep.params > 0 && rep.params_with_optimizer_state == rep.params;
  if (!o.json) std::printf("pilot: verify: %s\n", ok ? "VERIFIED" : "FAILED");
  return finish(ok ? kExitOk : kExitFailed);
}

}  // namespace pilot::runner
