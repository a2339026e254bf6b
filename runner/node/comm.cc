// c10d process groups for the node stage.
#include "runner/node/comm.h"

#include <torch/version.h>

#if __has_include(<gloo/context.h>)
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#define PILOT_HAVE_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
// PILOT_RUNNER_NCCL: runner/CMakeLists.txt found nccl.h and torch's
// ProcessGroupNCCL.hpp (a CUDA build). torch's headers compile their NCCL
// part only under USE_C10D_NCCL, which a libtorch install does not export.
#if defined(PILOT_RUNNER_CUDA) && defined(PILOT_RUNNER_NCCL)
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#define PILOT_HAVE_NCCL 1
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif
#ifdef PILOT_RUNNER_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <cuda_runtime_api.h>
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <thread>

namespace pilot::runner {
namespace {

#if TORCH_VERSION_MAJOR >= 2
using Group = c10d::Backend;
#else
using Group = c10d::ProcessGroup;
#endif

using Clock = std::chrono::steady_clock;

bool Resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const bool ok = getaddrinfo(host.c_str(), nullptr, &hints, &res) == 0;
  if (res != nullptr) freeaddrinfo(res);
  return ok;
}

// The rendezvous host: the first node's name, or, where that name does
// not resolve (a cluster whose node names are not in its resolver), the
// address srun was launched from, which is rank 0's node.
std::string RendezvousHost(const launch::RankInfo& info) {
  if (info.launch_addr.empty() || Resolves(info.master_addr)) return info.master_addr;
  return info.launch_addr;
}

// The local address this process reaches `host` from (the route's source
// address: no packet is sent), "" when there is none. Gloo's default device
// binds to the address of this machine's host name, which need not be on
// the network the other nodes share.
std::string LocalAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return "";
  std::string out;
  for (addrinfo* a = res; a != nullptr && out.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    char buf[INET6_ADDRSTRLEN] = {0};
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      const void* where = local.ss_family == AF_INET
                              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, where, buf, sizeof(buf)) != nullptr) out = buf;
    }
    close(fd);
  }
  freeaddrinfo(res);
  return out;
}

// What the timing keeps of a collective's work. NCCL: a copy of the work,
// which has its timing events but not its tensors (WorkNCCL's copy leaves
// them out), so a buffer the caller lets go after Wait is freed there, on
// the host's timeline, and not only once a later call sees the collective
// finished (the host runs far ahead of the device: the sharded forward's
// gather buffers were still held at the start of backward).
c10::intrusive_ptr<c10d::Work> TimingOnly(const c10::intrusive_ptr<c10d::Work>& w) {
#ifdef PILOT_HAVE_NCCL
  if (auto* n = dynamic_cast<c10d::ProcessGroupNCCL::WorkNCCL*>(w.get())) {
    return c10::make_intrusive<c10d::ProcessGroupNCCL::WorkNCCL>(*n);
  }
#endif
  return w;
}

}  // namespace

struct Comm::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  std::string host;  // the rendezvous host and port (Gloo's device choice)
  int port = 0;
  c10::intrusive_ptr<Group> pg;
  bool gloo = true;
  int64_t device_index = -1;  // the rank's CUDA device (NCCL)
  // NCCL: a collective's future completes when it is enqueued, not when it
  // ends, so busy time is the sum of the collectives' own durations (CUDA
  // events that NCCL records around each one on its stream; one stream, so
  // they never overlap). Their timing parts (TimingOnly) stay here until
  // they have finished on the device, and are let go as soon as a later
  // call sees them finished.
  bool device_timing = false;
  std::list<c10::intrusive_ptr<c10d::Work>> in_flight;
  double device_busy_ms = 0;
  struct Pending {
    c10::intrusive_ptr<c10d::Work> work;
    std::string what;
    at::Tensor copy_from, copy_to;  // Gloo reduce-scatter: part of the sum
  };
  std::map<size_t, Pending> pending;
  size_t next = 1;
  // NCCL: while `stalls_on`, each Wait brackets the stream wait it enqueues
  // with two timing events on the current (compute) stream; the time
  // between them is how long that stream sat waiting for the collective.
  // Pairs are reused from step to step.
  bool stalls_on = false;
  size_t stalls_used = 0;
