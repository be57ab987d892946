#include "core/fault_tolerance/gloo_group.h"

#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace titan {

absl::StatusOr<std::unique_ptr<GlooGroup>> GlooGroup::Connect(const std::string& store_folder,
                                                              const std::string& prefix, int rank,
                                                              int size,
                                                              std::chrono::milliseconds timeout) {
  const std::string folder = (std::filesystem::path(store_folder) / "gloo").string();
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("fault tolerance: cannot create Gloo's store ",
                                               folder, ": ", error.message()));
  }
  std::unique_ptr<GlooGroup> group(new GlooGroup());
  group->timeout_ = timeout;
  try {
    gloo::rendezvous::FileStore files(folder);
    gloo::rendezvous::PrefixStore store(prefix, files);
    // This machine's name, as the other groups reach it.
    std::shared_ptr<gloo::transport::Device> device =
        gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr());
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
    group->context_ = std::move(context);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("fault tolerance: Gloo could not connect rank ",
                                               rank, " of ", size, " (", prefix, ") through ",
                                               folder, ": ", e.what()));
  }
  return group;
}

GlooGroup::~GlooGroup() = default;

absl::Status GlooGroup::AllReduceSum(std::span<float> values) {
  try {
    gloo::AllreduceOptions options(context_);
    options.setOutput(values.data(), values.size());
    options.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    options.setTimeout(timeout_);
    gloo::allreduce(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("fault tolerance: Gloo's all-reduce across the groups failed: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status GlooGroup::Broadcast(void* data, size_t bytes, int root) {
  if (bytes == 0) return absl::OkStatus();
  try {
    gloo::BroadcastOptions options(context_);
    options.setOutput(static_cast<char*>(data), bytes);
    options.setRoot(root);
    options.setTimeout(timeout_);
    gloo::broadcast(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("fault tolerance: Gloo's broadcast across the groups failed: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace titan
