// Batches as pure functions of (seed, step, rank), and the prefetching loader.
#include "runner/train/data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cstring>

#include "core/base/crypto.h"

namespace pilot::runner {
namespace {

constexpr uint64_t kEvalTag = 0x6576616c;  // "eval"

Status MapFile(const std::string& path, void** map, size_t* len) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path, "no such file");
    return Status::IoError(path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::IoError(path, "not a regular file");
  }
  *len = static_cast<size_t>(st.st_size);
  *map = nullptr;
  if (*len > 0) {
    void* p = ::mmap(nullptr, *len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Status::IoError(path, std::string("mmap: ") + std::strerror(errno));
    }
    *map = p;
  }
  ::close(fd);
  return Status::Ok();
}

Status CheckSha(const std::string& path, const std::string& want, const std::string& key) {
  if (want.empty()) return Status::Ok();
  PILOT_ASSIGN_OR_RETURN(std::string got, Sha256File(path));
  if (got != want) {
    return Status::Corrupt(path, "sha256 " + got + " does not match the pinned " + want + " (" +
                                     key + ")")
        .WithHint("the file changed since it was pinned; restore it or pin the new hash");
  }
  return Status::Ok();
}

}  // namespace

uint64_t MixSeed(std::initializer_list<uint64_t> words) {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint64_t w : words) {
    h ^= w + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    // splitmix64 finaliser
    h += 0x9e3779b97f4a7c15ull;
    uint64_t z = h;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    h = z ^ (z >> 31);
  }
  return h;
}

Result<std::shared_ptr<TokenSource>> TokenSource::Open(const DataConfig& data, int vocab,
                                                       int seq_len, int micro_batch,
                                                       uint64_t seed, int rank,
                                                       std::string train_sha256,
                                                       std::string eval_sha256) {
  std::shared_ptr<TokenSource> s(new TokenSource());
  s->cfg_ = data;
  s->vocab_ = vocab;
  s->seq_len_ = seq_len;
  s->micro_batch_ = micro_batch;
  s->seed_ = seed;
  s->rank_ = rank;
  if (data.format == "random") return s;
  if (data.format != "u16" && data.format != "u32") {
    return Status::Invalid("data.format", "unknown \"" + data.format + "\"");
  }
  s->width_ = data.format == "u16" ? 2 : 4;
  if (data.train.empty()) return Status::Invalid("data.train", "required for format " + data.format);
  PILOT_RETURN_IF_ERROR(CheckSha(data.train, train_sha256.empty() ? data.train_sha256 : train_sha256,
                                 "data.train_sha256"));
  PILOT_RETURN_IF_ERROR(MapFile(data.train, &s->train_map_, &s->train_map_len_));
  if (s->train_map_len_ % s->width_ != 0) {
    return Status::Invalid(data.train, "size is not a multiple of " + std::to_string(s->width_) +
                                           " bytes (format " + data.format + ")");
  }
  const int64_t n = static_cast<int64_t>(s->train_map_len_ / s->width_);
  const int64_t window = seq_len + 1;
  if (!data.eval.empty()) {
    PILOT_RETURN_IF_ERROR(CheckSha(data.eval, eval_sha256.empty() ? data.eval_sha256 : eval_sha256,
                                   "data.eval_sha256"));
    PILOT_RETURN_IF_ERROR(MapFile(data.eval, &s->eval_map_, &s->eval_map_len_));
    s->train_len_ = n;
    s->eval_begin_ = 0;
    s->eval_len_ = static_cast<int64_t>(s->eval_map_len_ / s->width_);
  } else {
    s->eval_len_ = std::max<int64_t>(n / 20, window);
    s->train_len_ = n - s->eval_len_;
    s->eval_begin_ = s->train_len_;
  }
  if (s->train_len_ < window) {
    return Status::Invalid(data.train, std::to_string(n) + " tokens: too few for one window of " +
                                           std::to_string(window) + " (plus the eval tail)");
  }
  if (s->eval_len_ < window) {
    return Status::Invalid(data.eval, "too few tokens for one eval window of " +
                                          std::to_string(window));
  }
  return s;
}

std::shared_ptr<TokenSource> TokenSource::WithMicroBatch(std::shared_ptr<const TokenSource> base,
                                                         int micro_batch) {
  std::shared_ptr<TokenSource> s(new TokenSource());
  s->cfg_ = base->cfg_;
  s->vocab_ = base->vocab_;
  s->seq_len_ = base->seq_len_;
  s->micro_batch_ = micro_batch;
  s->rank_ = base->rank_;
  s->seed_ = base->seed_;
  s->width_ = base->width_;
  s->train_map_ = base->train_map_;
  s->train_map_len_ = base->train_map_len_;
  s->eval_map_ = base->eval_map_;
  s->eval_map_len_ = base->eval_map_len_;
  s->train_len_ = base->train_len_;
  s->eval_begin_ = base->eval_begin_;
  s->eval_len_ = base->eval_len_;
  s->owner_ = base->owner_ ? base->owner_ : std::move(base);
  return s;
}

