#include "core/train/run_control.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace titan {
namespace {

std::atomic<int> stop_signal{0};
std::atomic<bool> flight_record_requested{false};

extern "C" void OnFlightRecordSignal(int) { flight_record_requested.store(true); }

// Only async-signal-safe calls here: an atomic exchange, write and _exit.
extern "C" void OnStopSignal(int signal) {
  if (stop_signal.exchange(signal) != 0) {
    constexpr char kAgain[] = "titan: second stop signal: exiting at once, without saving\n";
    (void)!write(STDERR_FILENO, kAgain, sizeof(kAgain) - 1);
    _exit(128 + signal);
  }
  constexpr char kFirst[] =
      "titan: stop signal: finishing this step and saving; send it again to exit at once\n";
  (void)!write(STDERR_FILENO, kFirst, sizeof(kFirst) - 1);
}

}  // namespace

void InstallStopSignalHandlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in progress carry on
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void InstallFlightRecordSignalHandler() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnFlightRecordSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);
}

void ServeFlightRecordRequest(Communicator& world, absl::string_view when) {
  if (!flight_record_requested.exchange(false)) return;
  const std::string at(when);
  absl::StatusOr<std::string> record = world.DumpFlightRecord(absl::StrCat("SIGUSR1, ", at));
  if (record.ok()) {
    spdlog::info("[comm] SIGUSR1: flight record of rank {} ({}) in {}", world.rank(), at, *record);
  } else {
    spdlog::warn("[comm] SIGUSR1: rank {} could not write its flight record ({}): {}", world.rank(),
                 at, std::string(record.status().message()));
  }
}

int StopSignal() { return stop_signal.load(); }

std::string SignalName(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGINT) return "SIGINT";
  return absl::StrCat("signal ", signal);
}

absl::StatusOr<bool> AgreeToStop(Communicator& world) {
  int32_t stop = StopSignal() != 0 ? 1 : 0;
  TITAN_RETURN_IF_ERROR(
      world.AllReduce(TensorView{&stop, DType::kI32, Device{}, {1}, {}}, ReduceOp::kMax));
  return stop != 0;
}

absl::Status UseTrainTimeouts(Communicator& world) {
  TITAN_RETURN_IF_ERROR(world.Barrier());
  world.UseTrainTimeout();
  return absl::OkStatus();
}

void DelayBeforeTrainingForTest(int rank) {
  const char* value = std::getenv("TITAN_TEST_DELAY_BEFORE_TRAINING");
  if (value == nullptr) return;
  std::pair<std::string, std::string> parts = absl::StrSplit(value, ':');
  int delayed_rank = -1;
  double seconds = 0;
  if (!absl::SimpleAtoi(parts.first, &delayed_rank) || !absl::SimpleAtod(parts.second, &seconds)) {
    spdlog::warn("TITAN_TEST_DELAY_BEFORE_TRAINING={}: expected <rank>:<seconds>; ignored", value);
    return;
  }
  if (rank != delayed_rank) return;
  spdlog::warn("[test] delaying rank {} by {}s before its first step", rank, seconds);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

}  // namespace titan
