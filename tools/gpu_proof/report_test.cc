#include "tools/gpu_proof/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tools/gpu_proof/test_folder.h"

namespace titan::gpu_proof {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Json ReadJson(const std::string& path) {
  std::ifstream file(path);
  return Json::parse(file);
}

std::vector<std::string> FilesIn(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  return names;
}

TEST(WriteJsonAtomically, WritesAndReplacesTheWholeFileLeavingNoTemporary) {
  TestFolder folder;
  const std::string path = folder.path() + "/report.json";
  ASSERT_TRUE(WriteJsonAtomically(path, {{"verdict", "running"}, {"parts", {1, 2, 3}}}).ok());
  EXPECT_EQ(ReadJson(path)["verdict"], "running");
  ASSERT_TRUE(WriteJsonAtomically(path, {{"verdict", "pass"}}).ok());
  Json second = ReadJson(path);
  EXPECT_EQ(second["verdict"], "pass");
  EXPECT_FALSE(second.contains("parts"));
  EXPECT_THAT(FilesIn(folder.path()), ElementsAre("report.json"));
}

TEST(WriteJsonAtomically, KeepsTheOldReportWhenTheNewOneCannotBeWritten) {
  TestFolder folder;
  const std::string path = folder.path() + "/report.json";
  ASSERT_TRUE(WriteJsonAtomically(path, {{"verdict", "running"}}).ok());
  // A folder where the temporary file should go makes the write fail before the rename.
  std::filesystem::create_directory(path + ".tmp." + std::to_string(getpid()));
  absl::Status status = WriteJsonAtomically(path, {{"verdict", "pass"}});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("report.json.tmp."));
  EXPECT_EQ(ReadJson(path)["verdict"], "running");
}

TEST(WriteJsonAtomically, AMissingFolderIsAnErrorNamingIt) {
  absl::Status status = WriteJsonAtomically("/nonexistent/folder/report.json", {{"a", 1}});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("/nonexistent/folder/report.json"));
}

TEST(LogPathFor, ReplacesJsonWithLog) {
  EXPECT_EQ(LogPathFor("/x/gpu-check-report.json"), "/x/gpu-check-report.log");
  EXPECT_EQ(LogPathFor("/x/report"), "/x/report.log");
}

}  // namespace
}  // namespace titan::gpu_proof
