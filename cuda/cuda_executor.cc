#include "cuda/cuda_executor.h"

#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <stdexcept>
#include <vector>

#include "backend/arena.h"
#include "core/error.h"
#include "cuda/kernels.h"

namespace pipesim {
namespace {

constexpr int kDim = 4096;                // GEMM n and k at most
constexpr int kMaxM = 4096;               // GEMM m at most
constexpr int kSmGroup = 8;               // green-context partitions come in 8-SM groups
constexpr size_t kLinkCopyCap = 1 << 20;  // bytes a paced copy really moves at most
constexpr int kPairStreams = 4;           // streams per (sender, receiver): transfers overlap

// More hardware work queues than the default 8, before the first context is made: with
// fewer queues than streams, streams share queues and wait on each other's events.
void widen_work_queues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(fmt::format("CUDA: {}: {}", what, cudaGetErrorString(e)));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(fmt::format("cuBLAS: {}: status {}", what, static_cast<int>(s)));
}
void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(fmt::format("CUDA driver: {}: error {}", what, static_cast<int>(r)));
}
#define PIPESIM_CUDA(x) check((x), #x)

// Driver entry points, fetched from the runtime so the driver stub is never linked.
struct Driver {
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetDevResource) get_resource = nullptr;
  decltype(&cuDevSmResourceSplitByCount) split = nullptr;
  decltype(&cuDevResourceGenerateDesc) generate_desc = nullptr;
  decltype(&cuGreenCtxCreate) green_create = nullptr;
  decltype(&cuGreenCtxDestroy) green_destroy = nullptr;
  decltype(&cuGreenCtxStreamCreate) green_stream = nullptr;
  decltype(&cuCtxFromGreenCtx) from_green = nullptr;
  decltype(&cuCtxPushCurrent) push = nullptr;
  decltype(&cuCtxPopCurrent) pop = nullptr;

  template <typename F>
  static void fetch(F& f, const char* name) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(name, &p, 13000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      f = reinterpret_cast<F>(p);
  }
  bool load() {
    fetch(device_get, "cuDeviceGet");
    fetch(get_resource, "cuDeviceGetDevResource");
    fetch(split, "cuDevSmResourceSplitByCount");
    fetch(generate_desc, "cuDevResourceGenerateDesc");
    fetch(green_create, "cuGreenCtxCreate");
    fetch(green_destroy, "cuGreenCtxDestroy");
    fetch(green_stream, "cuGreenCtxStreamCreate");
    fetch(from_green, "cuCtxFromGreenCtx");
    fetch(push, "cuCtxPushCurrent");
    fetch(pop, "cuCtxPopCurrent");
    return device_get && get_resource && split && generate_desc && green_create && green_destroy &&
           green_stream && from_green && push && pop;
  }
};