#ifdef PILOT_RUNNER_CUDA
  std::vector<std::pair<std::unique_ptr<at::cuda::CUDAEvent>, std::unique_ptr<at::cuda::CUDAEvent>>> stalls;
#endif
  std::mutex mu;  // guards intervals
  std::vector<std::pair<Clock::time_point, Clock::time_point>> intervals;
  int64_t count = 0;

  // NCCL: adds the durations of the finished works and lets them go; with
  // `all`, waits for every one to finish first.
  void Harvest(bool all) {
    for (auto it = in_flight.begin(); it != in_flight.end();) {
      if (!(*it)->isCompleted()) {
        if (!all) {
          ++it;
          continue;
        }
        const Clock::time_point limit = Clock::now() + std::chrono::seconds(60);
        while (!(*it)->isCompleted() && Clock::now() < limit) std::this_thread::yield();
      }
#if TORCH_VERSION_MAJOR >= 2
      try {
        device_busy_ms += static_cast<double>((*it)->getDuration());
      } catch (const std::exception&) {
        // Failed or unfinished: it has no duration.
      }
#endif
      it = in_flight.erase(it);
    }
  }

  Handle Track(c10::intrusive_ptr<c10d::Work> w, std::string what, at::Tensor from = {},
               at::Tensor to = {}) {
    if (device_timing) {
      Harvest(false);
      ++count;
      in_flight.push_back(TimingOnly(w));
      const size_t id = next++;
      pending[id] = Pending{std::move(w), std::move(what), std::move(from), std::move(to)};
      return Handle{id};
    }
    const Clock::time_point t0 = Clock::now();
    const size_t slot = [&] {
      std::lock_guard<std::mutex> l(mu);
      intervals.emplace_back(t0, t0);
      ++count;
      return intervals.size() - 1;
    }();
    try {
      auto fut = w->getFuture();
      fut->addCallback([this, slot](c10::ivalue::Future&) {
        std::lock_guard<std::mutex> l(mu);
        if (slot < intervals.size()) intervals[slot].second = Clock::now();
      });
    } catch (const std::exception&) {
      // No future for this work: its interval ends when it is waited for.
    }
    const size_t id = next++;
    pending[id] = Pending{std::move(w), std::move(what), std::move(from), std::move(to)};
    return Handle{id};
  }
};

Result<std::unique_ptr<Comm>> Comm::Create(const launch::RankInfo& info, const at::Device& device,
                                           std::chrono::milliseconds timeout) {
  std::unique_ptr<Comm> c(new Comm());
  c->impl_ = std::make_unique<Impl>();
  c->rank_ = info.rank;
  c->world_ = info.world_size;
  const std::string host = RendezvousHost(info);
  const std::string where = host + ":" + std::to_string(info.master_port);
  try {
    c10d::TCPStoreOptions o;
    o.port = static_cast<uint16_t>(info.master_port);
    o.isServer = info.rank == 0;
    o.numWorkers = static_cast<size_t>(info.world_size);
    o.waitWorkers = true;
    o.timeout = timeout;
    c->impl_->store = c10::make_intrusive<c10d::TCPStore>(host, o);
  } catch (const std::exception& e) {
    std::string m = e.what();
    m = m.substr(0, m.find('\n'));
    return Status::Unavailable("rendezvous at " + where, m)
        .WithHint(info.rank == 0 ? "another process may hold the port; set PILOT_MASTER_PORT"
                                 : "rank 0 did not start or is unreachable");
  }
  c->impl_->host = host;
  c->impl_->port = info.master_port;
  // The group's own keys under a prefix (as torch.distributed does), apart
  // from the node stage's (StoreSet/StoreGet).
  PILOT_RETURN_IF_ERROR(c->BuildGroup("pg", info.rank, info.world_size, device, timeout)
                            .Context("process group (rendezvous " + where + ")"));
  return c;
}

