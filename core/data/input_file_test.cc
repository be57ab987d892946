#include "core/data/input_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace titan {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class InputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("titan_input_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Message(const std::string& path, bool folder_ok) {
    return std::string(InspectInput(path, folder_ok, "a test input").status().message());
  }
  fs::path dir_;
};

TEST_F(InputFileTest, RegularFilesAndFoldersAreTakenAsAsked) {
  const std::string file = (dir_ / "f.txt").string();
  std::ofstream(file) << "x";
  EXPECT_EQ(*InspectInput(file, false, "a file"), InputKind::kFile);
  EXPECT_EQ(*InspectInput(dir_.string(), true, "a folder"), InputKind::kFolder);
  EXPECT_EQ(Message(dir_.string(), false),
            "\"" + dir_.string() + "\" is a folder; expected a test input");
}

TEST_F(InputFileTest, NamesWhatAPathIsWhenItIsNotARegularFile) {
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(Message(fifo, true),
            "\"" + fifo + "\" is a FIFO (named pipe), not a regular file or folder; expected a "
                          "test input");
  EXPECT_THAT(Message(fifo, false), HasSubstr("is a FIFO (named pipe), not a regular file;"));
  EXPECT_EQ(Message("/dev/zero", true),
            "\"/dev/zero\" is a character device, not a regular file or folder; expected a test "
            "input");
  const std::string missing = (dir_ / "none").string();
  EXPECT_EQ(InspectInput(missing, true, "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(missing, true), HasSubstr("\"" + missing + "\": no such file or folder"));
  fs::create_symlink(missing, dir_ / "dangling");
  EXPECT_THAT(Message((dir_ / "dangling").string(), true), HasSubstr("a symbolic link to nothing"));
}

TEST_F(InputFileTest, APathWithANulIsRefusedNotCutShort) {
  // Cut at the NUL, this path would name the folder, which exists.
  const std::string path = dir_.string() + std::string("\0/t.json", 8);
  EXPECT_EQ(Message(path, true), "\"" + dir_.string() +
                                     "\\000/t.json\": the path has a NUL byte at offset " +
                                     std::to_string(dir_.string().size()) +
                                     ", which no file name can hold; expected a test input");
}

TEST(LineColumn, CountsLinesAndColumnsFromOne) {
  EXPECT_EQ(LineColumn("ab\ncd\n", 0), "1:1");
  EXPECT_EQ(LineColumn("ab\ncd\n", 2), "1:3");  // the newline itself
  EXPECT_EQ(LineColumn("ab\ncd\n", 4), "2:2");
  EXPECT_EQ(LineColumn("ab\ncd\n", 6), "3:1");   // the end, after the last newline
  EXPECT_EQ(LineColumn("ab\ncd\n", 99), "3:1");  // past the end: the end
}

}  // namespace
}  // namespace titan
