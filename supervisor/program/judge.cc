#include "supervisor/program/judge.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/base/strings.h"
#include "core/records/python_error.h"
#include "launch/srun.h"

namespace pilot::supervisor {
namespace {

std::string Num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// The last non-empty line of a process's standard error that says what
// went wrong (a Python traceback ends with the exception).
std::string LastWords(const std::string& tail) {
  std::string t = TailLines(tail, 1, 400);
  return t.empty() ? "" : ": " + t;
}

// The last line task `task` of an srun step of `tasks` tasks wrote to its
// standard error, without its label (": " + line), or "".
std::string TaskLastWords(const std::string& tail, int task, int tasks) {
  std::string last;
  for (std::string_view line : SplitLines(tail)) {
    auto split = launch::SplitSrunLabel(std::string(line), tasks);
    if (split && split->first == task && !Trim(split->second).empty()) last = split->second;
  }
  if (last.size() > 400) last = last.substr(last.size() - 400);
  return last.empty() ? "" : ": " + last;
}

// What a failed process's standard error says: the error that ended it
// (core/records/python_error.h), else its last words; and the hints its
// frameworks' warnings give.
struct FailureWords {
  std::string text;   // ": " + the error or the last words; "" when none
  bool oom = false;
  std::string hints;  // "; hint: ..." for each
};

bool OutOfMemoryWords(const std::string& stderr_tail) {
  const std::string t = AsciiLower(TailLines(stderr_tail, 30, 8192));
  return t.find("out of memory") != std::string::npos ||
         t.find("outofmemoryerror") != std::string::npos ||
         t.find("not enough memory") != std::string::npos ||
         t.find("cannot allocate memory") != std::string::npos ||
         t.find("can't allocate memory") != std::string::npos ||
         t.find("memoryerror") != std::string::npos;
}

// `stderr_text` is the process's (or its srun task's) own; `rank` the
// process's, named again when the error is another rank's (a process that
// started its own workers).
FailureWords WordsOf(const std::optional<PythonError>& error, const std::string& stderr_text,
                     const std::string& last_words, int rank) {
  FailureWords w;
  if (error) {
    w.oom = IsOutOfMemoryError(*error);
    const bool other = error->rank && *error->rank != rank;
    w.text = ": " + (other ? "rank " + std::to_string(*error->rank) + ": " : std::string()) +
             DescribePythonError(*error);
  } else {
    w.oom = OutOfMemoryWords(stderr_text);
    w.text = last_words;
  }
  for (const std::string& hint : StderrHints(stderr_text)) w.hints += "; " + hint;
  return w;
}

// The rank process to blame for a phase: of those that failed on their own
// (not ended by the supervisor after the last step or because another
// rank failed), the first to end (RankResult::wall_seconds; the lower rank
// of two that ended together), and how many others failed on their own;
// without any, the first the supervisor ended, unless it ended them after
// the last step.
struct FirstFailure {
  const RankResult* rank = nullptr;
  int others = 0;
};

FirstFailure FirstFailed(const GroupResult& g) {
  FirstFailure f;
  int failed = 0;
  for (const RankResult& r : g.ranks) {
    if (r.terminated || (r.signal == 0 && r.exit_code == 0)) continue;
    ++failed;
    if (f.rank == nullptr || r.wall_seconds < f.rank->wall_seconds) f.rank = &r;
  }
  if (f.rank != nullptr) {
    f.others = failed - 1;
    return f;
  }
  for (const RankResult& r : g.ranks) {
    if (!g.after_last_step && (r.signal != 0 || r.exit_code != 0)) return FirstFailure{&r, 0};
  }
  return f;
}

// The problem of a phase a process failed in (FirstFailed).
PhaseProblem FailureProblem(const FirstFailure& f, const std::string& who, int64_t last_seen) {
  const RankResult* failed = f.rank;
  const int64_t at = last_seen + 1;
  const std::string status = failed->signal ? "was killed by signal " + std::to_string(failed->signal)
                                            : "exited with status " + std::to_string(failed->exit_code);
  const std::string after = last_seen > 0 ? " after step " + std::to_string(last_seen)
                                          : std::string(" before its first step");
  if (failed->srun_tasks > 0) {
    // srun's line about the task that failed first (launch/srun.h).
    const std::optional<launch::FailedTask> first =
        launch::FailedTaskBySrunWords(failed->srun_lines);
    if (!first) {
      return PhaseProblem{LooksOutOfMemory(failed->stderr_tail) ? "oom" : "error", at, std::nullopt,
                          "srun, which started the ranks of " + who + ", " + status + after +
                              LastWords(failed->stderr_tail)};
    }
    const pilot::SrunTaskLine* t = first->line;
    const int rank = first->task;
    // The task's own lines of the step's one stream.
    const std::string own = SrunTaskText(failed->stderr_tail, rank, failed->srun_tasks);
    const FailureWords w =
        WordsOf(ParsePythonErrorOfSrunTask(failed->stderr_tail, rank, failed->srun_tasks), own,
                TaskLastWords(failed->stderr_tail, rank, failed->srun_tasks), rank);
    const std::string whom = "rank " + std::to_string(rank) + " on " + t->node;
    if (w.oom) {
      return PhaseProblem{"oom", at, rank,
                          who + " ran out of memory at step " + std::to_string(at) + " (" + whom +
                              ")" + w.text + w.hints};
    }
    return PhaseProblem{"error", at, rank,
                        whom + " of " + who + " failed (srun: " + t->what + ")" + after + w.text +
                            w.hints};
  }
  const int rank = failed->rank;
  const FailureWords w = WordsOf(ParsePythonError(failed->stderr_tail), failed->stderr_tail,
                                 LastWords(failed->stderr_tail), rank);
  const std::string order =
      f.others == 0 ? ""
                    : "; rank " + std::to_string(rank) + " failed first; " + std::to_string(f.others) +
                          (f.others == 1 ? " other rank" : " other ranks") + " failed after it";
  if (w.oom) {
    return PhaseProblem{"oom", at, rank,
                        who + " ran out of memory at step " + std::to_string(at) + " (rank " +
                            std::to_string(rank) + ")" + w.text + order + w.hints};
  }
  return PhaseProblem{"error", at, rank,
                      who + " (rank " + std::to_string(rank) + ") " + status + after + w.text +
                          order + w.hints};
}

double RelDiff(double a, double b) {
  const double d = std::fabs(a - b);
  return d / std::max(std::fabs(b), 1e-12);
}

// Records a process outside the phase tried to write, or that broke the
// protocol: the first reason of a phase, since a hang or an end that
// followed is their consequence.
std::optional<PhaseProblem> UntrustedRecords(const GroupResult& g, const std::string& who,
                                             int64_t last_seen) {
  if (g.outside_writers > 0) {
    return PhaseProblem{"protocol", last_seen + 1, std::nullopt,
                        "a process outside the pilot tried to write " + who + "'s metrics records (" +
                            Join(g.outside_writer_examples, "; ") +
                            (g.outside_writers > static_cast<int64_t>(g.outside_writer_examples.size())
                                 ? "; " + std::to_string(g.outside_writers) + " connections in all"
                                 : std::string()) +
                            "): refused, and the records of this pilot cannot be trusted"};
  }
  if (g.protocol_breaks > 0) {
    return PhaseProblem{"protocol", last_seen + 1, std::nullopt,
                        who + " broke the records protocol " + std::to_string(g.protocol_breaks) +
                            (g.protocol_breaks == 1 ? " time: " : " times, the first: ") +
                            Join(g.protocol_break_examples, "; ")};
  }
  return std::nullopt;
}

}  // namespace

bool LooksOutOfMemory(const std::string& stderr_tail) {
  if (std::optional<PythonError> e = ParsePythonError(stderr_tail)) return IsOutOfMemoryError(*e);
  return OutOfMemoryWords(stderr_tail);
}

std::map<int64_t, MetricRecord> StepsOf(const GroupResult& g, int rank) {
  std::map<int64_t, MetricRecord> out;
  for (const MetricRecord& r : g.records) {
    if (r.rank.value_or(0) == rank) out[r.step] = r;
  }
  return out;
}

std::optional<PhaseProblem> CheckPhase(const GroupResult& g, const PhaseExpect& e) {
  const std::string who = e.process == "resumed" ? "the resumed process" : "the program";
  for (const RankResult& r : g.ranks) {
    if (!r.started) {
      return PhaseProblem{"error", e.first_step, r.rank,
                          "rank " + std::to_string(r.rank) + " could not be started: " + r.start_problem};
    }
  }
  int64_t last_seen = 0;
  for (const MetricRecord& r : g.records) last_seen = std::max(last_seen, r.step);
  // Records that cannot be trusted come first: a hang or an end that
  // followed them is their consequence.
  if (std::optional<PhaseProblem> t = UntrustedRecords(g, who, last_seen)) return t;
  if (g.hung) {
    return PhaseProblem{"hang", g.hung_after_step + 1, std::nullopt,
                        who + " hung: no metrics record for " + FormatFixed(g.hung_seconds, 0) +
                            " s " +
                            (g.hung_after_step > 0 ? "after step " + std::to_string(g.hung_after_step)
                                                   : std::string("from its start")) +
                            " (program.step_timeout = " + FormatFixed(e.step_timeout, 0) +
                            " s); its processes were ended"};
  }
  // A process that failed on its own, or the phase's processes the
  // supervisor ended for another reason than the last step.
  const FirstFailure failure = FirstFailed(g);
  if (failure.rank != nullptr) return FailureProblem(failure, who, last_seen);
  // Every rank reported step N, and a process did not end by itself: the
  // supervisor ended it, so it is not counted as completed (a stopped
  // process cannot vouch for the records written in its name).
  for (const RankResult& r : g.ranks) {
    if (!r.terminated || !g.after_last_step) continue;
    return PhaseProblem{"error", e.last_step, r.rank,
                        who + " (rank " + std::to_string(r.rank) + ") reported step " +
                            std::to_string(e.last_step) +
                            " but did not exit by itself: the supervisor ended it (a process must "
                            "exit 0 after its last step to count as completed)" +
                            LastWords(r.stderr_tail)};
  }
  if (g.dropped_records > 0) {
    return PhaseProblem{"protocol", last_seen, std::nullopt,
                        who + " wrote more than " + std::to_string(g.records.size()) +
                            " metrics records (" + std::to_string(g.dropped_records) +
                            " more were not read): the protocol is one record per optimizer step "
                            "and rank"};
  }
  if (g.records.empty()) {
    std::string m = e.loss_pattern
                        ? who + " printed no line that program.loss_pattern matches"
                        : who + " wrote no metrics records to PILOT_METRICS";
    if (g.bad_records > 0) m += "; " + std::to_string(g.bad_records) + " refused, the first: " + g.first_bad_record;
    else if (!e.loss_pattern) m += " (call slurm_pilot.step() after each optimizer step, or set program.loss_pattern)";
    return PhaseProblem{"protocol", e.first_step, std::nullopt, m};
  }
  for (const MetricRecord& r : g.records) {
    if (!std::isfinite(r.loss)) {
      return PhaseProblem{"nan", r.step, r.rank,
                          "loss is " + Num(r.loss) + " at step " + std::to_string(r.step) +
                              " (rank " + std::to_string(r.rank.value_or(0)) + ")"};
    }
  }
  for (int rank = 0; rank < e.ranks; ++rank) {
    const auto steps = StepsOf(g, rank);
    if (steps.empty()) {
      return PhaseProblem{"protocol", e.first_step, rank,
                          "rank " + std::to_string(rank) + " of " + who + " reported no step"};
    }
    const int64_t first = steps.begin()->first;
    if (first != e.first_step) {
      if (e.process == "resumed") {
        return PhaseProblem{"protocol", first, rank,
                            "the resumed process reported step " + std::to_string(first) +
                                " first, not " + std::to_string(e.first_step) +
                                ": it did not restore from PILOT_RESUME_DIR"};
      }
      return PhaseProblem{"protocol", first, rank,
                          "the first step reported is " + std::to_string(first) + ", not 1"};
    }
    int64_t expect = e.first_step;
    for (const auto& [step, rec] : steps) {
      if (step != expect) {
        return PhaseProblem{"protocol", expect, rank,
                            "rank " + std::to_string(rank) + " reported no step " +
                                std::to_string(expect) + " (its steps jump to " +
                                std::to_string(step) + ")"};
      }
      ++expect;
    }
    const int64_t last = steps.rbegin()->first;
    if (last < e.last_step) {
      return PhaseProblem{"protocol", last + 1, rank,
                          who + " (rank " + std::to_string(rank) + ") stopped after step " +
                              std::to_string(last) + " of " + std::to_string(e.last_step) +
                              " (PILOT_STEPS)"};
    }
  }
  return std::nullopt;
}

namespace {

// One rank's losses (or eval losses) at the steps all sides report.
struct Series {
  std::vector<int64_t> steps;
  std::vector<double> reference, resumed, repeat;
};

std::string FirstStepWords(int64_t step, int rank, double a, double b, double rel, double bound) {
  return "the first step after the resume (" + std::to_string(step) + ", rank " +
         std::to_string(rank) + ") differs: reference " + Num(a) + ", resumed " + Num(b) +
         " (rel diff " + Num(rel) + ", at most " + Num(bound) +
         ": it is a forward of the restored state on the same batch)";
}

// The sentence for a step the noise rule failed (j.bad_index >= 0).
std::string NoiseWords(const std::string& what, const Series& s, const NoiseJudgement& j, int rank,
                       const RestoreRule& rule, bool first_is_forward) {
  const size_t i = static_cast<size_t>(j.bad_index);
  if (i >= s.steps.size()) return what + " of rank " + std::to_string(rank) + " are missing steps";
  const int64_t step = s.steps[i];
  const double a = s.reference[i], b = s.resumed[i];
  if (!std::isfinite(a) || !std::isfinite(b)) {
    return what + " at step " + std::to_string(step) + " is not finite (reference " + Num(a) +
           ", resumed " + Num(b) + ")";
  }
  if (i == 0 && first_is_forward) return FirstStepWords(step, rank, a, b, RelDiff(b, a), rule.noise.first);
  const double d = std::fabs(a - b);
  std::string m = what + " diverge after resume from step " + std::to_string(step) + " (rank " +
                  std::to_string(rank) + "): reference " + Num(a) + ", resumed " + Num(b) +
                  " (rel diff " + Num(RelDiff(b, a)) + ", tolerance " + Num(rule.noise.floor);
  if (j.bad_spread > 0) {
    m += "; " + Num(d / j.bad_spread) + " times the spread of a second resumed process, " +
         Num(j.bad_spread) + ", at most " + Num(rule.noise.margin) + ")";
  } else {
    m += "; a second resumed process repeated the first exactly: the difference is not the "
         "kernels' noise)";
  }
  return m;
}

}  // namespace

RestoreComparison CompareResumed(const GroupResult& reference, const GroupResult& resumed,
                                 const GroupResult* repeat, int64_t k, int64_t n, int ranks,
                                 const RestoreRule& rule) {
  RestoreComparison c;
  RestoreInfo& r = c.info;
  const bool bitwise = rule.bitwise;
  r.ran = true;
  r.mode = bitwise ? "bitwise" : repeat != nullptr ? "noise" : "tolerance";
  r.tolerance = bitwise ? 0 : rule.noise.floor;
  if (!bitwise) r.first_tolerance = rule.noise.first;
  if (repeat != nullptr) r.noise_margin = rule.noise.margin;
  r.from_step = k;
  r.to_step = n;
  r.equal = true;
  bool undecided = false;  // steps past the tolerance, no repeat
  std::string first_loss, first_lr, first_eval;
  for (int rank = 0; rank < ranks; ++rank) {
    const auto ref = StepsOf(reference, rank);
    const auto res = StepsOf(resumed, rank);
    std::map<int64_t, MetricRecord> rep;
    if (repeat != nullptr) rep = StepsOf(*repeat, rank);
    Series loss, eval;
    for (int64_t step = k + 1; step <= n; ++step) {
      auto a = ref.find(step), b = res.find(step);
      auto e = repeat != nullptr ? rep.find(step) : rep.end();
      if (a == ref.end() || b == res.end() || (repeat != nullptr && e == rep.end())) {
        r.equal = false;
        if (first_loss.empty()) {
          first_loss = "step " + std::to_string(step) + " is missing from the " +
                       (a == ref.end() ? "reference" : b == res.end() ? "resumed" : "second resumed") +
                       " run (rank " + std::to_string(rank) + ")";
        }
        continue;
      }
      const double ra = a->second.loss, rb = b->second.loss;
      if (rank == 0) r.resumed_losses.push_back(rb);
      if (rank == 0 && repeat != nullptr) r.repeat_losses.push_back(e->second.loss);
      r.max_abs_loss_diff = std::max(r.max_abs_loss_diff, std::fabs(ra - rb));
      r.max_rel_loss_diff = std::max(r.max_rel_loss_diff, RelDiff(rb, ra));
      loss.steps.push_back(step);
      loss.reference.push_back(ra);
      loss.resumed.push_back(rb);
      if (repeat != nullptr) loss.repeat.push_back(e->second.loss);
      if (bitwise && ra != rb && first_loss.empty()) {
        first_loss = "losses diverge after resume from step " + std::to_string(step) + " (rank " +
                     std::to_string(rank) + "): reference " + Num(ra) + ", resumed " + Num(rb) +
                     " (rel diff " + Num(RelDiff(rb, ra)) + ", bitwise expected)";
      }
      if (bitwise && ra != rb) r.equal = false;
      // The schedule is computed, not reduced: exact in every mode.
      if (a->second.lr && b->second.lr) {
        c.lr_compared = true;
        const double la = *a->second.lr, lb = *b->second.lr;
        if (la != lb) {
          r.equal = false;
          if (first_lr.empty()) {
            first_lr = "the learning rate differs after resume at step " + std::to_string(step) +
                       ": reference " + Num(la) + ", resumed " + Num(lb) +
                       " (was the scheduler's state restored?)";
          }
        }
      }
      if (a->second.eval_loss && b->second.eval_loss) {
        c.eval_compared = true;
        const double ea = *a->second.eval_loss, eb = *b->second.eval_loss;
        if (bitwise) {
          if (ea != eb) {
            r.equal = false;
            if (first_eval.empty()) {
              first_eval = "eval_loss differs after resume at step " + std::to_string(step) +
                           ": reference " + Num(ea) + ", resumed " + Num(eb);
            }
          }
        } else if (repeat == nullptr || e->second.eval_loss) {
          eval.steps.push_back(step);
          eval.reference.push_back(ea);
          eval.resumed.push_back(eb);
          if (repeat != nullptr) eval.repeat.push_back(*e->second.eval_loss);
        }
      }
    }
    if (bitwise) continue;
    const NoiseJudgement j = JudgeNoise(loss.reference, loss.resumed, loss.repeat, rule.noise);
    r.first_rel_loss_diff = std::max(r.first_rel_loss_diff, j.first_rel);
    r.noise_steps += j.beyond_floor;
    r.noise_max_ratio = std::max(r.noise_max_ratio, j.max_ratio);
    if (j.bad_index >= 0) {
      r.equal = false;
      if (first_loss.empty()) first_loss = NoiseWords("losses", loss, j, rank, rule, true);
    } else if (j.needs_repeat) {
      undecided = true;
    }
    const NoiseJudgement je = JudgeNoise(eval.reference, eval.resumed, eval.repeat, rule.noise, false);
    if (je.bad_index >= 0) {
      r.equal = false;
      if (first_eval.empty()) first_eval = NoiseWords("eval losses", eval, je, rank, rule, false);
    } else if (je.needs_repeat) {
      undecided = true;
    }
  }
  if (r.equal && undecided) {
    r.equal = false;
    c.needs_repeat = true;
    r.detail = std::to_string(r.noise_steps) + " steps differ by more than the tolerance " +
               Num(rule.noise.floor) + " and no second resumed process measured the noise";
    return c;
  }
  if (!r.equal) {
    // The schedule's own symptom first: a reset scheduler changes lr at once.
    r.detail = !first_lr.empty() ? first_lr : !first_loss.empty() ? first_loss : first_eval;
    if (!first_lr.empty() && !first_loss.empty()) r.detail += "; " + first_loss;
  }
  return c;
}

Throughput ThroughputOf(const std::map<int64_t, MetricRecord>& steps, int64_t warmup,
                        int64_t checkpoint_step) {
  Throughput t;
  std::vector<double> ms;
  double tokens = 0, seconds = 0, wait = 0;
  int waits = 0;
  for (auto it = steps.begin(); it != steps.end(); ++it) {
    auto prev = it == steps.begin() ? steps.end() : std::prev(it);
    if (prev == steps.end() || it->first <= warmup || it->first == checkpoint_step + 1) continue;
    if (prev->first != it->first - 1) continue;
    const double dt = it->second.arrived - prev->second.arrived;
    if (dt <= 0) continue;
    ms.push_back(dt * 1e3);
    seconds += dt;
    const MetricRecord& r = it->second;
    if (r.tokens) {
      tokens += static_cast<double>(*r.tokens);
    } else if (r.seq_len && r.micro_batch) {
      tokens += static_cast<double>(*r.seq_len * *r.micro_batch);
    }
    if (r.data_wait_ms) {
      wait += *r.data_wait_ms;
      t.data_wait_max_ms = std::max(t.data_wait_max_ms, *r.data_wait_ms);
      ++waits;
    }
  }
  t.timed_steps = static_cast<int>(ms.size());
  if (ms.empty()) return t;
  t.step_ms = seconds * 1e3 / static_cast<double>(ms.size());
  std::sort(ms.begin(), ms.end());
  t.step_ms_median = ms[ms.size() / 2];
  t.tokens_per_second = seconds > 0 ? tokens / seconds : 0;
  t.data_wait_ms = waits > 0 ? wait / waits : 0;
  return t;
}

namespace {

MemoryStats MemoryOf(const MetricRecord& r, const std::string& device) {
  MemoryStats m(MemoryFiguresOf(r));
  if (m.device.empty()) m.device = device;
  if (m.device_used_bytes && m.peak_reserved_bytes) {
    m.runtime_overhead_bytes = *m.device_used_bytes - *m.peak_reserved_bytes;
  }
  return m;
}

}  // namespace

std::optional<MemoryStats> FirstStepMemory(const GroupResult& g, const std::string& device) {
  const auto steps = StepsOf(g, 0);
  if (steps.empty()) return std::nullopt;
  return MemoryOf(steps.begin()->second, device);
}

NodeMemoryStats NodeMemoryOf(const MetricRecord& r) { return NodeMemoryStats(MemoryFiguresOf(r)); }

SingleStage SingleFromRecords(const SingleInputs& in) {
  SingleStage s;
  s.status = "ok";
  const auto steps = StepsOf(*in.reference, 0);
  std::string device = in.device;
  if (device != "cpu" && device != "cuda") {
    device = "cpu";
    for (const auto& [step, r] : steps) {
      if (r.device == "cuda") device = "cuda";
    }
  }
  s.device = device;
  s.device_name = device;
  s.steps = in.steps;
  s.warmup_steps = in.warmup_steps;
  ShapeInfo& sh = s.shape;
  sh.model_kind = "program";
  sh.grad_accum = 1;
  std::optional<int64_t> opt_bytes;
  for (const auto& [step, r] : steps) {
    s.losses.push_back(r.loss);
    if (r.grad_norm) s.grad_norms.push_back(*r.grad_norm);
    if (r.params) sh.params = *r.params;
    if (r.seq_len) sh.seq_len = static_cast<int>(std::clamp<int64_t>(*r.seq_len, 0, 1 << 30));
    if (r.micro_batch) sh.micro_batch = static_cast<int>(std::clamp<int64_t>(*r.micro_batch, 0, 1 << 30));
    if (r.tokens) sh.tokens_per_step = *r.tokens;
    if (r.optimizer_state_bytes) opt_bytes = r.optimizer_state_bytes;
    if (r.param_bytes) sh.param_bytes = r.param_bytes;
    if (r.grad_bytes) sh.grad_bytes = r.grad_bytes;
    if (r.optimizer_state_bytes) sh.optimizer_state_bytes = r.optimizer_state_bytes;
    if (r.eval_loss) {
      if (step == in.checkpoint_step) {
        s.eval.at_step = step;
        s.eval.loss_at_checkpoint = *r.eval_loss;
      }
      s.eval.loss_final = *r.eval_loss;
    }
  }
  if (sh.tokens_per_step == 0) sh.tokens_per_step = int64_t{sh.seq_len} * sh.micro_batch;
  // Unreported optimizer state is not evidence of its absence: the
  // checkpoint check reads the files for it.
  sh.optimizer_state_included = !opt_bytes || *opt_bytes > 0;
  const Throughput t = ThroughputOf(steps, in.warmup_steps, in.checkpoint_step);
  s.timings.timed_steps = t.timed_steps;
  s.timings.step_ms = t.step_ms;
  s.timings.step_ms_median = t.step_ms_median;
  s.timings.data_wait_ms = t.data_wait_ms;
  s.timings.data_wait_max_ms = t.data_wait_max_ms;
  s.tokens_per_second = t.tokens_per_second;
  if (!steps.empty()) {
    // The first step creates the optimizer's state; of the others, the one
    // with the highest allocator peak stands for the run (the last when
    // no step reported one).
    s.memory_first_step = MemoryOf(steps.begin()->second, device);
    const MetricRecord* peak = &steps.rbegin()->second;
    for (auto it = std::next(steps.begin()); it != steps.end(); ++it) {
      const MetricRecord& r = it->second;
      if (r.peak_allocated_bytes && (!peak->peak_allocated_bytes ||
                                     *r.peak_allocated_bytes > *peak->peak_allocated_bytes)) {
        peak = &r;
      }
    }
    s.memory = MemoryOf(*peak, device);
  }
  if (in.reference->peak_rss_bytes > 0) {
    const int64_t seen = in.reference->peak_rss_bytes;
    if (!s.memory.process_peak_rss_bytes || *s.memory.process_peak_rss_bytes < seen) {
      s.memory.process_peak_rss_bytes = seen;
    }
  }
  if (in.resumed != nullptr) s.memory_resumed = FirstStepMemory(*in.resumed, device);
  s.checkpoint.step = in.checkpoint_step;
  auto k = steps.find(in.checkpoint_step), k1 = steps.find(in.checkpoint_step + 1);
  if (k != steps.end() && k1 != steps.end() && t.step_ms_median > 0) {
    s.checkpoint.save_seconds =
        std::max(0.0, k1->second.arrived - k->second.arrived - t.step_ms_median / 1e3);
  }
  s.precision_check.detail = "not run for a program";
  s.recompute_check.detail = "not run for a program";
  return s;
}

}  // namespace pilot::supervisor
