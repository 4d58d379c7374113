#include "backend/torch_backend.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

#include "backend/arena.h"
#include "backend/host_backend.h"
#include "backend/torch_worker_script.h"
#include "core/error.h"
#include "scenario/setup.h"

extern char** environ;

namespace pipesim {
namespace {

constexpr int kHidden = 128;                  // every matmul is [rows, 128] x [128, 128]
constexpr int64_t kMaxTensorBytes = 128 << 10;  // a transfer's tensor at most

std::string python_path() {
  if (const char* p = std::getenv("PIPESIM_PYTHON"); p != nullptr && *p != '\0') return p;
  if (std::filesystem::exists("/usr/bin/python3")) return "/usr/bin/python3";
  return "python3";
}

// One worker process: its stdin (commands) and stdout (answers), its stderr in a file.
class Worker {
 public:
  Worker(const std::string& python, int rank, int world, const std::string& dir, int threads)
      : log_(fmt::format("{}/worker{}.log", dir, rank)) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
      throw std::runtime_error("torch backend: cannot make pipes");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const std::string script = internal::kTorchWorkerScript;
    const std::string store = dir + "/store";
    std::vector<std::string> args = {python,           "-c", script, std::to_string(rank),
                                     std::to_string(world), store, std::to_string(threads)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = posix_spawnp(&pid_, python.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) {  // the destructor does not run for a constructor that throws
      pid_ = -1;
      close(to_);
      close(from_);
      throw InputError(fmt::format("cannot start {} ({})", python, std::strerror(rc)),
                       "python3 with PyTorch (Debian: python3-torch), or PIPESIM_PYTHON",
                       "--backend", {"<command line>"});
    }
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    if (to_ >= 0) close(to_);
    if (from_ >= 0) close(from_);
    if (pid_ <= 0) return;
    for (int i = 0; i < 50; ++i) {  // 5 s to leave after its stdin closes
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  void send(const std::string& line) {
    const std::string text = line + "\n";
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = write(to_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw died("stopped reading its commands");
      done += static_cast<size_t>(n);
    }
  }

  // The next line it writes, within `seconds`.
  nlohmann::json receive(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        const std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        try {
          return nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception&) {
          throw died(fmt::format("wrote '{}'", line.substr(0, 200)));
        }
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw died(fmt::format("did not answer within {:.0f} s", seconds));
      pollfd p{from_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      char chunk[65536];
      const ssize_t n = read(from_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw died("ended");
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  // The last lines of its stderr.
  std::string log_tail() const {
    std::ifstream f(log_);
    std::vector<std::string> lines;
    for (std::string l; std::getline(f, l);) lines.push_back(l);
    std::string out;
    for (size_t i = lines.size() > 3 ? lines.size() - 3 : 0; i < lines.size(); ++i)
      out += (out.empty() ? "" : " | ") + lines[i];
    return out;
  }

 private:
  std::runtime_error died(const std::string& what) const {
    return std::runtime_error(fmt::format("torch backend: worker process {} {}{}", pid_, what,
                                          log_tail().empty() ? "" : ": " + log_tail()));
  }
  std::string log_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_;
};

char kind_letter(const Op& op, bool split) {
  switch (op.kind) {
    case OpKind::kForward:
      return 'F';
    case OpKind::kBackward:
      return split ? 'I' : 'B';
    case OpKind::kWeightGrad:
      return 'W';
    case OpKind::kRecompute:
      return 'R';
    default:
      return 'O';
  }
}

std::string key_of(const Op& op) {
  return fmt::format("{}.{}", op.micro_batch, op.chunk);
}

class TorchExecutor final : public Executor {
 public:
  TorchExecutor(const Scenario& s, TorchOptions options);
  ~TorchExecutor() override;
  TorchExecutor(const TorchExecutor&) = delete;
  TorchExecutor& operator=(const TorchExecutor&) = delete;

  std::string name() const override { return "torch"; }
  std::string description() const override { return description_; }
  bool timing_faithful() const override { return false; }
  double time_scale() const override { return options_.time_scale; }
  Measurement run(const TaskGraph& g, const std::vector<ExecWork>& work) override;
  Time time_op(const Op& op, const ExecWork& work) override;

 private:
  int64_t matmuls(Time duration) const {
    const double flops = 2.0 * rows_ * kHidden * kHidden;
    return std::llround(duration.seconds() * options_.time_scale * rate_ / flops);
  }
  // Matmul outputs autograd keeps for a forward or recompute: the activation bytes it keeps
  // (a backward: those it frees) at the scale of the tensors (a tensor stands for the
  // median transfer), at least 1, at most 64.
  int64_t keep(const Op& op) const {
    const double act = std::abs(static_cast<double>(op.mem_at_start + op.mem_at_end));
    return std::clamp<int64_t>(std::llround(act / transfer_bytes_), 1, 64);
  }
  int rank_of(int device) const {
    const int r = rank_.at(static_cast<size_t>(device));
    if (r < 0) throw InputError("the torch backend runs ops only on the placement's devices", "",
                                "--backend", {"<command line>"});
    return r;
  }
  // What the TaskGraph's streams say: each op's position in its stream, and the device:key
  // of backwards split from their W and of forwards recomputed later.
  struct StreamFacts {
    std::vector<size_t> position;
    std::set<std::string> split, recomputed;
  };
  static StreamFacts stream_facts(const TaskGraph& g);
  void add_transfers(const TaskGraph& g, const StreamFacts& f, std::vector<nlohmann::json>& cmd,
                     std::map<OpId, std::vector<OpId>>& sent_after) const;
  // One run command per worker: its ops in stream order, its receives and sends.
  std::vector<nlohmann::json> commands(const TaskGraph& g);

  const Scenario& s_;
  TorchOptions options_;
  std::filesystem::path dir_;
  std::vector<int> rank_;  // device -> worker, -1 when none
  std::vector<std::unique_ptr<Worker>> workers_;
  double rate_ = 0;  // matmul FLOP/s every op's work is sized by (process_rate())
  std::set<std::string> split_;  // device:key of backwards split from their W (last run)
  int rows_ = 16;
  double transfer_bytes_ = 1;  // the scenario's median transfer
  std::string description_;
};

// The matmul rate every op's work is sized by: the median of the first executor's workers'
// calibrations, kept for the process, so that the same op is the same work on every device
// and in every executor of a sweep (one calibration varies by up to 2x from start to start).
double process_rate(const std::vector<double>& rates) {
  static const double kept = [&] {
    std::vector<double> r = rates;
    std::sort(r.begin(), r.end());
    return r.empty() ? 1e9 : r[r.size() / 2];
  }();
  return kept;
}

// The scenario's median transfer in bytes (kMaxTensorBytes when there is none).
int64_t median_transfer(const Scenario& s) {
  const TaskGraph g = scenario_task_graph(s);
  std::vector<int64_t> bytes;
  for (const Op& op : g.ops()) {
    if (op.kind == OpKind::kTransfer && op.bytes > 0) bytes.push_back(op.bytes);
  }
  int64_t b = kMaxTensorBytes;
  if (!bytes.empty()) {
    std::nth_element(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(bytes.size() / 2),
                     bytes.end());
    b = bytes[bytes.size() / 2];
  }
  return b;
}

TorchExecutor::TorchExecutor(const Scenario& s, TorchOptions options) : s_(s), options_(options) {
  const int64_t median = median_transfer(s);
  transfer_bytes_ = static_cast<double>(median);
  rows_ = static_cast<int>(std::clamp<int64_t>(std::min(median, kMaxTensorBytes) / (4 * kHidden),
                                               16, kMaxTensorBytes / (4 * kHidden)));
  std::string tmpl = (std::filesystem::temp_directory_path() / "pipesim-torch-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr)
    throw std::runtime_error("torch backend: cannot make a temporary folder");
  dir_ = tmpl;
  rank_.assign(static_cast<size_t>(s.cluster.num_devices()), -1);
  int world = 0;
  for (const auto& copy : s.placement) {
    for (const auto& position : copy) {
      for (int d : position) {
        if (rank_.at(static_cast<size_t>(d)) < 0) rank_[static_cast<size_t>(d)] = world++;
      }
    }
  }
  const std::string python = python_path();
  try {
    for (int r = 0; r < world; ++r)
      workers_.push_back(std::make_unique<Worker>(python, r, world, dir_.string(), options.threads));
    const std::string setup = nlohmann::json{{"rows", rows_}, {"hidden", kHidden}}.dump();
    for (auto& w : workers_) w->send(setup);
    std::string version;
    std::vector<double> rates;
    for (auto& w : workers_) {
      nlohmann::json ready;
      try {
        ready = w->receive(120);
      } catch (const std::runtime_error& e) {
        if (w->log_tail().find("No module named 'torch'") != std::string::npos)
          throw InputError(fmt::format("{} cannot import torch", python),
                           "python3 with PyTorch (Debian: python3-torch), or PIPESIM_PYTHON",
                           "--backend", {"<command line>"});
        throw;
      }
      rates.push_back(ready.at("rate").get<double>());
      version = ready.at("torch").get<std::string>();
    }
    rate_ = process_rate(rates);
    description_ = fmt::format(
        "torch: PyTorch {} on the CPU, {} processes over gloo, {} thread(s) each, work sized at "
        "{:.2f} GFLOP/s, tensors [{}, {}] fp32, time scale {:.4g} (not timing-faithful)",
        version, world, options.threads, rate_ / 1e9, rows_, kHidden, options.time_scale);
  } catch (...) {
    workers_.clear();
    std::filesystem::remove_all(dir_);
    throw;
  }
}

TorchExecutor::~TorchExecutor() {
  for (auto& w : workers_) {
    try {
      w->send(R"({"cmd": "quit"})");
    } catch (const std::exception&) {
    }
  }
  workers_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

InputError unsupported(const std::string& what) {
  return InputError(what, "a pipeline of one copy (strategy.data, tensor and context 1)",
                    "--backend", {"<command line>"});
}

TorchExecutor::StreamFacts TorchExecutor::stream_facts(const TaskGraph& g) {
  StreamFacts f;
  f.position.assign(g.size(), 0);
  for (int d = 0; d < g.num_devices(); ++d) {
    const auto st = g.stream(d);
    for (size_t i = 0; i < st.size(); ++i) {
      f.position[st[i]] = i;
      const Op& op = g.op(st[i]);
      if (op.kind == OpKind::kWeightGrad) f.split.insert(fmt::format("{}:{}", d, key_of(op)));
      if (op.kind == OpKind::kRecompute)
        f.recomputed.insert(fmt::format("{}:{}", d, key_of(op)));
    }
  }
  return f;
}

// Each transfer: sent after the last of its deps on the sender (in stream order), received
// in the order of its first use on the receiver; `sent_after` maps that op to them.
void TorchExecutor::add_transfers(const TaskGraph& g, const StreamFacts& f,
                                  std::vector<nlohmann::json>& cmd,
                                  std::map<OpId, std::vector<OpId>>& sent_after) const {
  std::vector<std::map<size_t, std::vector<OpId>>> recv(workers_.size());  // by first use
  for (OpId t = 0; t < g.size(); ++t) {
    const Op& op = g.op(t);
    if (op.kind != OpKind::kTransfer) continue;
    if (g.deps(t).empty()) throw unsupported("a transfer without a producing op");
    OpId last = g.deps(t).front();
    for (OpId d : g.deps(t)) {
      const Op& dep = g.op(d);
      if (dep.kind == OpKind::kTransfer || dep.device != op.device)
        throw unsupported("a transfer that waits on another device (a collective)");
      if (f.position[d] > f.position[last]) last = d;
    }
    sent_after[last].push_back(t);
    size_t first_use = SIZE_MAX;
    for (OpId c : g.successors(t)) {
      const Op& user = g.op(c);
      if (user.kind == OpKind::kTransfer || user.device != op.peer)
        throw unsupported("a transfer whose receiver does not use it (a collective)");
      first_use = std::min(first_use, f.position[c]);
    }
    const int to = rank_of(op.peer);
    recv[static_cast<size_t>(to)][first_use].push_back(t);
    cmd[static_cast<size_t>(rank_of(op.device))]["send"].push_back({{"id", t}, {"dst", to}});
  }
  for (size_t r = 0; r < workers_.size(); ++r) {
    for (const auto& [use, ts] : recv[r]) {
      for (OpId t : ts) {
        const Op& op = g.op(t);
        const double due = s_.cluster.transfer_time(op.device, op.peer, op.bytes).seconds() *
                           options_.time_scale * 1e9;
        cmd[r]["recv"].push_back({{"id", t}, {"src", rank_of(op.device)}, {"due_ns", due}});
      }
    }
  }
}

std::vector<nlohmann::json> TorchExecutor::commands(const TaskGraph& g) {
  const StreamFacts f = stream_facts(g);
  split_ = f.split;
  std::vector<nlohmann::json> cmd(workers_.size());
  for (auto& c : cmd) c = {{"cmd", "run"}, {"ops", nlohmann::json::array()},
                           {"recv", nlohmann::json::array()}, {"send", nlohmann::json::array()}};
  std::map<OpId, std::vector<OpId>> sent_after;  // op -> the transfers it sends
  add_transfers(g, f, cmd, sent_after);
  for (int d = 0; d < g.num_devices(); ++d) {
    for (OpId id : g.stream(d)) {
      const Op& op = g.op(id);
      nlohmann::json in = nlohmann::json::array();
      for (OpId dep : g.deps(id)) {
        const Op& p = g.op(dep);
        if (p.kind == OpKind::kTransfer) {
          in.push_back(dep);
        } else if (p.device != d) {
          throw unsupported("an op that waits on another device's op without a transfer");
        }
      }
      const auto out = sent_after.find(id);
      const std::string where = fmt::format("{}:{}", d, key_of(op));
      cmd[static_cast<size_t>(rank_of(d))]["ops"].push_back(
          {{"id", id}, {"kind", std::string(1, kind_letter(op, f.split.count(where) > 0))},
           {"key", key_of(op)}, {"matmuls", matmuls(op.duration)}, {"keep", keep(op)},
           {"recomputed", op.kind == OpKind::kForward && f.recomputed.count(where) > 0},
           {"in", in}, {"out", out == sent_after.end() ? std::vector<OpId>{} : out->second}});
    }
  }
  return cmd;
}

Measurement TorchExecutor::run(const TaskGraph& g, const std::vector<ExecWork>&) {
  const std::vector<nlohmann::json> cmd = commands(g);
  for (size_t r = 0; r < workers_.size(); ++r) workers_[r]->send(cmd[r].dump());
  std::vector<nlohmann::json> answers;
  for (auto& w : workers_) answers.push_back(w->receive(600));
  const size_t n = g.size();
  std::vector<int64_t> start(n, -1), end(n, -1);
  std::vector<int64_t> tensor_peak(static_cast<size_t>(g.num_devices()), 0);
  for (size_t r = 0; r < answers.size(); ++r) {
    for (const auto& [id, t] : answers[r].at("start").items())
      start.at(std::stoul(id)) = t.get<int64_t>();
    for (const auto& [id, t] : answers[r].at("end").items()) end.at(std::stoul(id)) = t.get<int64_t>();
  }
  int64_t origin = INT64_MAX;
  for (int64_t t : start) {
    if (t >= 0) origin = std::min(origin, t);
  }
  Measurement m;
  const auto at = [&](int64_t t) {
    return time_from_seconds(static_cast<double>(std::max<int64_t>(t - origin, 0)) * 1e-9 /
                             options_.time_scale);
  };
  for (OpId id = 0; id < n; ++id) {
    if (start[id] < 0 || end[id] < 0)
      throw std::runtime_error(fmt::format("torch backend: no times for {}", g.describe(id)));
    m.start.push_back(at(start[id]));
    m.end.push_back(at(end[id]));
    m.makespan = max(m.makespan, m.end.back());
  }
  for (int d = 0; d < g.num_devices(); ++d) {
    Arena arena(g.static_memory(d));
    for (OpId id : g.stream(d)) {
      arena.apply(g.op(id).mem_at_start);
      arena.apply(g.op(id).mem_at_end);
    }
    m.peak_memory.push_back(arena.peak());
    if (!g.stream(d).empty())
      tensor_peak[static_cast<size_t>(d)] =
          answers.at(static_cast<size_t>(rank_of(d))).at("peak_bytes").get<int64_t>();
  }
  m.tensor_peak = std::move(tensor_peak);
  return m;
}

Time TorchExecutor::time_op(const Op& op, const ExecWork&) {
  const int r = rank_of(op.device);
  Worker& w = *workers_.at(static_cast<size_t>(r));
  const bool split = split_.count(fmt::format("{}:{}", op.device, key_of(op))) > 0;
  nlohmann::json o = {{"id", 0}, {"kind", std::string(1, kind_letter(op, split))},
                      {"key", key_of(op)}, {"matmuls", matmuls(op.duration)},
                      {"keep", keep(op)},
                      {"in", nlohmann::json::array()}, {"out", nlohmann::json::array()}};
  w.send(nlohmann::json{{"cmd", "time"}, {"op", o}}.dump());
  const double ns = w.receive(600).at("ns").get<double>();
  return time_from_seconds(ns * 1e-9 / options_.time_scale);
}

}  // namespace

double torch_auto_time_scale(const TaskGraph& g, Time makespan) {
  return auto_time_scale(g, makespan, 20e-3, 2.0);
}

std::unique_ptr<Executor> make_torch_executor(const Scenario& s, TorchOptions options) {
  signal(SIGPIPE, SIG_IGN);  // a worker that died is reported, not a signal
  return std::make_unique<TorchExecutor>(s, options);
}

}  // namespace pipesim
