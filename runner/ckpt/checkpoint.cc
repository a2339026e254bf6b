// Atomic checkpoint directories: save, verify-on-load, restore.
#include "runner/ckpt/checkpoint.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>

#include "core/base/atomic_file.h"
#include "core/base/crypto.h"
#include "runner/ckpt/dir_commit.h"
#include "runner/ckpt/safetensors.h"
#include "runner/train/device.h"

namespace pilot::runner {
namespace fs = std::filesystem;
namespace {

std::string Hex(const at::Tensor& bytes) {
  at::Tensor b = bytes.contiguous();
  static const char* kHex = "0123456789abcdef";
  const auto* p = b.data_ptr<uint8_t>();
  std::string s;
  s.reserve(static_cast<size_t>(b.numel()) * 2);
  for (int64_t i = 0; i < b.numel(); ++i) {
    s += kHex[p[i] >> 4];
    s += kHex[p[i] & 15];
  }
  return s;
}

Result<at::Tensor> Unhex(const std::string& s, const std::string& what) {
  if (s.size() % 2) return Status::Corrupt(what, "odd hex length");
  at::Tensor t = at::empty({static_cast<int64_t>(s.size() / 2)}, at::kByte);
  auto* p = t.data_ptr<uint8_t>();
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); i += 2) {
    int hi = nib(s[i]), lo = nib(s[i + 1]);
    if (hi < 0 || lo < 0) return Status::Corrupt(what, "not hex");
    p[i / 2] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return t;
}

std::map<std::string, at::Tensor> ByName(const NamedTensors& list) {
  std::map<std::string, at::Tensor> m;
  for (const auto& [n, t] : list) m.emplace(n, t);
  return m;
}

}  // namespace

std::string RestoreSkips::Describe() const {
  std::string s;
  if (optimizer) s += "optimizer";
  if (rng) s += s.empty() ? "rng" : ",rng";
  if (data) s += s.empty() ? "data" : ",data";
  return s;
}

RestoreSkips RestoreSkips::FromEnv() {
  RestoreSkips k;
  const char* v = std::getenv("PILOT_RUNNER_TEST_SKIP_RESTORE");
  if (!v) return k;
  std::string s = v;
  k.optimizer = s.find("optimizer") != std::string::npos;
  k.rng = s.find("rng") != std::string::npos;
  k.data = s.find("data") != std::string::npos;
  return k;
}

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::string OptimFileName(const std::string& state) { return "optim-" + state + ".safetensors"; }

SaveRoom RoomAfterSave(const CheckpointConfig& c, const std::string& out, int64_t after_bytes) {
  SaveRoom room;
  room.root_label = c.dir.empty() ? "--out" : "checkpoint.dir";
  room.after = {{out, "--out", after_bytes + kResultsReserveBytes, "the rest of the run"}};
  return room;
}

int64_t CheckpointBytesBound(const std::vector<NamedTensors>& files) {
  int64_t total = kCheckpointMetaBytes;
  for (const NamedTensors& f : files) {
    int64_t data = 0, names = 0;
    for (const auto& [name, t] : f) {
      data += static_cast<int64_t>(t.nbytes());
      names += static_cast<int64_t>(name.size());
    }
    total += SafetensorsFileBound(data, static_cast<int64_t>(f.size()), names);
  }
  return total;
}

