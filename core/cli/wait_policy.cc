#include "core/cli/wait_policy.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace titan {
namespace {

// Set in the environment of the run started again, so it can tell its default from the user's.
constexpr char kMarker[] = "TITAN_OMP_WAIT_POLICY_DEFAULTED";
std::string exec_failure;  // why running again failed, if it did

}  // namespace

bool WaitPolicyNeedsDefault() { return std::getenv("OMP_WAIT_POLICY") == nullptr; }

void RunAgainWithDefaultWaitPolicy(char** argv) {
  setenv("OMP_WAIT_POLICY", kDefaultWaitPolicy, 1);
  setenv(kMarker, "1", 1);
  execv("/proc/self/exe", argv);
  exec_failure = std::strerror(errno);
  unsetenv("OMP_WAIT_POLICY");
  unsetenv(kMarker);
}

std::string WaitPolicyDescription() {
  if (!exec_failure.empty()) {
    return "libgomp's default (spin, then sleep): running again with OMP_WAIT_POLICY=" +
           std::string(kDefaultWaitPolicy) + " failed: " + exec_failure;
  }
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (policy == nullptr) return "libgomp's default (spin, then sleep)";
  const char* marker = std::getenv(kMarker);
  const bool defaulted = marker != nullptr && std::strcmp(policy, kDefaultWaitPolicy) == 0;
  return std::string("OMP_WAIT_POLICY=") + policy +
         (defaulted ? " (titan's default)" : " (set by the user)");
}

}  // namespace titan