// A virtual GPU (or the links' partition): its SMs, context, stream, cuBLAS handle, GEMM
// operands and the events its streams record.
struct Partition {
  int sms = 0;
  CUgreenCtx green = nullptr;
  CUcontext ctx = nullptr;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void* a = nullptr;   // bf16 [kMaxM x kDim]
  void* b = nullptr;   // bf16 [kDim x kDim]
  float* c = nullptr;  // fp32 [kMaxM x kDim]: GEMM output, optimizer weights
  float* g = nullptr;  // fp32 [kMaxM x kDim]: optimizer gradients
  std::vector<cudaEvent_t> events;
};

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(const Scenario& s);
  ~CudaExecutor() override;
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  std::string name() const override { return "cuda"; }
  std::string description() const override { return description_; }
  bool timing_faithful() const override { return green_; }
  double time_scale() const override { return 1.0; }
  Measurement run(const TaskGraph& g, const std::vector<ExecWork>& work) override;
  Time time_op(const Op& op, const ExecWork& work) override;

 private:
  // Runs `f` with the partition's context current (green contexts), else as is.
  template <typename F>
  void in(Partition& p, F&& f) {
    if (p.ctx != nullptr) PIPESIM_CUDA(driver_.push(p.ctx));
    try {
      f();
    } catch (...) {
      CUcontext ignored = nullptr;
      if (p.ctx != nullptr) driver_.pop(&ignored);
      throw;
    }
    CUcontext popped = nullptr;
    if (p.ctx != nullptr) PIPESIM_CUDA(driver_.pop(&popped));
  }
  std::string make_green(int partitions);
  void make_plain(int partitions, int sms);
  void setup(Partition& p, bool compute);
  size_t part_index(const Op& op) const {
    if (op.kind == OpKind::kTransfer) return parts_.size() - 1;
    return static_cast<size_t>(partition_of_.at(static_cast<size_t>(op.device)));
  }
  Partition& part_of(const Op& op) { return parts_[part_index(op)]; }
  cudaStream_t stream_of(const Op& op, size_t ordinal);
  cuda::SharedRoute shared_route(const Op& op) const;
  cudaEvent_t event(Partition& p, size_t i);
  void ensure_stamps(size_t n);
  size_t gemm(Partition& p, double flops, bool transpose_a);
  void launch(const Op& op, const ExecWork& w, Partition& p, cudaStream_t s);

  const Cluster& cluster_;
  Driver driver_;
  bool green_ = false;
  std::string description_;
  std::vector<int> partition_of_;  // device -> compute partition, -1 when unused
  std::deque<Partition> parts_;    // compute partitions, then the links' partition
  std::map<std::pair<int, int>, std::vector<cudaStream_t>> link_streams_;
  unsigned* link_active_ = nullptr;  // device: transfers on each link direction now
  void* link_src_ = nullptr;
  void* link_dst_ = nullptr;
  uint64_t* stamps_ = nullptr;  // device: [2 x op] global-timer stamps
  size_t stamp_capacity_ = 0;
};

CudaExecutor::CudaExecutor(const Scenario& s) : cluster_(s.cluster) {
  widen_work_queues();
  PIPESIM_CUDA(cudaSetDevice(0));
  PIPESIM_CUDA(cudaFree(nullptr));  // the primary context, before any green context
  partition_of_.assign(static_cast<size_t>(s.cluster.num_devices()), -1);
  int used = 0;
  for (const auto& copy : s.placement) {
    for (const auto& position : copy) {
      for (int d : position) {
        if (partition_of_.at(static_cast<size_t>(d)) < 0)
          partition_of_[static_cast<size_t>(d)] = used++;
      }
    }
  }
  cudaDeviceProp prop{};
  PIPESIM_CUDA(cudaGetDeviceProperties(&prop, 0));
  const int total = prop.multiProcessorCount;
  const int per = (total - kSmGroup) / std::max(used, 1) / kSmGroup * kSmGroup;
  std::string why_not = "too many devices for the SMs";
  if (per >= kSmGroup) why_not = driver_.load() ? make_green(used) : "no green-context driver API";
  green_ = why_not.empty();
  if (!green_) make_plain(used, std::max(1, (total - kSmGroup) / std::max(used, 1)));
  for (size_t i = 0; i < parts_.size(); ++i) setup(parts_[i], i + 1 < parts_.size());
  const size_t directions = 2 * static_cast<size_t>(std::max(1, cluster_.num_links()));
  PIPESIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&link_active_), directions * sizeof(unsigned)));
  PIPESIM_CUDA(cudaMemset(link_active_, 0, directions * sizeof(unsigned)));
  PIPESIM_CUDA(cudaMalloc(&link_src_, kLinkCopyCap));
  PIPESIM_CUDA(cudaMalloc(&link_dst_, kLinkCopyCap));
  PIPESIM_CUDA(cudaMemset(link_src_, 1, kLinkCopyCap));
  PIPESIM_CUDA(cudaDeviceSynchronize());
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  description_ = fmt::format(
      "cuda: {} ({} SMs, driver {}, runtime {}), {} virtual GPUs of {} SMs + {} SMs for links, {}",
      prop.name, total, driver, runtime, used, parts_.front().sms, parts_.back().sms,
      green_ ? "green contexts" : fmt::format("plain streams (not timing-faithful: {})", why_not));
}

