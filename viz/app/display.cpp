#include "app/display.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace flt::viz {
namespace {

constexpr int kStartTimeoutMs = 15000;  // Xvfb is ready in well under a second when it works

// The first executable `name` on PATH; empty when there is none.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

// Stops a child: SIGTERM, up to a second to exit, then SIGKILL; always reaps it.
void stop_child(pid_t pid) {
  kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

std::string exit_description(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace

bool display_available() {
  const char* x11 = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  return (x11 && *x11) || (wayland && *wayland);
}

VirtualDisplay::VirtualDisplay(int width, int height) {
  const std::string xvfb = find_on_path("Xvfb");
  if (xvfb.empty()) {
    throw std::runtime_error(
        "flt-lab: no display (DISPLAY is not set) and no Xvfb to start one. Install the virtual X "
        "server:\n  sudo apt-get install xvfb");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("flt-lab: pipe: ") + std::strerror(errno));

  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  const std::string displayfd = std::to_string(fds[1]);
  const std::string screen = std::to_string(width) + "x" + std::to_string(height) + "x24";
  const char* argv[] = {xvfb.c_str(), "-displayfd", displayfd.c_str(),
                        "-screen",    "0",          screen.c_str(),
                        "-nolisten",  "tcp",        nullptr};
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    throw std::runtime_error(std::string("flt-lab: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // The server dies with flt-lab, however flt-lab ends (the check covers a parent that died
    // before prctl).
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {  // Xvfb's warnings (xkbcomp, font paths) are noise here
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    fcntl(fds[1], F_SETFD, 0);  // the write end survives exec: Xvfb reports its display there
    execv(argv[0], const_cast<char* const*>(argv));
    _exit(127);
  }
  close(fds[1]);
  pid_ = pid;

  // Xvfb writes "N\n" to the pipe once it accepts clients on display :N.
  std::string number;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kStartTimeoutMs);
  std::string failure;
  while (failure.empty()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      failure = "did not report a display within " + std::to_string(kStartTimeoutMs / 1000) + " s";
      break;
    }
    char c = 0;
    const ssize_t n = read(fds[0], &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // closed without a display number: the server has gone
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
      failure = exit_description(status);
    } else if (c == '\n') {
      break;
    } else {
      number += c;
    }
  }
  close(fds[0]);
  if (!failure.empty()) {
    if (pid_ > 0) stop_child(pid_);
    pid_ = -1;
    throw std::runtime_error("flt-lab: no display (DISPLAY is not set) and " + xvfb + " " +
                             failure + "; run `" + xvfb + " -displayfd 1` to see why");
  }
  name_ = ":" + number;
  setenv("DISPLAY", name_.c_str(), /*overwrite=*/1);
}

VirtualDisplay::~VirtualDisplay() {
  if (pid_ > 0) stop_child(pid_);
  unsetenv("DISPLAY");
}

}  // namespace flt::viz
