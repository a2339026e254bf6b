// Training and eval batches.
//
// Every batch is a pure function of (seed, step, rank): a resumed process
// that asks for step 41 gets exactly the tokens the reference process got,
// with no loader state to carry. Formats:
//   random  tokens drawn from a CPU generator seeded by a hash of
//           (seed, step, rank) - no files;
//   u16/u32 flat little-endian token arrays, memory-mapped; row b of a batch
//           is a window of T+1 tokens starting at hash(seed, step, rank, b).
// When data.eval is empty the last 5% of the train file is held out for eval
// (and never used for training).
//
// A token file is hashed (sha256) before use and compared with the pinned
// value; a mismatch is an error naming the file.
//
// Thread-safety: TokenSource is immutable after Open and safe to call from
// several threads; Loader is driven by one consumer thread.
#pragma once

#include <ATen/ATen.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/config/config.h"
#include "core/base/status.h"

namespace pilot::runner {

struct Batch {
  int64_t index = 0;  // micro-batch index: step * grad_accum + micro
  at::Tensor x;       // (B, T) int64 inputs
  at::Tensor y;       // (B, T) int64 targets (x shifted by one)
};

class TokenSource {
 public:
  // Hashes and maps the files named in `data` (random: nothing to open).
  // `train_sha256`/`eval_sha256` override the config's pinned hashes (from
  // the lock) when non-empty.
  // Errors: kNotFound, kIoError, kCorrupt (sha256 mismatch, naming the
  // file), kInvalid (file too short for one window, size not a multiple of
  // the token width, token id >= vocab found in a batch).
  static Result<std::shared_ptr<TokenSource>> Open(const DataConfig& data, int vocab,
                                                   int seq_len, int micro_batch, uint64_t seed,
                                                   int rank, std::string train_sha256 = {},
                                                   std::string eval_sha256 = {});
  ~TokenSource();

  // The same data at another micro-batch: the same files (not hashed or
  // mapped again), seed and rank, so batch `index` is again a pure function
  // of (seed, index, rank) at that shape. Keeps `base` and its maps alive.
  static std::shared_ptr<TokenSource> WithMicroBatch(std::shared_ptr<const TokenSource> base,
                                                     int micro_batch);

  // Micro-batch `index` of training, on the CPU (pinned when `pin`).
  Result<Batch> Train(int64_t index, bool pin) const;
  // Eval micro-batch `i` (0 <= i < eval batches); the same every call.
  Result<Batch> Eval(int64_t i, bool pin) const;

  int64_t train_tokens() const { return train_len_; }

 private:
  TokenSource() = default;
  Result<Batch> Window(int64_t index, bool eval, bool pin) const;

  DataConfig cfg_;
  int vocab_ = 0, seq_len_ = 0, micro_batch_ = 0, rank_ = 0;
  uint64_t seed_ = 0;
  int width_ = 0;  // bytes per token (0 = random)
  // Memory maps of train and (optional) eval files.
  void* train_map_ = nullptr;
  size_t train_map_len_ = 0;
  void* eval_map_ = nullptr;
  size_t eval_map_len_ = 0;
  int64_t train_len_ = 0;  // tokens usable for training
  int64_t eval_begin_ = 0, eval_len_ = 0;  // eval range (in eval map or train tail)
  // Set for a view made by WithMicroBatch: the maps belong to `owner_`.
  std::shared_ptr<const TokenSource> owner_;
};

// Prefetches training micro-batches [first, last) on `threads` producer
// threads, at most `prefetch` ahead of the consumer, and moves them to the
// device in Next(). The time Next() blocks is the data-loading stall.
class Loader {
 public:
  Loader(std::shared_ptr<const TokenSource> source, int64_t first, int64_t last, int threads,
         int prefetch, const at::Device& device);
  ~Loader();  // stops and joins the producers
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next micro-batch in order, on the device; `wait_ms` receives the
  // time spent blocked. Errors: whatever the source reported.
  Result<Batch> Next(double* wait_ms);

 private:
  void Produce(int worker);

  std::shared_ptr<const TokenSource> source_;
  int64_t next_, last_;
  int threads_, prefetch_;
  at::Device device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Result<Batch>> ready_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// splitmix64 of a sequence of words: the batch seeds.
uint64_t MixSeed(std::initializer_list<uint64_t> words);

}  // namespace pilot::runner
