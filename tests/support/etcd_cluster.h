// An etcd cluster of a few members on loopback ports, for tests of the fault-tolerance store:
// each member a child process (Debian's etcd-server) with its data in a folder of the test's.
// The members are killed when the cluster goes out of scope.
#ifndef TITAN_TESTS_SUPPORT_ETCD_CLUSTER_H_
#define TITAN_TESTS_SUPPORT_ETCD_CLUSTER_H_

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace titan::testing {

inline constexpr char kEtcd[] = "/usr/bin/etcd";

// A port the kernel had free on 127.0.0.1 a moment ago.
inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class EtcdCluster {
 public:
  EtcdCluster(int members, const std::filesystem::path& folder) : folder_(folder) {
    std::filesystem::remove_all(folder);
    std::filesystem::create_directories(folder);
    std::vector<std::string> peers;
    std::string initial;
    for (int m = 0; m < members; ++m) {
      endpoints_.push_back("http://127.0.0.1:" + std::to_string(FreeLoopbackPort()));
      peers.push_back("http://127.0.0.1:" + std::to_string(FreeLoopbackPort()));
      initial += (m ? "," : "") + Name(m) + "=" + peers.back();
    }
    for (int m = 0; m < members; ++m) {
      // Generous Raft timings: the test machine's cores are shared.
      std::vector<std::string> args = {kEtcd,
                                       "--name=" + Name(m),
                                       "--data-dir=" + (folder / Name(m)).string(),
                                       "--listen-client-urls=" + endpoints_[m],
                                       "--advertise-client-urls=" + endpoints_[m],
                                       "--listen-peer-urls=" + peers[m],
                                       "--initial-advertise-peer-urls=" + peers[m],
                                       "--initial-cluster=" + initial,
                                       "--initial-cluster-state=new",
                                       "--initial-cluster-token=titan-test",
                                       "--heartbeat-interval=200",
                                       "--election-timeout=2000",
                                       "--logger=zap",
                                       "--log-outputs=" + (folder / (Name(m) + ".log")).string()};
      std::vector<char*> argv;
      for (std::string& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      pid_t pid = -1;
      if (posix_spawn(&pid, kEtcd, nullptr, nullptr, argv.data(), environ) != 0) pid = -1;
      pids_.push_back(pid);
    }
  }
  // Kills the members and removes their data (etcd preallocates 64 MB of log a member).
  ~EtcdCluster() {
    for (size_t m = 0; m < pids_.size(); ++m) Kill(static_cast<int>(m));
    std::error_code error;
    std::filesystem::remove_all(folder_, error);
  }

  static bool Installed() { return access(kEtcd, X_OK) == 0; }
  bool started() const {
    for (pid_t pid : pids_) {
      if (pid <= 0) return false;
    }
    return true;
  }
  const std::vector<std::string>& endpoints() const { return endpoints_; }

  // SIGKILL, as a crashed member or a lost node.
  void Kill(int member) {
    if (pids_[member] <= 0) return;
    kill(pids_[member], SIGKILL);
    waitpid(pids_[member], nullptr, 0);
    pids_[member] = -1;
  }

 private:
  static std::string Name(int member) { return "member" + std::to_string(member); }
  std::filesystem::path folder_;
  std::vector<std::string> endpoints_;
  std::vector<pid_t> pids_;
};

}  // namespace titan::testing

#endif  // TITAN_TESTS_SUPPORT_ETCD_CLUSTER_H_
