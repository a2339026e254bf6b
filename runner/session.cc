// Session: inputs, the training step, eval and the step loop.
#include "runner/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <nlohmann/json.hpp>

#include "core/lock.h"
#include "core/rfc3339.h"
#include "runner/head_loss.h"

namespace pilot::runner {
namespace {

at::ScalarType ComputeDtype(const std::string& precision) {
  return precision == "bf16" ? at::kBFloat16 : precision == "fp16" ? at::kHalf : at::kFloat;
}

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

std::string NowRfc3339() { return FormatRfc3339(static_cast<int64_t>(std::time(nullptr))); }

double RelDiff(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-12); }

std::string FormatBytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return Fixed(bytes / (1024.0 * 1024 * 1024), 1) + " GiB";
  return Fixed(bytes / (1024.0 * 1024), 1) + " MiB";
}

Status LoadInputs(const std::string& config_path, const std::string& lock_path,
                  const std::vector<std::string>& sets, Config* cfg, Pins* pins) {
  LoadOptions lo;
  lo.overrides = sets;
  Result<Config> c = LoadConfig(config_path, lo);
  if (!c.ok()) return c.status();
  *cfg = std::move(c).value();
  if (!lock_path.empty()) {
    PILOT_ASSIGN_OR_RETURN(Lock lock, ReadLock(lock_path));
    const std::string& pinned = !lock.config.sha256_copied.empty() ? lock.config.sha256_copied
                                                                   : lock.config.sha256_submitted;
    if (!pinned.empty() && pinned != cfg->sha256) {
      return Status::Corrupt(config_path, "sha256 " + cfg->sha256 + " differs from the one pinned in " +
                                              lock_path + " (" + pinned + ")")
          .WithHint("the config changed after the job was submitted; resubmit");
    }
    pins->seed = static_cast<uint64_t>(lock.seeds.training);
    for (const LockFile& f : lock.files) {
      const std::string& h = !f.sha256_actual.empty() ? f.sha256_actual : f.sha256_expected;
      if (f.role == "train") pins->train_sha256 = h;
      if (f.role == "eval") pins->eval_sha256 = h;
    }
    return Status::Ok();
  }
  if (cfg->training.seed >= 0) {
    pins->seed = static_cast<uint64_t>(cfg->training.seed);
  } else if (const char* job = std::getenv("SLURM_JOB_ID")) {
    pins->seed = MixSeed({std::strtoull(job, nullptr, 10)}) >> 1;
  } else {
    pins->seed = 0;
  }
  return Status::Ok();
}

Result<std::unique_ptr<Session>> Session::Create(const Config& cfg, const Pins& pins) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Session> s(new Session());
  s->cfg_ = cfg;
  TrainingConfig& t = s->cfg_.training;
  if (t.seq_len == 0) t.seq_len = cfg.run.seq_len;
  if (t.micro_batch == 0) t.micro_batch = cfg.run.micro_batch;
  PILOT_ASSIGN_OR_RETURN(s->dev_, ResolveDevice(t.device));
  if (t.precision == "fp16" && !s->dev_.is_cuda()) {
    return Status::Invalid("training.precision", "fp16 needs a CUDA device")
        .WithHint("use \"bf16\" or \"fp32\" on the CPU");
  }
  if (t.deterministic) at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  s->seed_ = pins.seed;
  s->horizon_ = t.schedule_steps > 0 ? t.schedule_steps : std::max<int64_t>(t.steps, 1);
  s->dtype_ = ComputeDtype(t.precision);
  PILOT_ASSIGN_OR_RETURN(s->model_, BuildWorkload(cfg.model, t.seq_len, s->seed_, s->dev_));
  s->model_->SetComputeDtype(s->dtype_);
  s->model_->SetActivationCheckpointing(t.activation_checkpointing);
  s->model_->SetFusedLoss(t.fused_loss);
  s->optim_ = std::make_unique<Optimizer>(s->model_->Parameters(), t);
  PILOT_ASSIGN_OR_RETURN(s->data_, TokenSource::Open(cfg.data, cfg.model.vocab, t.seq_len, t.micro_batch,
                                                     s->seed_, /*rank=*/0, pins.train_sha256,
                                                     pins.eval_sha256));
  Synchronize(s->dev_);
  s->build_seconds_ = SecondsSince(t0);
  s->phase_ = "forward";
  return s;
}