Status Comm::BuildGroup(const std::string& prefix, int rank, int world, const at::Device& device,
                        std::chrono::milliseconds timeout) {
  const std::string& host = impl_->host;
  try {
    auto pg_store = c10::make_intrusive<c10d::PrefixStore>(prefix, impl_->store);
    if (device.is_cuda()) {
#ifdef PILOT_HAVE_NCCL
      // The caller made `device` (the local rank's GPU) current before
      // building anything on it; NCCL's communicator is created on the
      // device of the first collective's tensors.
      // torch 1.13 and 2.x: ProcessGroupNCCL(store, rank, size, Options),
      // Options::create(is_high_priority_stream = false) with `timeout`
      // inherited from the (Process)Group options.
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(pg_store, rank, world, opts);
#if TORCH_VERSION_MAJOR >= 2
      pg->enableCollectivesTiming();  // start events: WorkNCCL::getDuration()
      impl_->device_timing = true;
#endif
      impl_->pg = pg;
      impl_->device_index = device.has_index() ? device.index() : 0;
      impl_->gloo = false;
      backend_ = "nccl";
#else
      return Status::Invalid("node stage", "this build has no NCCL for CUDA devices")
          .WithHint("run the node stage with training.device = \"cpu\"");
#endif
    } else {
#ifdef PILOT_HAVE_GLOO
      auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      } else if (host == "127.0.0.1" || host == "localhost") {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      } else if (const std::string local = LocalAddressToward(host, impl_->port); !local.empty()) {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(local));
      } else {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      }
      impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(pg_store, rank, world, opts);
      backend_ = "gloo";
#else
      return Status::Invalid("node stage", "this build has no Gloo for CPU collectives");
#endif
    }
  } catch (const std::exception& e) {
    std::string m = e.what();
    m = m.substr(0, m.find('\n'));
    return Status::Unavailable(prefix, m);
  }
  return Status::Ok();
}

Result<std::unique_ptr<Comm>> Comm::Subgroup(const std::string& name, const std::vector<int>& members,
                                             const at::Device& device, std::chrono::milliseconds timeout) {
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end()) return Status::Invalid("subgroup " + name, "this rank is not a member");
  std::unique_ptr<Comm> c(new Comm());
  c->impl_ = std::make_unique<Impl>();
  c->impl_->store = impl_->store;
  c->impl_->host = impl_->host;
  c->impl_->port = impl_->port;
  c->rank_ = static_cast<int>(me - members.begin());
  c->world_ = static_cast<int>(members.size());
  PILOT_RETURN_IF_ERROR(c->BuildGroup("sub/" + name, c->rank_, c->world_, device, timeout));
  return c;
}

Comm::~Comm() = default;

Comm::Handle Comm::AllReduceAsync(at::Tensor t) {
  std::vector<at::Tensor> v{std::move(t)};
  return impl_->Track(impl_->pg->allreduce(v), "all-reduce");
}

Comm::Handle Comm::AllGatherAsync(at::Tensor full, at::Tensor shard) {
  if (impl_->gloo) {
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < world_; ++r) out[0].push_back(full.narrow(0, r * shard.numel(), shard.numel()));
    std::vector<at::Tensor> in{std::move(shard)};
    return impl_->Track(impl_->pg->allgather(out, in), "all-gather");
  }
  return impl_->Track(impl_->pg->_allgather_base(full, shard), "all-gather");
}

