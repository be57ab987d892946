#include "tools/gpu_proof/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace titan::gpu_proof {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<pid_t> running_group{0};
volatile sig_atomic_t termination_signal = 0;

// SIGTERM or SIGINT: with a command running, its loop ends it and then this process; without,
// this process ends now.
void OnTermination(int signal_number) {
  if (running_group.load() == 0) {
    signal(signal_number, SIG_DFL);
    raise(signal_number);
    return;
  }
  termination_signal = signal_number;
}

void DieOfRequestedTermination() {
  if (termination_signal == 0) return;
  signal(termination_signal, SIG_DFL);
  raise(termination_signal);
}

// Every process below `root` in the process tree, from /proc: a launcher's ranks may sit in
// process groups of their own, out of reach of a signal to the command's group.
std::vector<pid_t> Descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parents;  // (pid, its parent)
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // "pid (command) state ppid ...": the command may hold spaces and parentheses.
    const size_t close = text.rfind(')');
    int parent = 0;
    char state = 0;
    if (close != std::string::npos &&
        std::sscanf(text.c_str() + close + 1, " %c %d", &state, &parent) == 2) {
      parents.emplace_back(std::stoi(name), parent);
    }
  }
  std::vector<pid_t> found = {root};
  for (size_t i = 0; i < found.size(); ++i) {
    for (const auto& [pid, parent] : parents) {
      if (parent == found[i]) found.push_back(pid);
    }
  }
  found.erase(found.begin());
  return found;
}

// Sends `signal_number` to the command's group and to each of `others`.
void SignalAll(pid_t group, const std::vector<pid_t>& others, int signal_number) {
  kill(-group, signal_number);
  for (pid_t pid : others) kill(pid, signal_number);
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<std::string> CurrentEnvironment() {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) entries.emplace_back(*entry);
  return entries;
}

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// In the forked child: its own group, output into the pipe, then the program.
[[noreturn]] void ExecChild(int pipe_write, std::vector<char*>& argv, std::vector<char*>& envp) {
  setpgid(0, 0);
  signal(SIGPIPE, SIG_DFL);  // the proof ignores it; an ignored signal stays ignored over exec
  dup2(pipe_write, STDOUT_FILENO);
  dup2(pipe_write, STDERR_FILENO);
  int null_input = open("/dev/null", O_RDONLY);
  if (null_input >= 0) dup2(null_input, STDIN_FILENO);
  if (std::strchr(argv[0], '/') != nullptr) {
    execve(argv[0], argv.data(), envp.data());
  } else {
    execvpe(argv[0], argv.data(), envp.data());
  }
  const std::string message =
      absl::StrCat("cannot run ", argv[0], ": ", std::strerror(errno), "\n");
  ssize_t ignored = write(STDOUT_FILENO, message.data(), message.size());
  (void)ignored;
  _exit(127);
}

}  // namespace

std::string RunResult::Describe() const {
  if (!started) return "not started";
  if (timed_out) return absl::StrFormat("timed out after %.1f s", seconds);
  if (signal != 0) return absl::StrFormat("signal %d (%s)", signal, strsignal(signal));
  return absl::StrCat("exit ", exit_code);
}

std::vector<std::string> ChildEnvironment(const std::vector<std::string>& base,
                                          const Command& command) {
  auto changed = [&command](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('='));
    for (const auto& [set_name, value] : command.set_env) {
      if (set_name == name) return true;
    }
    for (const std::string& unset_name : command.unset_env) {
      if (unset_name == name) return true;
    }
    return false;
  };
  std::vector<std::string> environment;
  for (const std::string& entry : base) {
    if (!changed(entry)) environment.push_back(entry);
  }
  // A name set twice takes its last value (a part's own setting after the proof's).
  for (size_t i = 0; i < command.set_env.size(); ++i) {
    const auto& [name, value] = command.set_env[i];
    bool set_later = false;
    for (size_t j = i + 1; j < command.set_env.size(); ++j) {
      set_later = set_later || command.set_env[j].first == name;
    }
    if (!set_later) environment.push_back(name + "=" + value);
  }
  return environment;
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::vector<std::string> quoted;
  for (const std::string& arg : argv) {
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_./=:,+-@%") == std::string::npos;
    quoted.push_back(
        plain ? arg : absl::StrCat("'", absl::StrJoin(absl::StrSplit(arg, '\''), "'\\''"), "'"));
  }
  return absl::StrJoin(quoted, " ");
}

