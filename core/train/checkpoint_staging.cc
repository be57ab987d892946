#include "core/train/checkpoint_staging.h"

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

bool OnDevice(const CheckpointPiece& piece) { return piece.data.device.type != DeviceType::kCpu; }

absl::Status Named(const absl::Status& status, const CheckpointPiece& piece, const char* what) {
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("checkpoint: ", what, " ", piece.name, ": ", status.message()));
}

}  // namespace

absl::Status StagePiecesToHost(Compute& compute, std::vector<CheckpointPiece>& pieces,
                               std::vector<std::vector<char>>& owned) {
  for (CheckpointPiece& piece : pieces) {
    if (!OnDevice(piece)) continue;
    owned.emplace_back(piece.data.nbytes());
    TITAN_RETURN_IF_ERROR(Named(compute.CopyToHost(piece.data, owned.back().data()), piece,
                                "staging to host memory"));
    piece.data.data = owned.back().data();
    piece.data.device = Device{};
  }
  return absl::OkStatus();
}

absl::Status LoadStaging::Prepare(Compute& compute, std::vector<CheckpointPiece>& pieces) {
  compute_ = &compute;
  for (CheckpointPiece& piece : pieces) {
    if (!OnDevice(piece)) continue;
    targets_.push_back(piece.data);
    host_.emplace_back(piece.data.nbytes());
    piece.data.data = host_.back().data();
    piece.data.device = Device{};
  }
  return absl::OkStatus();
}

absl::Status LoadStaging::Finish() {
  for (size_t i = 0; i < targets_.size(); ++i) {
    absl::Status copied = compute_->CopyFromHost(host_[i].data(), targets_[i]);
    if (!copied.ok()) {
      return absl::Status(copied.code(), absl::StrCat("checkpoint: copying a loaded tensor to the "
                                                      "device: ",
                                                      copied.message()));
    }
  }
  return compute_ == nullptr ? absl::OkStatus() : compute_->Synchronize();
}

}  // namespace titan