// One split of the whole GPU into `partitions` equal groups; what is left over (at least
// one 8-SM group, by the choice of `per`) becomes the links' partition. A split's outputs
// cannot be split again before a green context is made of them, so this is one call.
// Returns why not, or "" once every partition has its green context and stream.
std::string CudaExecutor::make_green(int partitions) {
  CUdevice dev = 0;
  CUdevResource all{};
  CUresult r = driver_.device_get(&dev, 0);
  if (r != CUDA_SUCCESS) return fmt::format("cuDeviceGet: error {}", static_cast<int>(r));
  r = driver_.get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM);
  if (r != CUDA_SUCCESS)
    return fmt::format("cuDeviceGetDevResource: error {}", static_cast<int>(r));
  const int total = static_cast<int>(all.sm.smCount);
  const int per = (total - kSmGroup) / partitions / kSmGroup * kSmGroup;
  std::vector<CUdevResource> groups(static_cast<size_t>(partitions) + 1);
  unsigned n = static_cast<unsigned>(partitions);
  r = driver_.split(groups.data(), &n, &all, &groups.back(), 0, static_cast<unsigned>(per));
  if (r != CUDA_SUCCESS || n != static_cast<unsigned>(partitions))
    return fmt::format("cuDevSmResourceSplitByCount({} x {} of {} SMs): error {}, {} groups",
                       partitions, per, total, static_cast<int>(r), n);
  if (groups.back().sm.smCount == 0) return "no SMs left over for the links";
  for (CUdevResource& res : groups) {
    Partition& p = parts_.emplace_back();
    CUdevResourceDesc desc = nullptr;
    r = driver_.generate_desc(&desc, &res, 1);
    if (r == CUDA_SUCCESS) r = driver_.green_create(&p.green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
    if (r == CUDA_SUCCESS) r = driver_.from_green(&p.ctx, p.green);
    CUstream st = nullptr;
    if (r == CUDA_SUCCESS) r = driver_.green_stream(&st, p.green, CU_STREAM_NON_BLOCKING, 0);
    if (r != CUDA_SUCCESS) {
      const size_t which = parts_.size() - 1;
      for (Partition& q : parts_) {
        if (q.green != nullptr) driver_.green_destroy(q.green);
      }
      parts_.clear();
      return fmt::format("green context {} of {} SMs: error {}", which, res.sm.smCount,
                         static_cast<int>(r));
    }
    p.sms = static_cast<int>(res.sm.smCount);
    p.stream = st;
  }
  return "";
}

void CudaExecutor::make_plain(int partitions, int sms) {
  for (int i = 0; i <= partitions; ++i) {
    Partition& p = parts_.emplace_back();
    p.sms = i < partitions ? sms : kSmGroup;
    PIPESIM_CUDA(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking));
  }
}

void CudaExecutor::setup(Partition& p, bool compute) {
  if (!compute) return;
  in(p, [&] {
    PIPESIM_CUDA(cublasCreate(&p.blas));
    PIPESIM_CUDA(cublasSetStream(p.blas, p.stream));
    PIPESIM_CUDA(cublasSetSmCountTarget(p.blas, p.sms));
  });
  const size_t big = static_cast<size_t>(kMaxM) * kDim;
  PIPESIM_CUDA(cudaMalloc(&p.a, big * 2));
  PIPESIM_CUDA(cudaMalloc(&p.b, static_cast<size_t>(kDim) * kDim * 2));
  PIPESIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&p.c), big * sizeof(float)));
  PIPESIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&p.g), big * sizeof(float)));
  // Small non-zero operands (0x3c3c is about 0.0115 in bf16 and as a float's high half):
  // tensor cores draw less power on zeros, which would flatter the clocks.
  PIPESIM_CUDA(cudaMemset(p.a, 0x3c, big * 2));
  PIPESIM_CUDA(cudaMemset(p.b, 0x3c, static_cast<size_t>(kDim) * kDim * 2));
  PIPESIM_CUDA(cudaMemset(p.c, 0x3c, big * sizeof(float)));
  PIPESIM_CUDA(cudaMemset(p.g, 0x3c, big * sizeof(float)));
}

