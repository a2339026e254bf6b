#include "supervisor/program/phase_layout.h"

#include <algorithm>
#include <cstdlib>

#include "core/base/strings.h"
#include "core/records/hostlist.h"
#include "launch/container.h"
#include "launch/launcher.h"
#include "launch/spawn.h"
#include "launch/srun.h"
#include "supervisor/program/program_env.h"
#include "supervisor/workload_env.h"

namespace pilot::supervisor {
namespace {

int CountList(const std::string& list) {
  if (Trim(list).empty()) return 0;
  return static_cast<int>(std::count(list.begin(), list.end(), ',')) + 1;
}

// The argv of the one srun step that runs the layout's ranks over the
// job's nodes: each task sets torchrun's variables from srun's and,
// without a loss pattern, writes its records on its stdout (srun --label
// names the rank). In an image, pyxis's options on the step, or the step
// marked for each node's plugin (container_task.h); `env` is the step's.
std::vector<std::string> AcrossNodesStep(const PhaseLaunchInput& in, std::vector<std::string>* env,
                                         PhaseLaunch* out) {
  launch::SrunStep step;
  step.tasks = in.layout->world;
  step.nodes = static_cast<int>(in.layout->hosts.size());
  step.label = true;
  step.command = launch::TorchrunTaskCommand(in.cfg->program.command);
  if (in.container != nullptr && in.container->runtime == launch::kRuntimePyxis) {
    Result<std::vector<std::string>> flags = PyxisStep(*in.container, env);
    if (!flags.ok()) {
      out->problems.push_back(flags.status().ToString());
      return {"/bin/false"};
    }
    step.options = *std::move(flags);
  } else if (in.container != nullptr) {
    MarkContainerStep(*in.container, *in.cfg, env);
  }
  return launch::SrunStepArgv(step);
}

}  // namespace

ProgramPlacement PlaceProgram(const Config& cfg, const Lock& lock, const std::vector<std::string>& job_env) {
  ProgramPlacement p;
  // The lock's list (slurmd's, through the prolog); without one, the
  // job's CUDA_VISIBLE_DEVICES sets only how many ranks start.
  p.gpus = JobGpuList(lock, job_env);
  if (p.gpus.empty()) p.gpus = EnvValue(job_env, "CUDA_VISIBLE_DEVICES");
  const int gpu_count = CountList(p.gpus);
  p.device = cfg.training.device;
  if (p.device == "auto") p.device = gpu_count > 0 ? "cuda" : "cpu";
  launch::LayoutRequest r;
  r.program = true;
  r.launcher = cfg.program.launcher;
  r.nproc = cfg.parallel.nproc;
  r.cuda = p.device == "cuda";
  r.visible_gpus = gpu_count;
  r.tasks_per_node = std::atoi(EnvValue(job_env, "SLURM_NTASKS_PER_NODE").c_str());
  r.in_slurm_job = !EnvValue(job_env, "SLURM_JOB_ID").empty();
  Result<std::vector<std::string>> hosts = pilot::ExpandHostlist(EnvValue(job_env, "SLURM_JOB_NODELIST"));
  if (hosts.ok()) r.hosts = std::move(hosts).value();
  p.node = launch::DecideNodeLayout(r);
  p.single = launch::OneRankLayout(p.node);
  return p;
}

PhaseLaunch PhaseRanks(const PhaseLaunchInput& in) {
  PhaseLaunch out;
  const Config& cfg = *in.cfg;
  const launch::NodeLayout& layout = *in.layout;
  const bool across = layout.AcrossNodes();
  const int port = launch::FreePort();
  for (int rank = 0; rank < layout.processes; ++rank) {
    RankLaunch r;
    r.rank = rank;
    r.argv = cfg.program.command;
    ProgramEnvInput e;
    e.base_env = in.base_env;
    e.job_env = in.job_env;
    e.cfg = &cfg;
    e.probe_path = in.probe_path;
    e.stage = in.stage;
    e.process = in.process;
    e.device = in.device;
    e.rank = rank;
    e.local_rank = rank;
    e.world_size = layout.world;
    e.local_world_size = layout.local_world;
    if (across) e.master_addr = layout.hosts.front();
    e.master_port = port;
    e.metrics = !in.records ? "" : !across ? in.metrics_socket : in.loss_pattern ? "" : "stdout";
    e.checkpoint_dir = in.checkpoint_dir;
    e.resume_dir = in.resume_dir;
    e.resume_step = in.resume_step;
    e.seed = in.lock->seeds.training;
    e.tasks = across ? 0 : layout.processes;
    r.env = ProgramEnv(e);
    if (layout.world > 1 && EnvValue(in.job_env, "OMP_NUM_THREADS").empty()) {
      SetEnvValue(&r.env, "OMP_NUM_THREADS", "1");  // as torchrun: ranks share the cores
    }
    if (across) {
      r.srun_tasks = layout.world;
      r.argv = AcrossNodesStep(in, &r.env, &out);
    } else if (in.container != nullptr) {
      const std::string name = "pilot-" + std::to_string(in.lock->job.id) + "-" +
                               in.lock->instance.substr(0, 8) + "-" + in.stage + "-" + in.process +
                               "-" + std::to_string(rank);
      const Status wrapped = WrapInContainer(*in.container, name, &r);
      if (!wrapped.ok()) {
        out.problems.push_back(wrapped.ToString());
        r.argv = {"/bin/false"};  // the phase fails on its own exit status
      }
    }
    out.ranks.push_back(std::move(r));
  }
  out.description =
      (across ? std::to_string(layout.world) + " ranks on " + Join(layout.hosts, ",") + " through srun"
              : std::to_string(layout.processes) + " process" + (layout.processes > 1 ? "es" : "")) +
      " of " + Join(cfg.program.command, " ");
  return out;
}

}  // namespace pilot::supervisor
