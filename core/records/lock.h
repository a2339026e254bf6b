// lock.json: what the prolog pinned for a pilot job, before the job ran.
//
// Written by pilot-prolog (root) into <state_dir>/jobs/<jobid>/lock.json,
// read by the runner (which re-checks the hashes), the epilog and Decide().
// The format is documented field by field in docs/formats.md and
// pilot-files(5). Problems found while pinning (a user's mistake: registry
// unreachable, file missing, config changed) are recorded in `problems`
// instead of failing the prolog; each one makes the verdict NO-GO.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/base/rfc3339.h"
#include "core/base/status.h"

namespace pilot {

inline constexpr char kLockSchema[] = "slurm-pilot/lock/1";
inline constexpr size_t kMaxLockBytes = 4u << 20;  // 4 MiB

struct LockJob {
  int64_t id = 0;    // Slurm job id
  std::string user;  // user name
  uint32_t uid = 0;
  uint32_t gid = 0;
  int nodes = 1;           // nodes allocated
  std::string node_list;   // Slurm hostlist expression, e.g. "gpu[01-04]"
  std::string host;        // node that wrote this lock
  std::string submit_dir;  // SLURM_SUBMIT_DIR
  // The job's GPUs on this node by node-wide index, as slurmd gave them to
  // the prolog (SLURM_JOB_GPUS, "0,3"; "" = none allocated through GRES):
  // root's word, unlike the job's own environment, which --export sets.
  // The supervisor samples these GPUs. nullopt: a lock written before the
  // field existed.
  std::optional<std::string> gpus = std::nullopt;
};

struct LockConfig {
  std::string path;              // absolute path given at submit
  std::string copy;              // the prolog's copy (used by the runner)
  std::string sha256_submitted;  // recorded by the plugin at submit
  std::string sha256_copied;     // of the copy the prolog made
};

struct LockSeeds {
  int64_t training = 0;  // seed the runner uses
  std::string source;    // "config" (training.seed) | "job_id" (derived)
};

struct LockContainer {
  std::string reference;  // as written ("" when the job uses no container)
  std::string digest;     // "sha256:<hex>" ("" when not pinned)
  std::string pinned;     // "registry/repo@sha256:<hex>" or the file path
  std::string method;     // "registry" | "file" | "none"
};

struct LockFile {
  std::string role;  // "init_weights" | "train" | "eval"
  std::string path;
  std::string sha256_expected;  // from the config; "" = not given
  std::string sha256_actual;    // measured by the prolog; "" = unreadable
  int64_t bytes = 0;
};

// One entry of the run identity beyond the config, container and files:
// a program.pin file or folder, or a Hugging Face hub cache revision
// (job/pins.h computes them; pilot-files(5) documents the fields).
struct LockPin {
  std::string kind;    // "file" | "folder" | "hub_model" | "hub_dataset"
  std::string name;    // as the config names it: "train.py", "configs/", "org/name@main"
  std::string path;    // absolute: the file, folder or the cache's snapshot folder
  // A file's sha256; a folder's or snapshot's: sha256 over its files'
  // sorted "relative-path sha256" lines ("" when it could not be pinned).
  std::string sha256;
  int64_t files = 0;  // regular files hashed
  int64_t bytes = 0;  // their bytes
  // git: HEAD's commit of the work tree holding a file or folder; hub: the
  // commit the revision resolved to. "" = none.
  std::string commit;
  // git only: a pinned file differs from the work tree's index or is not in
  // it ("yes" | "no" | "" unknown or not in a work tree).
  std::string dirty;
  std::string error;  // why it could not be pinned ("" = pinned)
};

// The run identity: what the long run must be to be the piloted one.
// `sha256` is that of `lines`, each ending in '\n' (RunIdentity below).
struct LockIdentity {
  std::string sha256;
  std::vector<std::string> lines;  // "config sha256:...", "pin train.py sha256:...", ...
};
// Its field list (core/records/record.h) here, since the verdict carries it too.
template <class V, class S>
void Fields(V& v, S& s, std::type_identity<LockIdentity>) {
  v("sha256", s.sha256);
  v("lines", s.lines);
}

struct LockGpu {
  int index = 0;
  std::string name;  // e.g. "NVIDIA H200"
  std::string uuid;
  int64_t memory_bytes = 0;
};

struct LockProblem {
  std::string code;    // stable identifier, e.g. "container_unresolved"
  std::string detail;  // sentence for people
};

struct Lock {
  std::string schema = kLockSchema;
  // This start of the job: 32 hex characters the prolog draws at random.
  // A requeued job, or a job id Slurm hands out again, is a new instance;
  // results and verdicts name the instance they belong to.
  std::string instance;
  LockJob job;
  LockConfig config;
  LockSeeds seeds;
  LockContainer container;
  std::vector<LockFile> files;
  // program.pin and the hub revisions, pinned by the prolog as the user.
  std::vector<LockPin> pins;
  // What the plugin pinned at submit (PinSummary below: "train.py" ->
  // "sha256 <hex>"); unset when the plugin recorded nothing.
  std::optional<std::map<std::string, std::string>> pins_submitted;
  std::optional<LockIdentity> identity;
  // Dependency versions. Well-known keys: runner, libtorch, cuda_runtime,
  // cuda_driver, cudnn, nccl, rocm, slurm, os, kernel; others are allowed.
  std::map<std::string, std::string> versions;
  std::vector<LockGpu> gpus;
  std::vector<LockProblem> problems;
  std::string created;  // RFC 3339 UTC, e.g. "2026-11-30T04:05:06Z"
};

// Pretty JSON (2-space indent, sorted keys) ending in a newline.
std::string LockToJson(const Lock& lock);
// Strict parse of at most kMaxLockBytes. `label` names the input in errors
// (default "lock.json"). Errors: kCorrupt naming the field path.
Result<Lock> ParseLock(std::string_view text, const std::string& label = "lock.json");
// ReadFileLimited + ParseLock (label = the path).
Result<Lock> ReadLock(const std::string& path);

// A list of pins alone, as the prolog's child that reads as the user
// returns it: a JSON array of the lock's "pins" members. Errors: kCorrupt.
std::string LockPinsToJson(const std::vector<LockPin>& pins);
Result<std::vector<LockPin>> ParseLockPins(std::string_view text, const std::string& label);

// The comparable summary of pins: "train.py" -> "sha256 <hex>", and where
// a commit was read "train.py (git HEAD)" -> "<commit>" and "train.py (git
// dirty)" -> "yes"/"no"; "hub model org/name@main" -> "<commit>" and "hub
// model org/name@main (files)" -> "sha256 <hex>". An entry with an error
// reads "error: ...".
std::map<std::string, std::string> PinSummary(const std::vector<LockPin>& pins);
// One sentence per entry of `now` or `submitted` that differs, e.g.
// "train.py: sha256 3f2a9c0d1e2f..., at submit 9b1c0a7e6d5c...".
std::vector<std::string> MovedPins(const std::map<std::string, std::string>& submitted,
                                   const std::map<std::string, std::string>& now);

// The run identity of `lock`: one line per part, in this order,
//   config sha256:<hex>
//   container <digest> | container none
//   file <role> <path> sha256:<hex>            (lock.files)
//   pin <name> sha256:<hex> [commit <hex>] [dirty]   (lock.pins, by name)
//   hub_model|hub_dataset <name> commit <hex> sha256:<hex>
//   nodes <N>
// and the sha256 of those lines, each ending in '\n'. The shape is the config's
// (its sha256), the node count the job's.
LockIdentity RunIdentity(const Lock& lock);

}  // namespace pilot
