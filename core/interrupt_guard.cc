#include "core/interrupt_guard.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>

namespace pipesim {
namespace {

constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
constexpr size_t kMaxFiles = 16, kMaxPath = 4096;

// Written only by the thread holding the guard, with the signals' handler reading them:
// a path is complete before the count that makes it visible is raised.
char g_paths[kMaxFiles][kMaxPath];
std::atomic<int> g_count{0};
struct sigaction g_old[kSignals.size()];
bool g_installed[kSignals.size()] = {};
// One guard at a time: threads committing outputs together (Python releases its lock)
// take turns.
std::mutex g_turn;

void on_signal(int sig, siginfo_t* info, void* context) {
  const int n = g_count.load();
  for (int i = 0; i < n; ++i) ::unlink(g_paths[i]);
  g_count.store(0);
  for (size_t k = 0; k < kSignals.size(); ++k) {
    if (kSignals[k] != sig) continue;
    const struct sigaction& old = g_old[k];
    if (old.sa_flags & SA_SIGINFO) {
      if (old.sa_sigaction != nullptr) old.sa_sigaction(sig, info, context);
      return;
    }
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN && old.sa_handler != nullptr) {
      old.sa_handler(sig);
      return;
    }
  }
  ::_exit(128 + sig);
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_turn.lock();
  g_count.store(0);
  for (size_t k = 0; k < kSignals.size(); ++k) {
    struct sigaction now {};
    now.sa_sigaction = on_signal;
    now.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&now.sa_mask);
    struct sigaction old {};
    ::sigaction(kSignals[k], nullptr, &old);
    g_installed[k] = !(!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN);
    if (!g_installed[k]) continue;  // an ignored signal stays ignored
    g_old[k] = old;
    ::sigaction(kSignals[k], &now, nullptr);
  }
}

InterruptGuard::~InterruptGuard() {
  for (size_t k = 0; k < kSignals.size(); ++k)
    if (g_installed[k]) ::sigaction(kSignals[k], &g_old[k], nullptr);
  g_count.store(0);
  g_turn.unlock();
}

bool InterruptGuard::add(const std::string& path) {
  const int n = g_count.load();
  if (n >= static_cast<int>(kMaxFiles) || path.size() >= kMaxPath) return false;
  std::memcpy(g_paths[n], path.c_str(), path.size() + 1);
  g_count.store(n + 1);
  return true;
}

void InterruptGuard::clear() { g_count.store(0); }

InterruptGuard::Hold::Hold() {
  sigset_t block;
  sigemptyset(&block);
  for (const int s : kSignals) sigaddset(&block, s);
  ::pthread_sigmask(SIG_BLOCK, &block, &old_);
}

InterruptGuard::Hold::~Hold() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace pipesim
