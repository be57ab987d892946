#include "plugins/checkpoint/safetensors/collective.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace titan::safetensors {
namespace {

// Messages stay well below MPI's int count of bytes.
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;

TensorView View(void* data, DType dtype, int64_t count) {
  return TensorView{data, dtype, Device{}, {count}, {}};
}

// Bytes as whole i64 words, the unit text travels in.
std::vector<int64_t> Words(const std::string& bytes) {
  std::vector<int64_t> words((bytes.size() + 7) / 8, 0);
  if (!bytes.empty()) std::memcpy(words.data(), bytes.data(), bytes.size());
  return words;
}

template <typename Call>
absl::Status InChunks(char* data, DType dtype, int64_t count, Call call) {
  const int64_t size = static_cast<int64_t>(DTypeSize(dtype));
  const int64_t chunk = kMaxMessageBytes / size;
  for (int64_t done = 0; done < count; done += chunk) {
    TITAN_RETURN_IF_ERROR(call(View(data + done * size, dtype, std::min(chunk, count - done))));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status BroadcastStatus(const absl::Status& status, int root, Communicator& comm) {
  const std::string message(status.message());
  int64_t header[2] = {static_cast<int64_t>(status.code()), static_cast<int64_t>(message.size())};
  TITAN_RETURN_IF_ERROR(comm.Broadcast(View(header, DType::kI64, 2), root));
  if (header[0] == 0) return absl::OkStatus();
  std::vector<int64_t> words = Words(comm.rank() == root ? message : std::string());
  words.resize(static_cast<size_t>((header[1] + 7) / 8));
  TITAN_RETURN_IF_ERROR(
      comm.Broadcast(View(words.data(), DType::kI64, static_cast<int64_t>(words.size())), root));
  return absl::Status(
      static_cast<absl::StatusCode>(header[0]),
      std::string(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(header[1])));
}

absl::Status AgreeOnStatus(const absl::Status& local, Communicator& comm) {
  int32_t first_failed = local.ok() ? comm.size() : comm.rank();
  TITAN_RETURN_IF_ERROR(comm.AllReduce(View(&first_failed, DType::kI32, 1), ReduceOp::kMin));
  if (first_failed == comm.size()) return absl::OkStatus();
  absl::Status shared = BroadcastStatus(local, first_failed, comm);
  if (comm.rank() == first_failed) return local;
  return absl::Status(shared.code(), absl::StrCat("rank ", first_failed, ": ", shared.message()));
}

absl::StatusOr<std::vector<std::string>> GatherToRoot(const std::string& bytes,
                                                      Communicator& comm) {
  int64_t mine = static_cast<int64_t>(bytes.size());
  std::vector<int64_t> sizes(static_cast<size_t>(comm.size()));
  TITAN_RETURN_IF_ERROR(
      comm.AllGather(View(&mine, DType::kI64, 1), View(sizes.data(), DType::kI64, comm.size())));
  constexpr int kTag = 0x5a17;
  if (comm.rank() != 0) {
    std::vector<int64_t> words = Words(bytes);
    if (!words.empty()) {
      TITAN_RETURN_IF_ERROR(SendElements(words.data(), DType::kI64,
                                         static_cast<int64_t>(words.size()), 0, kTag, comm));
    }
    return std::vector<std::string>();
  }
  std::vector<std::string> all = {bytes};
  for (int r = 1; r < comm.size(); ++r) {
    std::vector<int64_t> words(static_cast<size_t>((sizes[r] + 7) / 8));
    if (!words.empty()) {
      TITAN_RETURN_IF_ERROR(RecvElements(words.data(), DType::kI64,
                                         static_cast<int64_t>(words.size()), r, kTag, comm));
    }
    all.emplace_back(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(sizes[r]));
  }
  return all;
}

absl::Status SendElements(const void* data, DType dtype, int64_t count, int peer, int tag,
                          Communicator& comm) {
  // Send reads the buffer only; the view type has no const variant.
  return InChunks(static_cast<char*>(const_cast<void*>(data)), dtype, count,
                  [&](const TensorView& chunk) { return comm.Send(chunk, peer, tag); });
}

absl::Status RecvElements(void* data, DType dtype, int64_t count, int peer, int tag,
                          Communicator& comm) {
  return InChunks(static_cast<char*>(data), dtype, count,
                  [&](const TensorView& chunk) { return comm.Recv(chunk, peer, tag); });
}

}  // namespace titan::safetensors