TokenSource::~TokenSource() {
  if (owner_) return;  // a view: the owner unmaps
  if (train_map_) ::munmap(train_map_, train_map_len_);
  if (eval_map_) ::munmap(eval_map_, eval_map_len_);
}

Result<Batch> TokenSource::Window(int64_t index, bool eval, bool pin) const {
  const int64_t B = micro_batch_, T = seq_len_;
  at::TensorOptions opts = at::TensorOptions().dtype(at::kLong).pinned_memory(pin);
  at::Tensor tok;
  if (width_ == 0) {
    // Random tokens from a private generator: the global RNG is untouched.
    const uint64_t s = eval ? MixSeed({seed_, kEvalTag, static_cast<uint64_t>(index)})
                            : MixSeed({seed_, static_cast<uint64_t>(index),
                                       static_cast<uint64_t>(rank_)});
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(s);
    tok = at::randint(vocab_, {B, T + 1}, gen, at::TensorOptions().dtype(at::kLong));
  } else {
    tok = at::empty({B, T + 1}, at::TensorOptions().dtype(at::kLong));
    int64_t* out = tok.data_ptr<int64_t>();
    const void* base = eval && eval_map_ ? eval_map_ : train_map_;
    const int64_t begin = eval ? eval_begin_ : 0;
    const int64_t len = eval ? eval_len_ : train_len_;
    const int64_t span = len - (T + 1) + 1;  // possible window starts
    for (int64_t b = 0; b < B; ++b) {
      int64_t start;
      if (eval) {
        start = ((index * B + b) * (T + 1)) % span;  // evenly spaced, fixed
      } else {
        start = static_cast<int64_t>(
            MixSeed({seed_, static_cast<uint64_t>(index), static_cast<uint64_t>(rank_),
                     static_cast<uint64_t>(b)}) %
            static_cast<uint64_t>(span));
      }
      start += begin;
      for (int64_t t = 0; t <= T; ++t) {
        int64_t v;
        if (width_ == 2) {
          uint16_t u;
          std::memcpy(&u, static_cast<const char*>(base) + (start + t) * 2, 2);
          v = u;
        } else {
          uint32_t u;
          std::memcpy(&u, static_cast<const char*>(base) + (start + t) * 4, 4);
          v = u;
        }
        if (v >= vocab_) {
          return Status::Invalid(eval && eval_map_ ? cfg_.eval : cfg_.train,
                                 "token " + std::to_string(v) + " at position " +
                                     std::to_string(start + t) + " is >= model.vocab " +
                                     std::to_string(vocab_));
        }
        out[b * (T + 1) + t] = v;
      }
    }
  }
  Batch batch;
  batch.index = index;
  // Contiguous (and pinned when asked) so the copy to the device is async.
  batch.x = at::empty({B, T}, opts).copy_(tok.narrow(1, 0, T));  // (B, T)
  batch.y = at::empty({B, T}, opts).copy_(tok.narrow(1, 1, T));  // (B, T)
  return batch;
}

Result<Batch> TokenSource::Train(int64_t index, bool pin) const { return Window(index, false, pin); }
Result<Batch> TokenSource::Eval(int64_t i, bool pin) const { return Window(i, true, pin); }

// ---- Loader --------------------------------------------------------------------

Loader::Loader(std::shared_ptr<const TokenSource> source, int64_t first, int64_t last,
               int threads, int prefetch, const at::Device& device)
    : source_(std::move(source)),
      next_(first),
      last_(last),
      threads_(std::max(1, threads)),
      prefetch_(std::max(1, prefetch)),
      device_(device) {
  for (int w = 0; w < threads_; ++w) workers_.emplace_back([this, w] { Produce(w); });
}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void Loader::Produce(int worker) {
  const bool pin = device_.is_cuda();
  // Worker w makes indices first+w, first+w+threads, ...
  int64_t index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = next_ + worker;
  }
  for (; index < last_; index += threads_) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || index < next_ + prefetch_; });
      if (stop_) return;
    }
    Result<Batch> b = Status::Internal("loader", "no batch");
    try {
      b = source_->Train(index, pin);
    } catch (const std::exception& e) {
      b = Status::Internal("loader", e.what());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_.emplace(index, std::move(b));
    }
    cv_.notify_all();
  }
}

Result<Batch> Loader::Next(double* wait_ms) {
  auto t0 = std::chrono::steady_clock::now();
  Result<Batch> b = Status::Internal("loader", "no batch");
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (next_ >= last_) return Status::Internal("loader", "read past the last batch");
    cv_.wait(lock, [&] { return ready_.count(next_) > 0; });
    auto it = ready_.find(next_);
    b = std::move(it->second);
    ready_.erase(it);
    ++next_;
  }
  cv_.notify_all();
  *wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!b.ok()) return b;
  Batch out = std::move(b).value();
  if (device_.type() != at::kCPU) {
    out.x = out.x.to(device_, /*non_blocking=*/true);
    out.y = out.y.to(device_, /*non_blocking=*/true);
  }
  return out;
}

}  // namespace pilot::runner
