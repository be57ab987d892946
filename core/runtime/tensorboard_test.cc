#include "core/runtime/tensorboard.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "core/runtime/tensorboard_event.pb.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

// The records of a TFRecord file, each checked against its two masked CRCs.
std::vector<std::string> ReadRecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t length = 0;
    uint32_t length_crc = 0, data_crc = 0;
    EXPECT_LE(at + 12, bytes.size());
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&length_crc, bytes.data() + at + 8, 4);
    EXPECT_EQ(length_crc, MaskedCrc32c(absl::string_view(bytes.data() + at, 8)));
    EXPECT_LE(at + 16 + length, bytes.size());
    std::string data = bytes.substr(at + 12, length);
    std::memcpy(&data_crc, bytes.data() + at + 12 + length, 4);
    EXPECT_EQ(data_crc, MaskedCrc32c(data));
    records.push_back(std::move(data));
    at += 16 + length;
  }
  return records;
}

TEST(TensorBoardTest, MaskedCrc32cIsTfRecords) {
  // CRC-32C("123456789") = 0xe3069283, rotated right by 15 plus 0xa282ead8.
  EXPECT_EQ(MaskedCrc32c("123456789"), 0xc78ab0e5u);
}

TEST(TensorBoardTest, WritesAVersionEventThenOneEventPerStep) {
  const fs::path dir =
      fs::temp_directory_path() / absl::StrCat("titan_tensorboard_test_", getpid());
  {
    absl::StatusOr<std::unique_ptr<TensorBoardWriter>> writer =
        TensorBoardWriter::Open((dir / "run").string());
    ASSERT_TRUE(writer.ok()) << writer.status();
    EXPECT_NE((*writer)->path().find("/run/events.out.tfevents."), std::string::npos);
    ASSERT_TRUE((*writer)->AddScalars(3, {{"loss", 10.123456}, {"lr", 8e-4}}).ok());
    ASSERT_TRUE((*writer)->AddScalars(4, {{"eval_loss", 9.5}}).ok());
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir / "run")) files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);
  const std::vector<std::string> records = ReadRecords(files[0].string());
  ASSERT_EQ(records.size(), 3u);
  tensorboard::Event header, first, second;
  ASSERT_TRUE(header.ParseFromString(records[0]));
  EXPECT_EQ(header.file_version(), "brain.Event:2");
  ASSERT_TRUE(first.ParseFromString(records[1]));
  EXPECT_EQ(first.step(), 3);
  EXPECT_GT(first.wall_time(), 1.6e9);
  ASSERT_EQ(first.summary().value_size(), 2);
  const tensorboard::Summary::Value& loss = first.summary().value(0);
  EXPECT_EQ(loss.tag(), "loss");
  EXPECT_EQ(loss.metadata().plugin_data().plugin_name(), "scalars");
  EXPECT_EQ(loss.tensor().dtype(), 2);  // DT_DOUBLE: the value is not rounded to float
  ASSERT_EQ(loss.tensor().double_val_size(), 1);
  EXPECT_EQ(loss.tensor().double_val(0), 10.123456);
  EXPECT_EQ(first.summary().value(1).tensor().double_val(0), 8e-4);
  ASSERT_TRUE(second.ParseFromString(records[2]));
  EXPECT_EQ(second.step(), 4);
  EXPECT_EQ(second.summary().value(0).tag(), "eval_loss");
  fs::remove_all(dir);
}

TEST(TensorBoardTest, AFolderThatCannotBeMadeIsAnError) {
  absl::StatusOr<std::unique_ptr<TensorBoardWriter>> writer =
      TensorBoardWriter::Open("/proc/titan_no_such/tb");
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("metrics.save_tb_folder"), std::string::npos);
}

}  // namespace
}  // namespace titan
