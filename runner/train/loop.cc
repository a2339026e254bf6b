// The single stage's step loop and its summary.
#include "runner/train/loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/base/json_util.h"
#include "core/base/strings.h"
#include "runner/train/format.h"

namespace pilot::runner {
namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string Rate(double tok_s) {
  if (tok_s >= 1e6) return Fixed(tok_s / 1e6, 2) + "M";
  if (tok_s >= 1e3) return Fixed(tok_s / 1e3, 1) + "k";
  return Fixed(tok_s, 0);
}

std::optional<int64_t> PeakNow(const at::Device& dev) {
  // Cheap per-step figure for the progress line: the allocator's counter on
  // CUDA (no driver or NVML query), the process's peak RSS on the CPU; the
  // full Snapshot() is for the measured steps.
  if (std::optional<int64_t> peak = PeakAllocatedSoFar(dev)) return peak;
  return Snapshot(dev, 0).process_peak_rss_bytes;
}

}  // namespace

Status RunSteps(Session& s, int64_t first, int64_t last, const LoopHooks& hooks,
                std::vector<StepRecord>* records, FILE* metrics) {
  using Clock = std::chrono::steady_clock;
  const at::Device& dev = s.device();
  const int64_t total = s.cfg().training.steps;
  const int warmup = hooks.warmup >= 0 ? hooks.warmup : s.cfg().training.warmup_steps;
  std::unique_ptr<StepTimer> timers[2];
  if (hooks.instrument) {
    timers[0] = std::make_unique<StepTimer>(dev, 3);
    timers[1] = std::make_unique<StepTimer>(dev, 3);
  }
  struct Pending {
    int64_t step;
    StepResult r;
    StepTimer* timer;
    Clock::time_point start;
    bool timed;
  };
  std::optional<Pending> pend;
  double ms_sum = 0;
  int ms_n = 0;
  const int64_t every = (last - first) > 100 ? 10 : 1;
  // `next`: the timer of the step queued after p's, when there is one.
  auto finalize = [&](Pending& p, Clock::time_point end, StepTimer* next) {
    StepRecord rec;
    rec.step = p.step;
    rec.lr = p.r.lr;
    rec.data_wait_ms = p.r.data_wait_ms;
    rec.timed = p.timed;
    rec.step_ms = std::chrono::duration<double, std::milli>(end - p.start).count();
    if (hooks.instrument) {
      rec.loss = p.r.loss.item<double>();
      rec.grad_norm = p.r.grad_norm.item<double>();
      rec.fb_ms = p.timer->ElapsedMs(0, 1);
      rec.opt_ms = p.timer->ElapsedMs(1, 2);
      // The device's time from this step's start to the next one's: what a
      // long run spends per step, whatever the host's lead (the host's
      // interval between two launches shrinks and stretches with it). A
      // step followed by a synchronisation has no next start: its own span,
      // and no place in the means.
      if (next != nullptr) {
        rec.step_ms = p.timer->ElapsedMsTo(0, *next, 0);
      } else {
        rec.step_ms = p.timer->ElapsedMs(0, 2);
        rec.timed = false;
      }
    } else {
      rec.loss = rec.grad_norm = std::nan("");
    }
    records->push_back(rec);
    if (!hooks.instrument) return;
    ms_sum += rec.step_ms;
    ++ms_n;
    const double tok_s = s.tokens_per_step() * 1000.0 / rec.step_ms;
    if (metrics) {
      nlohmann::json j = {{"process", hooks.process}, {"step", rec.step},
                          {"loss", rec.loss},         {"grad_norm", rec.grad_norm},
                          {"lr", rec.lr},             {"step_ms", rec.step_ms},
                          {"data_wait_ms", rec.data_wait_ms},
                          {"forward_backward_ms", rec.fb_ms},
                          {"optimizer_ms", rec.opt_ms},
                          {"tokens_per_s", tok_s},    {"timed", rec.timed}};
      std::fprintf(metrics, "%s\n", DumpJson(j).c_str());
      std::fflush(metrics);
    }
    if (rec.step % every == 0 || rec.step == last || rec.step == first) {
      std::optional<int64_t> peak = PeakNow(dev);
      const double eta = (last - rec.step) * (ms_sum / ms_n) / 1000.0;
      std::fprintf(stderr, "pilot: single%s step %lld/%lld loss %.4f %.0f ms %s tok/s peak %s eta %.0fs\n",
                   hooks.process == "reference" ? "" : (" " + hooks.process).c_str(),
                   static_cast<long long>(rec.step), static_cast<long long>(total), rec.loss,
                   rec.step_ms, Rate(tok_s).c_str(),
                   peak ? FormatBytes(static_cast<double>(*peak)).c_str() : "n/a", eta);
    }
  };

  std::unique_ptr<Loader> loader = s.MakeLoader(first, last);
  // A step that ends in a synchronisation (memory measured, a pause for
  // eval or checkpoint) and the one after it (the device starts it with an
  // empty queue) are not steady steps: their times stay out of the means.
  bool after_sync = false;
  for (int64_t step = first; step <= last; ++step) {
    const bool measure = Contains(hooks.measure, step);
    const bool pause = Contains(hooks.pause_at, step);
    if (measure) {
      Synchronize(dev);
      if (pend) {
        finalize(*pend, Clock::now(), nullptr);
        pend.reset();
      }
      ResetPeak(dev);
    }
    const auto start = Clock::now();
    StepTimer* timer = hooks.instrument ? timers[step % 2].get() : nullptr;
    PILOT_ASSIGN_OR_RETURN(StepResult r, s.Step(*loader, step, timer));
    if (pend) finalize(*pend, start, timer);
    const bool steady = !measure && !pause && !after_sync;
    pend = Pending{step, std::move(r), timer, start, steady && step >= first + warmup};
    after_sync = measure || pause;
    if (measure) {
      Synchronize(dev);
      MemoryStats mem = Snapshot(dev, step);
      if (hooks.on_memory) hooks.on_memory(step, mem);
      finalize(*pend, Clock::now(), nullptr);
      pend.reset();
    } else if (pause) {
      Synchronize(dev);
      finalize(*pend, Clock::now(), nullptr);
      pend.reset();
    }
    if (pause && hooks.on_pause) PILOT_RETURN_IF_ERROR(hooks.on_pause(step));
  }
  Synchronize(dev);
  if (pend) finalize(*pend, Clock::now(), nullptr);
  return Status::Ok();
}

