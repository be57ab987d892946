// Damaged exports: every truncation and many flipped bits of a real export either load or fail
// with an error naming the file, and never crash (the sanitizer build checks every access).
#include <gtest/gtest.h>

#include "plugins/checkpoint/safetensors/safetensors_test_util.h"

namespace titan::safetensors_testing {
namespace {

class SafetensorsFuzzTest : public SafetensorsTest {
 protected:
  void SetUp() override {
    SafetensorsTest::SetUp();
    config_.dim = 16, config_.n_layers = 1, config_.n_heads = 2, config_.n_kv_heads = 1;
    config_.vocab_size = 11, config_.multiple_of = 16;
    model_ = SmallModel(config_);
    folder_ = (dir_ / "e").string();
    ASSERT_TRUE(Save(folder_, ModelPieces(*model_), ModelMetadata(config_)).ok());
    target_ = SmallModel(config_, 7);
  }

  // Writes `bytes` as `file` in the export, loads it, and restores the file.
  void Expect(const std::string& file, const std::string& bytes, const std::string& what) {
    const fs::path path = fs::path(folder_) / file;
    const std::string original = ReadFile(path);
    WriteFile(path, bytes);
    absl::Status status = Load(folder_, ModelPieces(*target_));
    if (!status.ok()) {
      ++failures_;
      EXPECT_NE(status.message().find(path.string()), absl::string_view::npos)
          << what << ": " << status;
    }
    absl::StatusOr<CheckpointContents> read = plugin_->Read(folder_);
    EXPECT_EQ(read.ok(), status.ok()) << what;
    WriteFile(path, original);
  }

  LlamaConfig config_ = SmallConfig();
  std::unique_ptr<DecoderModel> model_, target_;
  std::string folder_;
  int failures_ = 0;
};

// The data section's bytes are plain values: a sample of them stands for all.
bool Sampled(size_t i, size_t data_start, size_t size, size_t stride) {
  return i < data_start || i + 16 >= size || i % stride == 0;
}

TEST_F(SafetensorsFuzzTest, EveryTruncationFails) {
  const std::string file = ReadFile(fs::path(folder_) / "model.safetensors");
  const size_t data_start = 8 + static_cast<uint8_t>(file[0]) + 256 * static_cast<uint8_t>(file[1]);
  int tried = 0;
  for (size_t length = 0; length < file.size(); ++length) {
    if (!Sampled(length, data_start, file.size(), 7)) continue;
    Expect("model.safetensors", file.substr(0, length), "truncated to " + std::to_string(length));
    ++tried;
  }
  Expect("model.safetensors", file + "x", "one byte appended");
  EXPECT_EQ(failures_, tried + 1) << "a shorter or longer file never loads";
}

TEST_F(SafetensorsFuzzTest, FlippedBitsLoadOrFailCleanly) {
  const std::string file = ReadFile(fs::path(folder_) / "model.safetensors");
  const size_t data_start = 8 + static_cast<uint8_t>(file[0]) + 256 * static_cast<uint8_t>(file[1]);
  for (size_t i = 0; i < file.size(); ++i) {
    if (!Sampled(i, data_start, file.size(), 61)) continue;
    for (uint8_t bit : {0x01, 0x20, 0x80}) {
      std::string damaged = file;
      damaged[i] = static_cast<char>(damaged[i] ^ bit);
      Expect("model.safetensors", damaged,
             "byte " + std::to_string(i) + " ^ " + std::to_string(bit));
    }
  }
  EXPECT_GT(failures_, 0);
  const std::string config = ReadFile(fs::path(folder_) / "config.json");
  for (size_t i = 0; i < config.size(); ++i) {
    for (uint8_t bit : {0x04, 0x40}) {
      std::string damaged = config;
      damaged[i] = static_cast<char>(damaged[i] ^ bit);
      Expect("config.json", damaged, "config.json byte " + std::to_string(i));
    }
  }
  // Intact again, the export loads bitwise.
  ASSERT_TRUE(Load(folder_, ModelPieces(*target_)).ok());
  EXPECT_EQ(ParameterBytes(*target_), ParameterBytes(*model_));
}

}  // namespace
}  // namespace titan::safetensors_testing
