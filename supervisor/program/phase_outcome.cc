#include "supervisor/program/phase_outcome.h"

#include <algorithm>
#include <cstdio>

#include "core/base/strings.h"
#include "core/records/python_error.h"
#include "supervisor/program/judge.h"
#include "supervisor/program/observe.h"

namespace pilot::supervisor {
namespace {

void Log(const std::string& line) { std::fprintf(stderr, "pilot: supervisor: %s\n", line.c_str()); }

// Keeps the larger of *peak and `v`.
void RaisePeak(std::optional<int64_t>* peak, const std::optional<int64_t>& v) {
  if (v && (!*peak || *v > **peak)) *peak = v;
}

}  // namespace

void NotePhase(const GroupResult& g, const std::string& stage, const std::string& process,
               const DeviceUtilization& device, ProgramInfo* p) {
  for (const RankResult& r : g.ranks) {
    ProgramProcess pp;
    pp.stage = stage;
    pp.process = process;
    pp.rank = r.rank;
    pp.exit_code = r.exit_code;
    pp.signal = r.signal;
    pp.terminated = r.terminated;
    pp.wall_seconds = r.wall_seconds;
    pp.records = r.records;
    const auto steps = StepsOf(g, r.rank);
    if (!steps.empty()) {
      pp.first_step = steps.begin()->first;
      pp.last_step = steps.rbegin()->first;
    }
    pp.stderr_tail = TailLines(r.stderr_tail, 20, 4096);
    p->processes.push_back(pp);
    Log(stage + " " + process + " rank " + std::to_string(r.rank) + ": " +
        (r.signal ? "signal " + std::to_string(r.signal) : "exit " + std::to_string(r.exit_code)) + ", " +
        std::to_string(r.records) + " records, " + FormatFixed(r.wall_seconds, 1) + " s" +
        (r.terminated ? " (ended by the supervisor)" : ""));
  }
  if (!g.cpu_marks.empty()) {
    PhaseStart st;
    st.stage = stage;
    st.process = process;
    st.first_step = g.cpu_marks.front().step;
    st.seconds = g.cpu_marks.front().seconds;
    st.cpu_seconds = g.cpu_marks.front().cpu_seconds;
    // The marks of two consecutive steps (GroupSpec::cpu_mark_steps: the
    // reference's K and K+1) frame its save and one step.
    for (const CpuMark& a : g.cpu_marks) {
      for (const CpuMark& b : g.cpu_marks) {
        if (b.step == a.step + 1) st.save_step_cpu_seconds = std::max(0.0, b.cpu_seconds - a.cpu_seconds);
      }
    }
    p->starts.push_back(st);
  }
  if (g.busy_window_seconds > 0) {
    PhaseBusy b;
    b.stage = stage;
    b.process = process;
    b.seconds = g.busy_window_seconds;
    b.cpu_cores = g.busy_cpu_seconds / g.busy_window_seconds;
    b.steps = g.busy_steps;
    if (device) {
      if (std::optional<double> u = device(g.busy_from, g.busy_to)) b.device_utilization = *u;
    }
    p->busy.push_back(b);
    Log(stage + " " + process + ": " + FormatFixed(b.cpu_cores, 2) + " CPU cores" +
        (b.device_utilization >= 0 ? ", GPUs " + FormatFixed(b.device_utilization * 100, 0) + "% busy" : "") +
        " over " + FormatFixed(b.seconds, 1) + " s of steps");
  }
  for (const std::string& o : g.outlived) {
    p->outlived.push_back(stage + " " + process + ": " + o);
    Log(stage + " " + process + ": " + o + " outlived the phase: killed");
  }
}

void NoteReference(const GroupResult& ref, ProgramInfo* p, Versions* v, SingleStage* s) {
  p->memory_steps = MemorySteps(ref, 0);
  p->precision = PrecisionOf(ref, 0);
  s->shape.precision = PrecisionWord(p->precision);
  if (std::optional<ProgramEnvironment> env = EnvironmentOf(ref)) {
    p->environment = *env;
    v->torch = env->torch;
    v->cuda_runtime = !env->cuda.empty() ? env->cuda : env->hip;
    v->nccl = env->nccl;
    v->cudnn = env->cudnn;
    if (!env->gpu.empty()) {
      v->devices.assign(static_cast<size_t>(std::max<int64_t>(1, env->gpu_count)), env->gpu);
      if (s->device == "cuda") s->device_name = env->gpu;
    }
  }
  if (s->shape.params > 0) {
    // 6 FLOPs per parameter and token (forward and backward); the
    // attention's share is not known for a program.
    s->flops_per_token = 6.0 * static_cast<double>(s->shape.params);
    s->tflops = s->tokens_per_second * s->flops_per_token / 1e12;
  }
}

void NoteNodeReference(const GroupResult& ref, const launch::NodeLayout& layout, int64_t warmup_steps,
                       int64_t at_step, double single_tokens_per_second, NodeStage* n) {
  const int world = layout.world;
  double total_tps = 0;
  for (int rank = 0; rank < world; ++rank) {
    const auto steps = StepsOf(ref, rank);
    const Throughput t = ThroughputOf(steps, warmup_steps, at_step);
    NodeRankStats rs;
    rs.rank = rank;
    if (layout.AcrossNodes()) {
      // srun's block distribution: the first world/nodes ranks on the first node, and so on.
      rs.node_id = rank / layout.local_world;
      rs.host = layout.hosts[static_cast<size_t>(rs.node_id)];
    }
    rs.tokens_per_second = t.tokens_per_second;
    rs.step_ms = t.step_ms;
    rs.data_wait_ms = t.data_wait_ms;
    if (!steps.empty()) {
      rs.memory = NodeMemoryOf(steps.rbegin()->second);
      RaisePeak(&n->memory.fresh_peak_bytes, rs.memory->peak_allocated_bytes);
    }
    n->data_stall_ms_per_step = std::max(n->data_stall_ms_per_step, t.data_wait_ms);
    total_tps += t.tokens_per_second;
    n->ranks.push_back(rs);
  }
  for (const auto& [step, r] : StepsOf(ref, 0)) n->losses.push_back(r.loss);
  n->scaling.tokens_per_second = total_tps;
  n->scaling.tokens_per_second_per_rank = total_tps / world;
  if (single_tokens_per_second > 0) {
    n->scaling.single_tokens_per_second = single_tokens_per_second;
    n->scaling.efficiency = n->scaling.tokens_per_second_per_rank / single_tokens_per_second;
  }
}

void NoteNodeResumed(const GroupResult& resumed, NodeStage* n) {
  for (size_t rank = 0; rank < n->ranks.size(); ++rank) {
    const auto steps = StepsOf(resumed, static_cast<int>(rank));
    if (steps.empty()) continue;
    const NodeMemoryStats m = NodeMemoryOf(steps.begin()->second);
    n->ranks[rank].memory_resumed = m;
    RaisePeak(&n->memory.resumed_peak_bytes, m.peak_allocated_bytes);
  }
}

std::string RestoreDiagnosis(const std::vector<StateComponentDiff>& state, const GroupResult& resumed,
                             const RestoreHints& hints) {
  std::string out;
  if (const std::string d = StateDiagnosis(state); !d.empty()) out += "; " + d;
  // What the program itself printed about its resume (a framework's
  // warning that its data loader cannot resume mid-epoch).
  std::vector<std::string> said;
  for (const RankResult& r : resumed.ranks) {
    for (std::string& h : StderrHints(r.stderr_tail)) {
      if (std::find(said.begin(), said.end(), h) == said.end()) said.push_back(std::move(h));
    }
  }
  for (const std::string& h : said) out += "; " + h;
  if (hints.rewritten) {
    out += "; every checkpoint file changed after the reference passed step " + std::to_string(hints.at_step) +
           ": it saved again into the same files, so the resumed process may have restored a "
           "later step (save step K into a folder or file of its own)";
  }
  return out;
}

}  // namespace pilot::supervisor
