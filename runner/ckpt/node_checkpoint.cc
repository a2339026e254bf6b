// Sharded checkpoints of the node stage.
#include "runner/ckpt/node_checkpoint.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/base/atomic_file.h"
#include "core/base/json_util.h"
#include "runner/ckpt/checkpoint.h"
#include "runner/ckpt/dir_commit.h"
#include "runner/ckpt/safetensors.h"

namespace pilot::runner {
namespace fs = std::filesystem;
namespace {

using json = nlohmann::json;

std::string ShardName(const std::string& kind, int rank, int world) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s-rank%05d-of-%05d.safetensors", kind.c_str(), rank, world);
  return buf;
}

// Every rank's files are the same size (chunks of ceil(numel / world)
// float32 elements): the whole checkpoint is world times one rank's.
int64_t NodeCheckpointBytesBound(NodeEngine& e, int world) {
  int64_t data = 0, names = 0;
  const NamedTensors& ps = e.Parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    data += e.Chunk(i) * static_cast<int64_t>(sizeof(float));
    names += static_cast<int64_t>(ps[i].first.size());
  }
  const auto files = static_cast<int64_t>(1 + e.optim().StateNames().size());
  return static_cast<int64_t>(world) * files * SafetensorsFileBound(data, static_cast<int64_t>(ps.size()), names) +
         kCheckpointMetaBytes;
}

}  // namespace

Result<NodeCheckpointIo> SaveNodeCheckpoint(const std::string& root, NodeEngine& e, Comm& comm,
                                            const NodeCheckpointInfo& info, const SaveRoom& room) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string step_name = StepDirName(info.step);
  const std::string final_dir = root + "/" + step_name;
  const std::string tmp = root + "/." + step_name + ".tmp";
  const std::string key = "ckpt/" + std::to_string(info.step) + "/";
  // Rank 0 stages and commits the directory; every rank writes into it.
  std::optional<StagedDir> staged;
  Status ready;  // rank 0's: the directory made and the room checked
  if (comm.rank() == 0) {
    Result<StagedDir> d = StagedDir::Begin(root, step_name, "." + step_name + ".tmp");
    ready = d.status();
    if (d.ok()) {
      staged.emplace(std::move(d).value());
      // All ranks' files share root's filesystem: rank 0 checks their sum.
      std::vector<SpaceNeed> needs = {
          {root, room.root_label, NodeCheckpointBytesBound(e, comm.world()), "the checkpoint"}};
      needs.insert(needs.end(), room.after.begin(), room.after.end());
      ready = CheckFreeSpace("checkpoint", needs);
      if (!ready.ok()) staged->Abort();
    }
    comm.StoreSet(key + "dir", ready.ok() ? "ok" : "error: " + ready.Message());
  }
  const std::string dir_state = comm.StoreGet(key + "dir");
  if (dir_state != "ok") {
    if (comm.rank() == 0) return ready;  // with its hint
    return Status::IoError(tmp, "rank 0: " + dir_state.substr(dir_state.rfind("error: ", 0) == 0 ? 7 : 0));
  }
  NodeCheckpointIo io;
  json files = json::array();
  std::map<std::string, std::string> meta = {{"step", std::to_string(info.step)},
                                             {"rank", std::to_string(comm.rank())},
                                             {"world_size", std::to_string(comm.world())}};
  auto write = [&](const std::string& kind, const NamedTensors& t) -> Status {
    const std::string name = ShardName(kind, comm.rank(), comm.world());
    PILOT_ASSIGN_OR_RETURN(FileDigest d, WriteSafetensors(tmp + "/" + name, t, meta));
    io.bytes += d.bytes;
    files.push_back({{"name", name}, {"rank", comm.rank()}, {"bytes", d.bytes}, {"sha256", d.sha256}});
    return Status::Ok();
  };
  Status st = write("model", e.ParamShard());
  for (const auto& [state, tensors] : e.StateShard()) {
    if (st.ok()) st = write("optim-" + state, tensors);
  }
  comm.StoreSet(key + std::to_string(comm.rank()), st.ok() ? DumpJson(files) : "error: " + st.ToString());
  if (comm.rank() == 0) {
    // manifest.json: core's record (core/records/checkpoint_meta.h).
    NodeCheckpointManifest m;
    std::string failed;
    for (int r = 0; r < comm.world(); ++r) {
      const std::string v = comm.StoreGet(key + std::to_string(r));
      if (v.rfind("error: ", 0) == 0) {
        failed = "rank " + std::to_string(r) + ": " + v.substr(7);
        continue;
      }
      for (const auto& f : json::parse(v)) {
        m.files.push_back({f.at("name").get<std::string>(), f.at("rank").get<int>(),
                           f.at("bytes").get<int64_t>(), f.at("sha256").get<std::string>()});
      }
    }
    const NamedTensors& ps = e.Parameters();
    for (size_t i = 0; i < ps.size(); ++i) {
      m.params.push_back({ps[i].first, e.Shape(i), e.Numel(i), e.Chunk(i)});
    }
    Status commit = failed.empty() ? Status::Ok() : Status::IoError("checkpoint", failed);
    if (commit.ok()) {
      m.step = info.step;
      m.world_size = comm.world();
      m.data_ranks = info.data_ranks;
      m.mode = info.mode;
      m.seed = info.seed;
      m.optimizer = e.optim().kind();
      m.optimizer_step = e.optim().step();
      m.states = e.optim().StateNames();
      commit = WriteFileAtomic(tmp + "/manifest.json", NodeCheckpointManifestToJson(m));
    }
    if (commit.ok()) {
      commit = staged->Commit("");
    } else {
      staged->Abort();
    }
    comm.StoreSet(key + "commit", commit.ok() ? "ok" : commit.ToString());
  }
  const std::string committed = comm.StoreGet(key + "commit");
  PILOT_RETURN_IF_ERROR(st);
  if (committed != "ok") return Status::IoError(final_dir, committed);
  io.path = final_dir;
  io.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return io;
}

