#include "runner/train/trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>

#include <cstdio>
#include <set>

#include "runner/train/device.h"
#include "runner/train/loop.h"

namespace pilot::runner {
namespace {
namespace prof = torch::autograd::profiler;
#if TORCH_VERSION_MAJOR >= 2
namespace impl = torch::profiler::impl;
using Activity = impl::ActivityType;
using Config = impl::ProfilerConfig;
using State = impl::ProfilerState;
#else
using Activity = torch::autograd::profiler::ActivityType;
using Config = torch::profiler::impl::ProfilerConfig;
using State = torch::profiler::impl::ProfilerState;
#endif
}  // namespace

Status TraceSteps(Session& s, const std::string& path, int steps) {
  if (steps <= 0) return Status::Ok();
  const int64_t first = s.cfg().training.steps + 1;
  LoopHooks hooks;
  hooks.process = "trace";
  hooks.instrument = false;
  hooks.warmup = 0;
  std::vector<StepRecord> recs;
  // One step outside the trace so lazily created state is not in it.
  PILOT_RETURN_IF_ERROR(RunSteps(s, first, first, hooks, &recs, nullptr));
  std::set<Activity> acts = {Activity::CPU};
  if (s.device().is_cuda()) acts.insert(Activity::CUDA);
  try {
    const Config cfg(State::KINETO, /*report_input_shapes=*/false, /*profile_memory=*/false);
    prof::prepareProfiler(cfg, acts);
    prof::enableProfiler(cfg, acts);
  } catch (const std::exception& e) {
    std::string m = e.what();
    m = m.substr(0, m.find('\n'));
    return Status::Unavailable("trace", "this libtorch cannot profile: " + m);
  }
  Status r = RunSteps(s, first + 1, first + steps, hooks, &recs, nullptr);
  Synchronize(s.device());
  std::unique_ptr<prof::ProfilerResult> result;
  try {
    result = prof::disableProfiler();
  } catch (const std::exception& e) {
    std::string m = e.what();
    return Status::Unavailable("trace", "the profiler failed: " + m.substr(0, m.find('\n')));
  }
  PILOT_RETURN_IF_ERROR(r);
  if (!result) return Status::Unavailable("trace", "the profiler returned no result");
  try {
    result->save(path);
  } catch (const std::exception& e) {
    std::string m = e.what();
    m = m.substr(0, m.find('\n'));
    return Status::Unavailable("trace", "not written: " + m);
  }
  std::fprintf(stderr, "pilot: single: trace of %d steps written to %s\n", steps, path.c_str());
  return Status::Ok();
}

}  // namespace pilot::runner