std::string Tail(const std::string& text, int lines) {
  size_t start = text.size();
  // A final newline does not start a line of its own.
  if (start > 0 && text[start - 1] == '\n') --start;
  for (int seen = 0; start > 0; --start) {
    if (text[start - 1] == '\n' && ++seen == lines) break;
  }
  return text.substr(start);
}

RunResult RunCommand(const Command& command, const std::string& log_path, double limit_s,
                     double grace_s) {
  RunResult result;
  const std::string line = CommandLine(command.argv);
  FILE* log = std::fopen(log_path.c_str(), "a");
  if (log != nullptr) {
    std::fprintf(log, "$ %s\n", line.c_str());
    std::fflush(log);
  }
  const Clock::time_point start = Clock::now();

  // Everything the child needs is built before fork: the child only calls exec.
  std::vector<std::string> argv_strings = command.argv;
  std::vector<std::string> env_strings = ChildEnvironment(CurrentEnvironment(), command);
  std::vector<char*> argv = NullTerminated(argv_strings), envp = NullTerminated(env_strings);
  int fds[2];
  if (argv_strings.empty() || pipe2(fds, O_CLOEXEC) != 0) {
    result.output = argv_strings.empty() ? "empty command\n" : "cannot make a pipe\n";
  } else if (pid_t pid = fork(); pid < 0) {
    result.output = absl::StrCat("cannot fork: ", std::strerror(errno), "\n");
    close(fds[0]);
    close(fds[1]);
  } else if (pid == 0) {
    ExecChild(fds[1], argv, envp);
  } else {
    setpgid(pid, pid);  // as the child does, whichever runs first
    running_group = pid;
    close(fds[1]);
    result.started = true;
    bool pipe_open = true, exited = false;
    double term_at = -1, kill_at = -1, exited_at = -1;
    std::vector<pid_t> tree;  // the command's descendants when it was told to stop
    while (pipe_open || !exited) {
      pollfd readable = {fds[0], POLLIN, 0};
      if (pipe_open && poll(&readable, 1, 50) > 0) {
        char buffer[65536];
        ssize_t n = read(fds[0], buffer, sizeof buffer);
        if (n > 0) {
          result.output.append(buffer, n);
          if (log != nullptr) {
            std::fwrite(buffer, 1, n, log);
            std::fflush(log);
          }
        } else if (n == 0 || errno != EINTR) {
          pipe_open = false;
        }
      } else if (!pipe_open) {
        usleep(50 * 1000);
      }
      const double now = SecondsSince(start);
      siginfo_t info = {};
      // WNOWAIT keeps the exited child's pid reserved while what it left behind is killed.
      if (!exited && waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid == pid) {
        SignalAll(pid, tree, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
        exited = true;
        exited_at = now;
      }
      const bool stop = now >= limit_s || termination_signal != 0;
      if (!exited && stop && term_at < 0) {
        result.timed_out = now >= limit_s;
        term_at = now;
        tree = Descendants(pid);
        SignalAll(pid, tree, SIGTERM);
      }
      if (!exited && term_at >= 0 && now >= term_at + grace_s && kill_at < 0) {
        kill_at = now;
        for (pid_t late : Descendants(pid)) tree.push_back(late);
        SignalAll(pid, tree, SIGKILL);
      }
      // Something outside the tree may hold the pipe open: the command is over anyway.
      if (exited && now > exited_at + 2.0) break;
    }
    running_group = 0;
    close(fds[0]);
  }
  if (termination_signal != 0 && log != nullptr) {
    std::fprintf(log, "\n[stopped by signal %d]\n", static_cast<int>(termination_signal));
  }
  result.seconds = SecondsSince(start);
  if (log != nullptr) {
    std::fprintf(log, "%s$ %s (%.1fs, status %s)\n\n",
                 result.output.empty() || result.output.back() == '\n' ? "" : "\n", line.c_str(),
                 result.seconds, result.Describe().c_str());
    std::fclose(log);
  }
  DieOfRequestedTermination();
  return result;
}

void KillChildrenOnTermination() {
  signal(SIGTERM, OnTermination);
  signal(SIGINT, OnTermination);
}

}  // namespace titan::gpu_proof