namespace {

Result<NodeCheckpointManifest> ReadManifestRecord(const std::string& dir) {
  if (!fs::exists(dir + "/COMPLETE")) {
    return Status::NotFound(dir, "no COMPLETE: the checkpoint was not committed");
  }
  const std::string path = dir + "/manifest.json";
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxNodeManifestBytes));
  return ParseNodeCheckpointManifest(text, path);
}

}  // namespace

Result<NodeCheckpointInfo> ReadNodeManifest(const std::string& dir) {
  PILOT_ASSIGN_OR_RETURN(NodeCheckpointManifest m, ReadManifestRecord(dir));
  NodeCheckpointInfo info;
  info.step = m.step;
  info.world_size = m.world_size;
  info.data_ranks = m.data_ranks;
  info.mode = m.mode;
  info.seed = m.seed;
  info.optimizer_step = m.optimizer_step;
  return info;
}

Result<NodeCheckpointIo> LoadNodeCheckpoint(const std::string& dir, NodeEngine& e, NodeCheckpointInfo* info) {
  const auto t0 = std::chrono::steady_clock::now();
  PILOT_ASSIGN_OR_RETURN(NodeCheckpointManifest m, ReadManifestRecord(dir));
  PILOT_ASSIGN_OR_RETURN(*info, ReadNodeManifest(dir));
  const int world = info->world_size;
  if (world < 1) return Status::Corrupt(dir + "/manifest.json", "world_size < 1");
  std::map<std::string, std::pair<int64_t, std::string>> digest;  // name -> (bytes, sha256)
  for (const NodeShardFile& f : m.files) digest[f.name] = {f.bytes, f.sha256};
  NodeCheckpointIo io;
  // kind -> parameter -> chunks of every rank
  auto load_kind = [&](const std::string& kind, std::map<std::string, at::Tensor>* whole) -> Status {
    std::map<std::string, std::vector<at::Tensor>> parts;
    for (int r = 0; r < world; ++r) {
      const std::string name = ShardName(kind, r, world);
      const std::string path = dir + "/" + name;
      auto d = digest.find(name);
      if (d == digest.end()) return Status::Corrupt(dir + "/manifest.json", "does not list " + name);
      std::map<std::string, at::Tensor> dst;
      for (const NodeParamSlot& p : m.params) {
        at::Tensor t = at::empty({p.chunk}, at::kFloat);
        dst[p.name] = t;
        parts[p.name].push_back(t);
      }
      PILOT_ASSIGN_OR_RETURN(FileDigest got, LoadSafetensors(path, dst));
      if (got.bytes != d->second.first || got.sha256 != d->second.second) {
        return Status::Corrupt(path, "size or sha256 differs from manifest.json")
            .WithHint("the checkpoint was damaged after it was written");
      }
      io.bytes += got.bytes;
    }
    for (const NodeParamSlot& p : m.params) {
      at::Tensor flat = at::cat(parts[p.name]).narrow(0, 0, p.numel);
      (*whole)[p.name] = flat.view(p.shape);
    }
    return Status::Ok();
  };
  std::map<std::string, at::Tensor> params;
  PILOT_RETURN_IF_ERROR(load_kind("model", &params));
  std::map<std::string, std::map<std::string, at::Tensor>> states;
  for (const std::string& st : m.states) {
    PILOT_RETURN_IF_ERROR(load_kind("optim-" + st, &states[st]));
  }
  PILOT_RETURN_IF_ERROR(e.LoadFull(params, states, info->optimizer_step));
  io.path = dir;
  io.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return io;
}

}  // namespace pilot::runner