void Summarise(const Session& s, const std::vector<StepRecord>& records, SingleStage* out) {
  std::vector<const StepRecord*> timed;
  for (const auto& r : records) {
    if (r.timed) timed.push_back(&r);
  }
  if (timed.empty()) {
    for (const auto& r : records) timed.push_back(&r);
  }
  Timings& t = out->timings;
  t.timed_steps = static_cast<int>(timed.size());
  if (timed.empty()) return;
  std::vector<double> ms;
  for (const StepRecord* r : timed) {
    t.data_wait_ms += r->data_wait_ms;
    t.data_wait_max_ms = std::max(t.data_wait_max_ms, r->data_wait_ms);
    t.forward_backward_ms += r->fb_ms;
    t.optimizer_ms += r->opt_ms;
    t.step_ms += r->step_ms;
    ms.push_back(r->step_ms);
  }
  const double n = static_cast<double>(timed.size());
  t.data_wait_ms /= n;
  t.forward_backward_ms /= n;
  t.optimizer_ms /= n;
  t.step_ms /= n;
  std::sort(ms.begin(), ms.end());
  t.step_ms_median = ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  out->tokens_per_second = s.tokens_per_step() * 1000.0 / t.step_ms;
  out->flops_per_token = s.model().FlopsPerToken(s.cfg().training.seq_len);
  out->tflops = out->flops_per_token * out->tokens_per_second / 1e12;
}
}  // namespace pilot::runner
