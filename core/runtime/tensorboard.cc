#include "core/runtime/tensorboard.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "core/runtime/tensorboard_event.pb.h"
#include "core/tensor/internal/crc32c.h"

namespace titan {
namespace {

constexpr int kDtDouble = 2;
constexpr int kDataClassScalar = 1;

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// Debian 12's Abseil (20220623) predates absl/crc and Debian ships no C++ CRC32C library, so
// the arena files' CRC32C (SSE4.2 where the CPU has it) serves here too.
uint32_t MaskedCrc32c(absl::string_view data) {
  const uint32_t crc = internal::ExtendCrc32c(0, data.data(), data.size());
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

absl::StatusOr<std::unique_ptr<TensorBoardWriter>> TensorBoardWriter::Open(
    const std::string& folder) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  auto writer = std::unique_ptr<TensorBoardWriter>(new TensorBoardWriter());
  writer->path_ = (std::filesystem::path(folder) / absl::StrCat("events.out.tfevents.",
                                                                static_cast<int64_t>(WallTime()),
                                                                ".", host, ".", getpid()))
                      .string();
  writer->out_.open(writer->path_, std::ios::binary | std::ios::trunc);
  if (error || !writer->out_) {
    return absl::PermissionDeniedError(absl::StrCat(
        "metrics.save_tb_folder: cannot create the TensorBoard event file ", writer->path_));
  }
  tensorboard::Event header;
  header.set_wall_time(WallTime());
  header.set_file_version("brain.Event:2");
  TITAN_RETURN_IF_ERROR(writer->WriteRecord(header.SerializeAsString()));
  return writer;
}

absl::Status TensorBoardWriter::AddScalars(
    int64_t step, const std::vector<std::pair<std::string, double>>& scalars) {
  tensorboard::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  for (const auto& [tag, value] : scalars) {
    tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("scalars");
    v->mutable_metadata()->set_data_class(kDataClassScalar);
    v->mutable_tensor()->set_dtype(kDtDouble);
    v->mutable_tensor()->mutable_tensor_shape();
    v->mutable_tensor()->add_double_val(value);
  }
  return WriteRecord(event.SerializeAsString());
}

absl::Status TensorBoardWriter::WriteRecord(const std::string& data) {
  char header[12];
  const uint64_t length = data.size();  // little-endian on every host titan builds for
  std::memcpy(header, &length, sizeof(length));
  const uint32_t length_crc = MaskedCrc32c(absl::string_view(header, sizeof(length)));
  std::memcpy(header + 8, &length_crc, sizeof(length_crc));
  const uint32_t data_crc = MaskedCrc32c(data);
  out_.write(header, sizeof(header));
  out_.write(data.data(), static_cast<std::streamsize>(data.size()));
  out_.write(reinterpret_cast<const char*>(&data_crc), sizeof(data_crc));
  out_.flush();
  if (!out_) return absl::DataLossError(absl::StrCat("TensorBoard: cannot write to ", path_));
  return absl::OkStatus();
}

}  // namespace titan