Result<CheckpointIo> SaveCheckpoint(const std::string& root, const Model& model,
                                    Optimizer& optim, const TrainState& state, int keep,
                                    const SaveRoom& room) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string name = StepDirName(state.step);
  PILOT_ASSIGN_OR_RETURN(StagedDir dir, StagedDir::Begin(root, name, "." + name + ".tmp-" + std::to_string(::getpid())));
  const std::string& tmp = dir.path();

  // One writer per tensor file, concurrently.
  const NamedTensors& params = model.Parameters();
  struct Job {
    std::string file;
    NamedTensors tensors;
    std::map<std::string, std::string> meta;
  };
  std::vector<Job> jobs;
  jobs.push_back({"model.safetensors", params, {{"format", "pt"}, {"step", std::to_string(state.step)}}});
  for (const std::string& st : optim.StateNames()) {
    Job j{OptimFileName(st), {}, {{"format", "pt"}, {"step", std::to_string(optim.step())},
                                  {"state", st}, {"optimizer", optim.kind()}}};
    for (size_t i = 0; i < params.size(); ++i) j.tensors.emplace_back(params[i].first, optim.State(i, st));
    jobs.push_back(std::move(j));
  }
  // Measured once the directory exists and a stale temp of this name is
  // gone; nothing is written when it does not fit.
  std::vector<NamedTensors> files;
  for (const Job& j : jobs) files.push_back(j.tensors);
  std::vector<SpaceNeed> needs = {{root, room.root_label, CheckpointBytesBound(files), "the checkpoint"}};
  needs.insert(needs.end(), room.after.begin(), room.after.end());
  if (Status fits = CheckFreeSpace("checkpoint", needs); !fits.ok()) {
    dir.Abort();
    return fits;
  }
  // Any throw from here on (a device error, no thread to write with)
  // takes the temp directory with it before it goes on.
  Manifest man;
  try {
    Synchronize(params.empty() ? at::Device(at::kCPU) : params[0].second.device());
    std::vector<std::future<Result<FileDigest>>> futs;
    for (const Job& j : jobs) {
      futs.push_back(std::async(std::launch::async, [&tmp, &j] {
        try {
          return WriteSafetensors(tmp + "/" + j.file, j.tensors, j.meta);
        } catch (const std::exception& e) {
          return Result<FileDigest>(Status::IoError(tmp + "/" + j.file, e.what()));
        } catch (...) {
          return Result<FileDigest>(Status::IoError(tmp + "/" + j.file, "unknown exception while writing"));
        }
      }));
    }
    Status first_error;
    for (size_t i = 0; i < jobs.size(); ++i) {
      Result<FileDigest> d = futs[i].get();
      if (!d.ok()) {
        if (first_error.ok()) first_error = d.status();
        continue;
      }
      man.files.push_back({jobs[i].file, d->bytes, d->sha256});
    }
    if (!first_error.ok()) {
      dir.Abort();
      return first_error;
    }
  } catch (...) {
    dir.Abort();
    throw;
  }
  const std::string state_text = CheckpointStateToJson(state);
  Status written = WriteFileAtomic(tmp + "/state.json", state_text);
  man.files.push_back({"state.json", static_cast<int64_t>(state_text.size()), Sha256Hex(state_text)});
  man.step = state.step;
  if (written.ok()) written = WriteFileAtomic(tmp + "/" + kManifestFileName, CheckpointManifestToJson(man));
  if (!written.ok()) {
    dir.Abort();
    return written;
  }
  PILOT_RETURN_IF_ERROR(dir.Commit("step " + std::to_string(state.step) + "\n"));

  CheckpointIo io;
  io.path = dir.final_path();
  for (const auto& f : man.files) io.bytes += f.bytes;
  io.seconds = SecondsSince(t0);

  // Keep the newest `keep` complete checkpoints.
  std::error_code ec;
  std::vector<std::string> steps;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && fs::exists(e.path() / "COMPLETE", ec)) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; keep > 0 && i + keep < steps.size(); ++i) fs::remove_all(root + "/" + steps[i], ec);
  return io;
}

Result<Manifest> ReadManifest(const std::string& dir) {
  const std::string path = dir + "/" + kManifestFileName;
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxCheckpointMetaBytes));
  return ParseCheckpointManifest(text, path);
}

Result<TrainState> ReadTrainState(const std::string& dir) {
  const std::string path = dir + "/state.json";
  PILOT_ASSIGN_OR_RETURN(std::string text, ReadFileLimited(path, kMaxCheckpointMetaBytes));
  return ParseCheckpointState(text, path);
}

Status RequireCommitted(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir + "/" + kCompleteMarker, ec)) {
    return Status::NotFound(dir, "no COMPLETE marker: the checkpoint was never committed");
  }
  return Status::Ok();
}

