// `pilot-runner run`: the stages in order, results.json at the end.
#include "runner/app/pilot.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/base/atomic_file.h"
#include "core/records/exit_codes.h"
#include "core/records/results.h"
#include "pilot/version.h"
#include "runner/node/stage.h"
#include "runner/train/device.h"
#include "runner/train/format.h"
#include "runner/train/inputs.h"
#include "runner/workload/report.h"
#include "runner/workload/workload.h"

namespace pilot::runner {
namespace fs = std::filesystem;
namespace {

Status WriteResults(const RunOptions& o, Results* r) {
  r->finished_at = NowRfc3339();
  return WriteReport(o, "results.json", *r);
}

}  // namespace

int RunPilot(const RunOptions& o) {
  const std::unique_ptr<Workload> workload = SelectWorkload();
  // A rank of the node stage (started by its launcher).
  if (o.stage == "node" && IsNodeRank()) return workload->RunNodeRank(o);
  if (!o.resume_checkpoint.empty()) return workload->RunResumed(o);
  Results res;
  res.started_at = NowRfc3339();
  res.config_path = o.config;
  res.lock_path = o.lock;
  res.versions = CollectVersions();
  res.versions.runner = PILOT_VERSION_STRING;
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) {
    std::fprintf(stderr, "pilot: %s: %s\n", o.out.c_str(), ec.message().c_str());
    return kExitUsage;
  }
  Config cfg;
  Pins pins;
  Status in = LoadInputs(o.config, o.lock, o.sets, &cfg, &pins);
  Result<std::string> alloc = in.ok() ? ApplyAllocConf(cfg.training.alloc_conf) : Result<std::string>(in);
  if (!alloc.ok()) {
    std::fprintf(stderr, "%s\n", alloc.status().ToString().c_str());
    res.exit_code = ExitFor(alloc.status());
    (void)WriteResults(o, &res);
    return res.exit_code;
  }
  res.alloc_conf = *alloc;
  res.config_sha256 = cfg.sha256;
  res.seed = static_cast<int64_t>(pins.seed);
  if (o.stage != "node") {
    FILE* metrics = std::fopen((o.out + "/metrics.jsonl").c_str(), "w");
    SingleStage st;
    res.exit_code = workload->RunSingle(o, cfg, pins, &st, metrics);
    if (metrics) std::fclose(metrics);
    res.single = st;
  }
  if (o.stage == "node" || (o.stage == "all" && res.exit_code == kExitOk)) {
    std::optional<double> single_tps;
    if (res.single && res.single->tokens_per_second > 0) single_tps = res.single->tokens_per_second;
    if (!single_tps && o.single_tokens_per_second > 0) single_tps = o.single_tokens_per_second;
    NodeStage node;
    // This process keeps its context on the single stage's device while the
    // ranks run: the rank on that device leaves it out of its figures.
    if (res.single && res.single->device == "cuda") {
      const std::string held = DeviceBaselineFor(at::Device(at::kCUDA));
      if (!held.empty()) ::setenv(kDeviceBaselineEnv, held.c_str(), 1);
    }
    res.exit_code = RunNodeStage(o, cfg, o.nproc, single_tps, &node);
    res.node = node;
  }
  Status w = WriteResults(o, &res);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.ToString().c_str());
    return kExitError;
  }
  if (o.report_fd < 0) {
    std::fprintf(stderr, "pilot: %s: results in %s/results.json (exit %d)\n", o.stage.c_str(),
                 o.out.c_str(), res.exit_code);
  }
  return res.exit_code;
}

}  // namespace pilot::runner
