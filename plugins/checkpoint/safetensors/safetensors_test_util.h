// Shared by the safetensors plugin's tests: the plugin loaded as titan loads it, a scratch
// folder per test, and a model's parameters as bytes.
#ifndef TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_SAFETENSORS_TEST_UTIL_H_
#define TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_SAFETENSORS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/single_process_comm.h"
#include "plugins/checkpoint/safetensors/safetensors_file.h"
#include "tests/checkpoint/model_checkpoint.h"
#include "titan/checkpoint.h"

namespace titan::safetensors_testing {

namespace fs = std::filesystem;
using namespace titan::checkpoint_testing;  // NOLINT: the test helpers read as one set

inline std::unique_ptr<CheckpointPlugin> LoadPlugin() {
  static PluginRegistry* registry =
      std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value().release();
  return std::move(registry->Create<CheckpointPlugin>("safetensors")).value();
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("titan_safetensors_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  absl::Status Save(const std::string& folder, const std::vector<CheckpointPiece>& pieces,
                    const CheckpointMetadata& metadata) {
    return plugin_->Save(folder, pieces, metadata, comm_);
  }
  absl::Status Load(const std::string& folder, std::vector<CheckpointPiece> pieces) {
    return plugin_->Load(folder, pieces, comm_);
  }

  std::unique_ptr<CheckpointPlugin> plugin_ = LoadPlugin();
  SingleProcessCommunicator comm_;
  fs::path dir_;
};

// Every parameter's bytes, in arena order.
inline std::vector<std::string> ParameterBytes(const DecoderModel& model) {
  std::vector<std::string> bytes;
  for (const Parameter& p : model.Parameters()) {
    bytes.emplace_back(static_cast<const char*>(p.value.data), p.value.nbytes());
  }
  return bytes;
}

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The file's tensors by name, their data in the file's bytes.
class StoredFile {
 public:
  explicit StoredFile(const fs::path& path) : bytes_(ReadFile(path)) {
    auto header = safetensors::ParseHeader(bytes_, path.string());
    EXPECT_TRUE(header.ok()) << header.status();
    if (header.ok()) header_ = *std::move(header);
  }
  const float* Find(const std::string& name) const {
    for (const auto& t : header_.tensors) {
      if (t.name == name)
        return reinterpret_cast<const float*>(&bytes_[header_.data_start + t.begin]);
    }
    return nullptr;
  }
  const safetensors::FileHeader& header() const { return header_; }

 private:
  std::string bytes_;
  safetensors::FileHeader header_;
};

}  // namespace titan::safetensors_testing

#endif  // TITAN_PLUGINS_CHECKPOINT_SAFETENSORS_SAFETENSORS_TEST_UTIL_H_