Status ApplySavedDepth(const TrainState& ts, const std::string& dir, Config* cfg) {
  if (!ts.model.layers) return Status::Ok();
  if (*ts.model.layers < 1 || *ts.model.layers > cfg->model.layers) {
    return Status::Corrupt(dir + "/state.json", "model.layers " + std::to_string(*ts.model.layers) +
                                                    " outside 1.." + std::to_string(cfg->model.layers) +
                                                    " (the config's)");
  }
  cfg->model.layers = *ts.model.layers;
  return Status::Ok();
}

Result<TrainState> LoadCheckpoint(const std::string& dir, Model* model, Optimizer* optim,
                                  const RestoreSkips& skips, CheckpointIo* io) {
  const auto t0 = std::chrono::steady_clock::now();
  PILOT_RETURN_IF_ERROR(RequireCommitted(dir));
  PILOT_ASSIGN_OR_RETURN(Manifest man, ReadManifest(dir));
  PILOT_ASSIGN_OR_RETURN(TrainState state, ReadTrainState(dir));
  std::map<std::string, const ManifestFile*> listed;
  for (const auto& f : man.files) listed[f.name] = &f;

  const NamedTensors& params = model->Parameters();
  struct Job {
    std::string file;
    std::map<std::string, at::Tensor> dst;
  };
  std::vector<Job> jobs;
  jobs.push_back({"model.safetensors", ByName(params)});
  if (!skips.optimizer) {
    for (const std::string& st : optim->StateNames()) {
      Job j{OptimFileName(st), {}};
      for (size_t i = 0; i < params.size(); ++i) j.dst.emplace(params[i].first, optim->State(i, st));
      jobs.push_back(std::move(j));
    }
  }
  for (const Job& j : jobs) {
    if (!listed.count(j.file)) return Status::Corrupt(dir + "/manifest.json", "does not list " + j.file);
  }
  std::vector<std::future<Result<FileDigest>>> futs;
  for (const Job& j : jobs) {
    futs.push_back(std::async(std::launch::async, [&dir, &j] {
      try {
        return LoadSafetensors(dir + "/" + j.file, j.dst);
      } catch (const std::exception& e) {
        return Result<FileDigest>(Status::IoError(j.file, e.what()));
      }
    }));
  }
  Status first_error;
  int64_t bytes = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Result<FileDigest> d = futs[i].get();
    if (!d.ok()) {
      if (first_error.ok()) first_error = d.status();
      continue;
    }
    const ManifestFile& want = *listed[jobs[i].file];
    if (d->sha256 != want.sha256 || d->bytes != want.bytes) {
      if (first_error.ok()) {
        first_error = Status::Corrupt(dir + "/" + jobs[i].file,
                                      "sha256 " + d->sha256 + " does not match the manifest's " + want.sha256);
      }
    }
    bytes += d->bytes;
  }
  PILOT_RETURN_IF_ERROR(first_error);
  if (skips.optimizer) {
    optim->Reset();
  } else {
    optim->SetStep(state.step);
  }
  if (!skips.rng) {
    PILOT_ASSIGN_OR_RETURN(at::Tensor cpu, Unhex(state.rng.cpu, dir + "/state.json: rng.cpu"));
    at::Generator gen = at::globalContext().defaultGenerator(at::Device(at::kCPU));
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(cpu);
    }
    if (!state.rng.cuda.empty() && CudaAvailable()) {
      PILOT_ASSIGN_OR_RETURN(at::Tensor g, Unhex(state.rng.cuda, dir + "/state.json: rng.cuda"));
      at::Generator cg = at::globalContext().defaultGenerator(at::Device(at::kCUDA, 0));
      std::lock_guard<std::mutex> lock(cg.mutex());
      cg.set_state(g);
    }
  }
  if (skips.data) state.data.next_index = 0;
  Synchronize(params.empty() ? at::Device(at::kCPU) : params[0].second.device());
  if (io) {
    io->path = dir;
    io->bytes = bytes;
    io->seconds = SecondsSince(t0);
  }
  return state;
}

std::string CaptureCpuRng() {
  at::Generator gen = at::globalContext().defaultGenerator(at::Device(at::kCPU));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return Hex(gen.get_state());
}

std::string CaptureCudaRng() {
  if (!CudaAvailable()) return "";
  at::Generator gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, 0));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return Hex(gen.get_state());
}

}  // namespace pilot::runner