void Session::SetComputeDtype(at::ScalarType t) {
  dtype_ = t;
  model_->SetComputeDtype(t);
}

int64_t Session::tokens_per_step() const {
  return static_cast<int64_t>(cfg_.training.seq_len) * cfg_.training.micro_batch *
         std::max(1, cfg_.run.grad_accum);
}

ShapeInfo Session::Shape() const {
  ShapeInfo sh;
  sh.model_kind = model_->Kind();
  sh.params = CountParameters(*model_);
  sh.seq_len = cfg_.training.seq_len;
  sh.micro_batch = cfg_.training.micro_batch;
  sh.grad_accum = std::max(1, cfg_.run.grad_accum);
  sh.binding = cfg_.training.seq_len == cfg_.run.seq_len && cfg_.training.micro_batch == cfg_.run.micro_batch;
  sh.tokens_per_step = tokens_per_step();
  sh.precision = cfg_.training.precision;
  sh.activation_checkpointing = cfg_.training.activation_checkpointing;
  sh.fused_loss =
      cfg_.training.fused_loss && FusedHeadLossSupports(ComputeDtype(cfg_.training.precision));
  sh.optimizer = optim_->kind();
  sh.fused_optimizer = optim_->fused();
  sh.optimizer_state_included = true;
  return sh;
}

std::unique_ptr<Loader> Session::MakeLoader(int64_t first_step, int64_t last_step) {
  const int64_t accum = std::max(1, cfg_.run.grad_accum);
  return std::make_unique<Loader>(data_, (first_step - 1) * accum + data_shift_,
                                  last_step * accum + data_shift_,
                                  cfg_.data.loader_threads, cfg_.data.prefetch, dev_);
}

Result<StepResult> Session::Step(Loader& loader, int64_t step, StepTimer* timer) {
  const NamedTensors& params = model_->Parameters();
  const int accum = std::max(1, cfg_.run.grad_accum);
  const bool fp16 = dtype_ == at::kHalf;
  StepResult out;
  current_step_ = step;
  phase_ = "forward";
  ZeroGrad(params);
  if (timer) timer->Mark(0);
  at::Tensor loss_sum;
  for (int m = 0; m < accum; ++m) {
    double wait = 0;
    phase_ = "data";
    PILOT_ASSIGN_OR_RETURN(Batch b, loader.Next(&wait));
    out.data_wait_ms += wait;
    phase_ = "forward";
    at::Tensor loss = model_->Loss(b.x, b.y);  // () float32
    at::Tensor scaled = accum > 1 ? loss / static_cast<double>(accum) : loss;
    if (fp16) scaled = scaled * scaler_.scale;
    phase_ = "backward";
    scaled.backward();
    at::Tensor l = loss.detach();
    loss_sum = loss_sum.defined() ? loss_sum + l : l;
  }
  if (timer) timer->Mark(1);
  phase_ = "optimizer";
  bool finite = true;
  if (fp16) finite = scaler_.Unscale(params);
  out.grad_norm = GradNorm(params);
  at::Tensor divisor;
  if (cfg_.training.grad_clip > 0) divisor = ClipDivisor(out.grad_norm, cfg_.training.grad_clip);
  out.lr = LearningRate(cfg_.training, step, horizon_);
  if (finite) optim_->Step(out.lr, divisor);
  if (fp16) scaler_.Update(finite);
  if (timer) timer->Mark(2);
  out.loss = accum > 1 ? loss_sum / static_cast<double>(accum) : loss_sum;
  return out;
}

Result<double> Session::Eval() {
  c10::NoGradGuard no_grad;
  phase_ = "eval";
  double sum = 0;
  const int n = std::max(1, cfg_.eval.batches);
  for (int i = 0; i < n; ++i) {
    PILOT_ASSIGN_OR_RETURN(Batch b, data_->Eval(i, dev_.is_cuda()));
    at::Tensor x = b.x.to(dev_), y = b.y.to(dev_);
    sum += model_->Loss(x, y).item<double>();
  }
  return sum / n;
}

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
      std::fprintf(metrics, "%s\n", j.dump().c_str());
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
