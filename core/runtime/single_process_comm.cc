#include "core/runtime/single_process_comm.h"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

absl::Status CheckSameSize(const char* op, const TensorView& input, const TensorView& output) {
  if (input.nbytes() != output.nbytes() || input.dtype != output.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, " on one rank: input (", input.numel(), " x ", DTypeName(input.dtype), ") and output (",
        output.numel(), " x ", DTypeName(output.dtype), ") must match"));
  }
  return absl::OkStatus();
}

absl::Status CheckRank(const char* op, int rank) {
  if (rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": rank ", rank, " is not in a group of one rank"));
  }
  return absl::OkStatus();
}

// A host communicator: it copies with memmove, so device memory is refused (see communicator.h).
absl::Status CopyIfDistinct(const TensorView& input, TensorView& output) {
  if (input.device.type != DeviceType::kCpu || output.device.type != DeviceType::kCpu) {
    return absl::InvalidArgumentError(
        "single-process communicator: buffers must be on the cpu (host memory)");
  }
  if (input.data != output.data) std::memmove(output.data, input.data, input.nbytes());
  return absl::OkStatus();
}

}  // namespace

absl::Status SingleProcessCommunicator::AllReduce(TensorView, ReduceOp) { return absl::OkStatus(); }

absl::Status SingleProcessCommunicator::ReduceScatter(const TensorView& input, TensorView output,
                                                      ReduceOp) {
  TITAN_RETURN_IF_ERROR(CheckSameSize("reduce-scatter", input, output));
  return CopyIfDistinct(input, output);
}

absl::Status SingleProcessCommunicator::AllGather(const TensorView& input, TensorView output) {
  TITAN_RETURN_IF_ERROR(CheckSameSize("all-gather", input, output));
  return CopyIfDistinct(input, output);
}

absl::Status SingleProcessCommunicator::Broadcast(TensorView, int root) {
  return CheckRank("broadcast root", root);
}

absl::Status SingleProcessCommunicator::Send(const TensorView&, int peer, int) {
  return absl::FailedPreconditionError(
      absl::StrCat("send to rank ", peer, ": a group of one rank has no peer to send to"));
}

absl::Status SingleProcessCommunicator::Recv(TensorView, int peer, int) {
  return absl::FailedPreconditionError(
      absl::StrCat("recv from rank ", peer, ": a group of one rank has no peer to receive from"));
}

absl::StatusOr<std::unique_ptr<Communicator::Transfer>> SingleProcessCommunicator::Exchange(
    std::span<const PeerMessage> messages) {
  if (!messages.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("exchange with rank ", messages.front().peer, " (", messages.size(),
                     " messages): a group of one rank has no peer to exchange with"));
  }
  return std::unique_ptr<Transfer>(new Transfers({}));
}

absl::StatusOr<std::unique_ptr<Communicator>> SingleProcessCommunicator::Split(int, int) {
  return std::unique_ptr<Communicator>(
      new SingleProcessCommunicator(ordered_point_to_point_, flight_record_folder_));
}

absl::StatusOr<std::string> SingleProcessCommunicator::DumpFlightRecord(absl::string_view reason) {
  if (flight_record_folder_.empty()) return Communicator::DumpFlightRecord(reason);
  namespace fs = std::filesystem;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const nlohmann::json record = {{"rank", 0},
                                 {"reason", std::string(reason)},
                                 {"written_us", now_us},
                                 {"collectives", nlohmann::json::array()}};
  std::error_code error;
  fs::create_directories(flight_record_folder_, error);
  if (error) {
    return absl::InternalError(absl::StrCat("flight recorder: cannot create folder ",
                                            flight_record_folder_, ": ", error.message()));
  }
  const std::string path =
      (fs::path(flight_record_folder_) / "flight_recorder_rank0.json").string();
  const std::string temporary = path + ".tmp";  // a reader never sees half a file
  {
    std::ofstream out(temporary);
    out << record.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) return absl::InternalError(absl::StrCat("flight recorder: cannot write ", temporary));
  }
  fs::rename(temporary, path, error);
  if (error) {
    return absl::InternalError(absl::StrCat("flight recorder: cannot rename ", temporary, " to ",
                                            path, ": ", error.message()));
  }
  return path;
}

absl::StatusOr<std::unique_ptr<Communicator>> SingleProcessComm::ConnectWorld(
    const JoinOptions& options) {
  return std::unique_ptr<Communicator>(
      new SingleProcessCommunicator(false, FlightRecordFolder(options.dump_folder)));
}

std::string FlightRecordFolder(const std::string& dump_folder) {
  return (std::filesystem::path(dump_folder.empty() ? "." : dump_folder) / "flight_recorder")
      .string();
}

}  // namespace titan
