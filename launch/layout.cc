#include "launch/layout.h"

#include <algorithm>

#include "launch/launcher.h"

namespace pilot::launch {

NodeLayout DecideNodeLayout(const LayoutRequest& r) {
  NodeLayout l;
  if (r.program) {
    // A program that starts its own workers runs on this node only.
    if (r.launcher != "none" && r.hosts.size() > 1) l.hosts = r.hosts;
    l.kind = r.launcher == "none" ? kProgramLauncher : l.AcrossNodes() ? kSrun : kLocal;
    l.nodes = std::max<int>(1, static_cast<int>(l.hosts.size()));
  } else {
    l.kind = LauncherKind(r.launcher, r.world_override, r.in_slurm_job);
    // srun reaches every node of the job.
    l.nodes = l.kind == kSrun ? std::max(1, r.job_nodes) : 1;
  }
  l.data_ranks = r.nproc > 0 ? r.nproc
                             : DefaultNodeProcesses(r.cuda, r.visible_gpus, r.tasks_per_node, l.nodes);
  l.world = !r.program && r.world_override > 0 ? r.world_override : l.data_ranks;
  l.local_world = l.AcrossNodes() ? l.world / static_cast<int>(l.hosts.size()) : l.world;
  l.processes = l.kind == kLocal ? l.world : 1;
  return l;
}

NodeLayout OneRankLayout(const NodeLayout& node) {
  NodeLayout l;
  l.kind = node.kind == kProgramLauncher ? kProgramLauncher : kLocal;
  return l;
}

}  // namespace pilot::launch
