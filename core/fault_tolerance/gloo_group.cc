#include "core/fault_tolerance/gloo_group.h"

#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

// Gloo's rendezvous through the quorum's store, under "gloo/". Gloo reads the errors it throws.
class RendezvousStore : public gloo::rendezvous::Store {
 public:
  RendezvousStore(QuorumStore& store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    const absl::Status put = store_.Put(Key(key), std::string(data.begin(), data.end()));
    if (!put.ok()) throw std::runtime_error(std::string(put.message()));
  }

  std::vector<char> get(const std::string& key) override {
    wait({key});
    absl::StatusOr<std::optional<std::string>> value = store_.Get(Key(key));
    if (!value.ok()) throw std::runtime_error(std::string(value.status().message()));
    const std::string& text = value->value();
    return std::vector<char>(text.begin(), text.end());
  }

  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const std::string& key : keys) {
      while (true) {
        absl::StatusOr<std::optional<std::string>> value = store_.Get(Key(key));
        if (value.ok() && value->has_value()) break;
        if (std::chrono::steady_clock::now() > deadline) {
          throw std::runtime_error(absl::StrCat(
              "no peer wrote ", Key(key), " in the ", store_.Describe(), " within ",
              timeout.count(), " ms", value.ok() ? "" : ": ", value.status().message()));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }

 private:
  static std::string Key(const std::string& key) { return absl::StrCat("gloo/", key); }
  QuorumStore& store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<GlooGroup>> GlooGroup::Connect(QuorumStore& quorum_store,
                                                              const std::string& prefix, int rank,
                                                              int size,
                                                              std::chrono::milliseconds timeout) {
  std::unique_ptr<GlooGroup> group(new GlooGroup());
  group->timeout_ = timeout;
  try {
    RendezvousStore rendezvous(quorum_store, timeout);
    gloo::rendezvous::PrefixStore store(prefix, rendezvous);
    // This machine's name, as the other groups reach it.
    std::shared_ptr<gloo::transport::Device> device =
        gloo::transport::tcp::CreateDevice(gloo::transport::tcp::attr());
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
    group->context_ = std::move(context);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("fault tolerance: Gloo could not connect rank ",
                                               rank, " of ", size, " (", prefix, ") through the ",
                                               quorum_store.Describe(), ": ", e.what()));
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