Comm::Handle Comm::ReduceScatterAsync(at::Tensor shard, at::Tensor full) {
  if (impl_->gloo) {
    at::Tensor part = full.narrow(0, rank_ * shard.numel(), shard.numel());
    std::vector<at::Tensor> v{full};
    return impl_->Track(impl_->pg->allreduce(v), "reduce-scatter", part, shard);
  }
  return impl_->Track(impl_->pg->_reduce_scatter_base(shard, full), "reduce-scatter");
}

void Comm::Wait(Handle h) {
  auto it = impl_->pending.find(h.id);
  if (it == impl_->pending.end()) return;
  Impl::Pending p = std::move(it->second);
  impl_->pending.erase(it);
  const bool stall = impl_->device_timing && impl_->stalls_on;
#ifdef PILOT_RUNNER_CUDA
  if (stall) {
    if (impl_->stalls_used == impl_->stalls.size()) {
      impl_->stalls.emplace_back(std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault),
                                 std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault));
    }
    impl_->stalls[impl_->stalls_used].first->record();
  }
#endif
  try {
    // NCCL: makes the current stream wait for the collective (the CPU goes
    // on); Gloo: blocks until it is done.
    p.work->wait();
  } catch (const c10::Error& e) {
    std::string m = e.what_without_backtrace();
    TORCH_CHECK(false, p.what, " failed: ", m.substr(0, m.find('\n')));
  }
#ifdef PILOT_RUNNER_CUDA
  if (stall) impl_->stalls[impl_->stalls_used++].second->record();
#else
  (void)stall;
#endif
  if (p.copy_to.defined() && !p.copy_to.is_same(p.copy_from)) p.copy_to.copy_(p.copy_from);
  if (impl_->device_timing) impl_->Harvest(false);
}

void Comm::MeasureStreamStalls(bool on) { impl_->stalls_on = on; }

double Comm::TakeStreamStallMs() {
  double ms = 0;
#ifdef PILOT_RUNNER_CUDA
  for (size_t i = 0; i < impl_->stalls_used; ++i) {
    auto& [before, after] = impl_->stalls[i];
    after->synchronize();
    ms += before->elapsed_time(*after);
  }
#endif
  impl_->stalls_used = 0;
  return ms;
}

void Comm::WaitAll() {
  while (!impl_->pending.empty()) Wait(Handle{impl_->pending.begin()->first});
}

void Comm::Barrier() {
  c10d::BarrierOptions o;
  // NCCL runs the barrier as an all-reduce on a device: this rank's.
  if (!impl_->gloo) o.device_ids = {impl_->device_index};
  auto w = impl_->pg->barrier(o);
  w->wait();
}

double Comm::TakeBusySeconds(int64_t* count) {
  if (impl_->device_timing) {
    impl_->Harvest(true);
    if (count) *count = impl_->count;
    impl_->count = 0;
    const double busy = impl_->device_busy_ms / 1000.0;
    impl_->device_busy_ms = 0;
    return busy;
  }
  std::vector<std::pair<Clock::time_point, Clock::time_point>> iv;
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    iv.swap(impl_->intervals);
    if (count) *count = impl_->count;
    impl_->count = 0;
  }
  std::sort(iv.begin(), iv.end());
  double busy = 0;
  Clock::time_point cur_b{}, cur_e{};
  bool open = false;
  for (const auto& [b, e] : iv) {
    if (open && b <= cur_e) {
      cur_e = std::max(cur_e, e);
      continue;
    }
    if (open) busy += std::chrono::duration<double>(cur_e - cur_b).count();
    cur_b = b;
    cur_e = e;
    open = true;
  }
  if (open) busy += std::chrono::duration<double>(cur_e - cur_b).count();
  return busy;
}

void Comm::StoreSet(const std::string& key, const std::string& value) {
  impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

std::string Comm::StoreGet(const std::string& key) {
  std::vector<uint8_t> v = impl_->store->get(key);
  return std::string(v.begin(), v.end());
}

}  // namespace pilot::runner