CudaExecutor::~CudaExecutor() {
  cudaDeviceSynchronize();
  for (auto& [pair, streams] : link_streams_) {
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
  }
  for (Partition& p : parts_) {
    for (cudaEvent_t e : p.events) cudaEventDestroy(e);
    if (p.blas != nullptr) cublasDestroy(p.blas);
    cudaFree(p.a);
    cudaFree(p.b);
    cudaFree(p.c);
    cudaFree(p.g);
    if (p.green != nullptr) {
      driver_.green_destroy(p.green);  // its streams go with it
    } else if (p.stream != nullptr) {
      cudaStreamDestroy(p.stream);
    }
  }
  cudaFree(link_active_);
  cudaFree(link_src_);
  cudaFree(link_dst_);
  cudaFree(stamps_);
}

// A transfer goes on one of its pair's streams in turn (the `ordinal`-th transfer of the
// pair), so that transfers between the same two devices overlap and share, as flows do.
cudaStream_t CudaExecutor::stream_of(const Op& op, size_t ordinal) {
  if (op.kind != OpKind::kTransfer) return part_of(op).stream;
  std::vector<cudaStream_t>& streams = link_streams_[std::make_pair(op.device, op.peer)];
  const size_t i = ordinal % kPairStreams;
  while (streams.size() <= i) {
    Partition& link = parts_.back();
    cudaStream_t s = nullptr;
    if (link.green != nullptr) {
      CUstream st = nullptr;
      PIPESIM_CUDA(driver_.green_stream(&st, link.green, CU_STREAM_NON_BLOCKING, 0));
      s = st;
    } else {
      PIPESIM_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    }
    streams.push_back(s);
  }
  return streams[i];
}

// The route's link directions with a finite bandwidth; a route longer than the kernel takes
// keeps only its bottleneck.
cuda::SharedRoute CudaExecutor::shared_route(const Op& op) const {
  const Route& r = cluster_.route(op.device, op.peer);
  cuda::SharedRoute out;
  out.latency_ns = static_cast<uint64_t>(r.latency.ps_count() / 1000);
  for (LinkDirection h : r.hops) {
    const double bw = cluster_.direction_bandwidth(h);
    if (std::isinf(bw)) continue;
    if (out.hops == cuda::SharedRoute::kMaxHops) {
      out.hops = 1;
      out.link[0] = -1;
      break;
    }
    out.link[out.hops] = h;
    out.bytes_per_ns[out.hops++] = bw * 1e-9;
  }
  if (out.hops == 1 && out.link[0] == -1) {  // too long: the bottleneck hop alone
    double least = 1e300;
    for (LinkDirection h : r.hops) {
      const double bw = cluster_.direction_bandwidth(h);
      if (bw < least) {
        least = bw;
        out.link[0] = h;
      }
    }
    out.bytes_per_ns[0] = least * 1e-9;
  }
  return out;
}

// Events are made in the context of the streams that record them.
cudaEvent_t CudaExecutor::event(Partition& p, size_t i) {
  while (p.events.size() <= i) {
    cudaEvent_t e = nullptr;
    in(p, [&] { PIPESIM_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); });
    p.events.push_back(e);
  }
  return p.events[i];
}

void CudaExecutor::ensure_stamps(size_t n) {
  if (n <= stamp_capacity_) return;
  cudaFree(stamps_);
  stamps_ = nullptr;
  PIPESIM_CUDA(cudaMalloc(reinterpret_cast<void**>(&stamps_), n * sizeof(uint64_t)));
  stamp_capacity_ = n;
}

