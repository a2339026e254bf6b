// Where and how the ranks of a node-stage phase start: one decision for
// both workloads. pilot-runner's node stage (runner/node/stage.cc) and the
// supervisor's phases of a user's program (supervisor/program/
// phase_layout.h) each fill a LayoutRequest from what they know (the
// config, the GPUs they see, the job's Slurm variables) and start what
// DecideNodeLayout returns:
//
//   builtin   parallel.launcher: "auto" is srun inside a Slurm job unless
//             pilot-runner's --nproc asks for a number of processes, else
//             local; srun reaches the job's SLURM_JOB_NUM_NODES nodes.
//   program   program.launcher "pilot": one process per rank on this node
//             (local), or, when the job has several nodes, one srun step of
//             a task per rank over all of them (srun); "none": one process
//             that starts its own workers (kProgramLauncher).
//
// The number of ranks is parallel.nproc, else DefaultNodeProcesses (one per
// GPU of each node the launcher reaches).
//
// Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

namespace pilot::launch {

// results.json's stages.node.launcher for a program that starts its own
// workers (program.launcher "none").
inline constexpr char kProgramLauncher[] = "program";

struct LayoutRequest {
  // The builtin's parallel.launcher ("auto", kSrun, kLocal), or a
  // program's program.launcher ("pilot", "none") when `program` is set.
  std::string launcher = "auto";
  bool program = false;
  int nproc = 0;           // parallel.nproc; 0: DefaultNodeProcesses
  int world_override = 0;  // pilot-runner --nproc (builtin); 0: none
  bool cuda = false;
  int visible_gpus = 0;
  int tasks_per_node = 0;     // SLURM_NTASKS_PER_NODE (0: unset)
  bool in_slurm_job = false;  // SLURM_JOB_ID is set
  int job_nodes = 0;          // SLURM_JOB_NUM_NODES (builtin; 0: unset)
  // The job's nodes, SLURM_JOB_NODELIST expanded (a program's ranks).
  std::vector<std::string> hosts;
};

struct NodeLayout {
  std::string kind;  // kLocal, kSrun or kProgramLauncher
  int world = 1;     // ranks
  // The builtin's data ranks (parallel.nproc, or its default): a --nproc
  // world divides them. A program's equal world.
  int data_ranks = 1;
  int nodes = 1;  // the nodes the ranks run on
  // Ranks across nodes (a program's srun step): the job's nodes, rank r on
  // hosts[r / local_world] (srun's block distribution). Empty on one node.
  std::vector<std::string> hosts;
  int local_world = 1;  // ranks on one node
  // Processes the launching side starts itself: one per rank (local), or
  // one (an srun step, or a program that starts its own workers).
  int processes = 1;

  bool AcrossNodes() const { return hosts.size() > 1; }
  // The ranks do not divide evenly over the nodes (a program across nodes).
  bool Uneven() const { return AcrossNodes() && world % static_cast<int>(hosts.size()) != 0; }
};

NodeLayout DecideNodeLayout(const LayoutRequest& r);

// The single stage's layout of `node`'s workload: one rank, one process,
// on this node, started the way `node` starts a rank (kind kLocal, or
// kProgramLauncher for a program that starts its own workers).
NodeLayout OneRankLayout(const NodeLayout& node);

}  // namespace pilot::launch
