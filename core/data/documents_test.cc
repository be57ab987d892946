#include "core/data/documents.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>

namespace titan {
namespace {

namespace fs = std::filesystem;

class DocumentsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("titan_documents_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return (dir_ / name).string();
  }
  absl::Status Read(const std::string& path, const DocumentOptions& options) {
    docs_.clear();
    report_ = {};
    return ReadDocuments(
        path, options, [&](absl::string_view d) { docs_.emplace_back(d); }, &report_);
  }
  fs::path dir_;
  std::vector<std::string> docs_;
  DocumentReport report_;
};

TEST_F(DocumentsTest, TextWithSeparator) {
  std::string path = Write("fortunes", "one\nline\n%\ntwo\n%\n\n%\nthree");
  DocumentOptions options;
  options.text_separator = "%";
  ASSERT_TRUE(Read(path, options).ok());
  EXPECT_EQ(docs_, (std::vector<std::string>{"one\nline\n", "two\n", "three"}));
  ASSERT_TRUE(Read(path, {}).ok());
  EXPECT_EQ(docs_.size(), 1u);
}

TEST_F(DocumentsTest, JsonlPlainAndZstdInOneFolder) {
  const std::string jsonl = "{\"text\": \"a\"}\n{\"text\": \"b\", \"id\": 2}\n{\"text\": \"c\"}";
  Write("1.jsonl", jsonl);
  std::string compressed(ZSTD_compressBound(jsonl.size()), '\0');
  compressed.resize(
      ZSTD_compress(compressed.data(), compressed.size(), jsonl.data(), jsonl.size(), 3));
  Write("2.jsonl.zst", compressed);
  Write("ignored.bin", "zzz");
  ASSERT_TRUE(Read(dir_.string(), {}).ok());
  EXPECT_EQ(docs_, (std::vector<std::string>{"a", "b", "c", "a", "b", "c"}));
  EXPECT_EQ(report_.files, 2);

  Write("2.jsonl.zst", compressed.substr(0, compressed.size() - 4));
  absl::Status truncated = Read(dir_.string(), {});
  EXPECT_NE(std::string(truncated.message()).find("2.jsonl.zst"), std::string::npos);
}

TEST_F(DocumentsTest, BadRecordIsAnErrorOrACountedSkip) {
  std::string path = Write("d.jsonl", "{\"text\": \"a\"}\n{\"text\": \n{\"body\": \"x\"}\n");
  absl::Status error = Read(path, {});
  EXPECT_NE(std::string(error.message()).find("d.jsonl:2: malformed JSON"), std::string::npos)
      << error;
  DocumentOptions skip;
  skip.skip_bad_records = true;
  ASSERT_TRUE(Read(path, skip).ok());
  EXPECT_EQ(docs_, (std::vector<std::string>{"a"}));
  EXPECT_EQ(report_.skipped, 2);
  EXPECT_NE(report_.first_skip.find("d.jsonl:2"), std::string::npos);
  ASSERT_EQ(DocumentWarnings(report_).size(), 1u);
  EXPECT_EQ(DocumentWarnings(report_)[0].rfind("skipped 2 bad record(s); the first: ", 0), 0u);
}

TEST_F(DocumentsTest, MissingOrEmptyData) {
  EXPECT_EQ(Read((dir_ / "none").string(), {}).code(), absl::StatusCode::kNotFound);
  absl::Status empty = Read(Write("empty.txt", "  \n"), {});
  EXPECT_NE(std::string(empty.message()).find("no documents"), std::string::npos);
}

TEST_F(DocumentsTest, ADeviceOrFifoIsNamedForWhatItIs) {
  // Not "no such file": the path exists, as something that is neither a file nor a folder.
  DocumentOptions flag;
  flag.path_name = "--input";
  EXPECT_EQ(Read("/dev/zero", flag).message().rfind("--input = \"/dev/zero\" is a character", 0),
            0u);
  EXPECT_EQ(Read("/dev/zero", {}).message(),
            "training.dataset_path = \"/dev/zero\" is a character device, not a regular file or "
            "folder; expected a text, .jsonl or .jsonl.zst file or folder");
  const std::string fifo = (dir_ / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  absl::Status status = Read(fifo, {});  // must not block waiting for a writer
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find("is a FIFO (named pipe)"), std::string::npos)
      << status;
}

TEST_F(DocumentsTest, BinaryFilesReadAsTextAreCountedForAWarning) {
  Write("a.txt", "plain text");
  Write("b", std::string("\x7f"
                         "ELF\x02\x01\0\0",
                         8) +
                 "code");
  Write("c", std::string("\0\0", 2));
  ASSERT_TRUE(Read(dir_.string(), {}).ok());
  EXPECT_EQ(report_.files, 3);
  EXPECT_EQ(report_.binary_files, 2);
  EXPECT_EQ(report_.first_binary, (dir_ / "b").string());
  EXPECT_EQ(DocumentWarnings(report_),
            (std::vector<std::string>{
                "2 file(s) read as text look binary (NUL bytes in the first 8 KiB), the first: " +
                (dir_ / "b").string() + "; is this the corpus you meant?"}));
  ASSERT_TRUE(Read((dir_ / "a.txt").string(), {}).ok());
  EXPECT_EQ(report_.binary_files, 0);
  EXPECT_TRUE(DocumentWarnings(report_).empty());
}

}  // namespace
}  // namespace titan