// GEMMs of about `flops` on the partition; returns the elements of the last output.
size_t CudaExecutor::gemm(Partition& p, double flops, bool transpose_a) {
  if (flops <= 0) return 0;
  constexpr double kFull = 2.0 * kMaxM * kDim * kDim;
  const int calls = std::max(1, static_cast<int>(std::ceil(flops / kFull)));
  const double each = flops / calls;
  const int nk =
      each >= kFull ? kDim : std::clamp(static_cast<int>(std::cbrt(each / 2)) / 64 * 64, 64, kDim);
  const int m =
      std::clamp(static_cast<int>(std::lround(each / (2.0 * nk * nk) / 64)) * 64, 64, kMaxM);
  const float alpha = 1.0f, beta = 0.0f;
  for (int i = 0; i < calls; ++i) {
    PIPESIM_CUDA(cublasGemmEx(p.blas, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, nk,
                              nk, &alpha, p.a, CUDA_R_16BF, transpose_a ? nk : m, p.b, CUDA_R_16BF,
                              nk, &beta, p.c, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
  }
  return static_cast<size_t>(m) * static_cast<size_t>(nk);
}

void CudaExecutor::launch(const Op& op, const ExecWork& w, Partition& p, cudaStream_t s) {
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kRecompute: {
      const size_t out = gemm(p, w.flops, false);
      if (out > 0) PIPESIM_CUDA(cuda::launch_elementwise(p.c, out, s));
      break;
    }
    case OpKind::kBackward:  // input gradient, then weight gradient (halves when unsplit)
      gemm(p, w.flops / 2, false);
      gemm(p, w.flops / 2, true);
      break;
    case OpKind::kWeightGrad:
      gemm(p, w.flops, true);
      break;
    case OpKind::kOptimizer:
      if (w.bytes > 0) {
        PIPESIM_CUDA(cuda::launch_optimizer(p.c, p.g, static_cast<size_t>(w.bytes) / 12,
                                            static_cast<size_t>(kMaxM) * kDim, s));
      }
      break;
    case OpKind::kTransfer: {
      const size_t copy = std::min(static_cast<size_t>(op.bytes), kLinkCopyCap);
      PIPESIM_CUDA(cuda::launch_shared_copy(link_dst_, link_src_, copy,
                                            static_cast<double>(op.bytes), shared_route(op),
                                            link_active_, s));
      break;
    }
  }
}

namespace {

// Issue order: deps and each stream's order, so every event waited on is recorded first.
std::vector<OpId> issue_order(const TaskGraph& g) {
  const size_t n = g.size();
  std::vector<uint32_t> indeg(n, 0);
  std::vector<OpId> next_in_stream(n, UINT32_MAX);
  for (OpId id = 0; id < n; ++id) indeg[id] = static_cast<uint32_t>(g.deps(id).size());
  for (int d = 0; d < g.num_devices(); ++d) {
    const auto st = g.stream(d);
    for (size_t i = 1; i < st.size(); ++i) {
      next_in_stream[st[i - 1]] = st[i];
      ++indeg[st[i]];
    }
  }
  std::vector<OpId> order;
  order.reserve(n);
  for (OpId id = 0; id < n; ++id) {
    if (indeg[id] == 0) order.push_back(id);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    const OpId id = order[i];
    auto release = [&](OpId s) {
      if (--indeg[s] == 0) order.push_back(s);
    };
    for (OpId s : g.successors(id)) release(s);
    if (next_in_stream[id] != UINT32_MAX) release(next_in_stream[id]);
  }
  PIPESIM_ASSERT(order.size() == n, "a validated TaskGraph has no cycle");
  return order;
}

}  // namespace

Measurement CudaExecutor::run(const TaskGraph& g, const std::vector<ExecWork>& work) {
  const size_t n = g.size();
  ensure_stamps(2 * n + 1);
  const std::vector<OpId> order = issue_order(g);

  std::vector<Arena> arenas;
  for (int d = 0; d < g.num_devices(); ++d) arenas.emplace_back(g.static_memory(d));
  std::vector<cudaEvent_t> done(n, nullptr);
  std::vector<size_t> used(parts_.size(), 0);
  std::vector<cudaStream_t> streams(n, nullptr);
  // Every stream first waits for the origin stamp's event.
  Partition& first = parts_.front();
  cudaEvent_t origin = event(first, used[0]++);
  in(first, [&] {
    PIPESIM_CUDA(cuda::launch_stamp(stamps_ + 2 * n, first.stream));
    PIPESIM_CUDA(cudaEventRecord(origin, first.stream));
  });
  std::map<cudaStream_t, bool> started;
  std::map<std::pair<int, int>, size_t> transfers;  // per pair, issued so far
  for (OpId id : order) {
    const Op& op = g.op(id);
    const size_t pi = part_index(op);
    Partition& p = parts_[pi];
    cudaStream_t s = stream_of(
        op, op.kind == OpKind::kTransfer ? transfers[std::make_pair(op.device, op.peer)]++ : 0);
    streams[id] = s;
    done[id] = event(p, used[pi]++);
    in(p, [&] {
      if (!started[s]) {
        started[s] = true;
        if (s != first.stream) PIPESIM_CUDA(cudaStreamWaitEvent(s, origin, 0));
      }
      for (OpId d : g.deps(id)) {
        if (streams[d] != s) PIPESIM_CUDA(cudaStreamWaitEvent(s, done[d], 0));
      }
      PIPESIM_CUDA(cuda::launch_stamp(stamps_ + 2 * id, s));
      if (op.kind != OpKind::kTransfer)
        arenas[static_cast<size_t>(op.device)].apply(op.mem_at_start);
      launch(op, work[id], p, s);
      if (op.kind != OpKind::kTransfer) arenas[static_cast<size_t>(op.device)].apply(op.mem_at_end);
      PIPESIM_CUDA(cuda::launch_stamp(stamps_ + 2 * id + 1, s));
      PIPESIM_CUDA(cudaEventRecord(done[id], s));
    });
  }
  PIPESIM_CUDA(cudaDeviceSynchronize());
  std::vector<uint64_t> host(2 * n + 1);
  PIPESIM_CUDA(
      cudaMemcpy(host.data(), stamps_, host.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  Measurement m;
  const uint64_t t0 = host[2 * n];
  auto at = [&](uint64_t t) { return Time::ns(t > t0 ? static_cast<int64_t>(t - t0) : 0); };
  for (OpId id = 0; id < n; ++id) {
    m.start.push_back(at(host[2 * id]));
    m.end.push_back(at(host[2 * id + 1]));
    m.makespan = max(m.makespan, m.end.back());
  }
  for (const Arena& a : arenas) m.peak_memory.push_back(a.peak());
  return m;
}

Time CudaExecutor::time_op(const Op& op, const ExecWork& work) {
  Partition& p = part_of(op);
  ensure_stamps(2);
  in(p, [&] {
    PIPESIM_CUDA(cuda::launch_stamp(stamps_, p.stream));
    launch(op, work, p, p.stream);
    PIPESIM_CUDA(cuda::launch_stamp(stamps_ + 1, p.stream));
  });
  PIPESIM_CUDA(cudaStreamSynchronize(p.stream));
  uint64_t t[2] = {0, 0};
  PIPESIM_CUDA(cudaMemcpy(t, stamps_, sizeof(t), cudaMemcpyDeviceToHost));
  return Time::ns(t[1] > t[0] ? static_cast<int64_t>(t[1] - t[0]) : 0);
}

}  // namespace

bool cuda_device_present() {
  widen_work_queues();
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::unique_ptr<Executor> make_cuda_executor(const Scenario& s) {
  widen_work_queues();
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    throw InputError(
        fmt::format("no CUDA device ({})", e != cudaSuccess ? cudaGetErrorString(e) : "none found"),
        "a machine with an NVIDIA GPU, or --backend host", "--backend", {"<command line>"});
  }
  return std::make_unique<CudaExecutor>(s);
}

}  // namespace pipesim
