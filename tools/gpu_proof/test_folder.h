// A temporary folder for a test, removed with its contents at the end.
#ifndef TITAN_TOOLS_GPU_PROOF_TEST_FOLDER_H_
#define TITAN_TOOLS_GPU_PROOF_TEST_FOLDER_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace titan::gpu_proof {

class TestFolder {
 public:
  TestFolder() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "titan-gpu-proof-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TestFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TestFolder(const TestFolder&) = delete;
  TestFolder& operator=(const TestFolder&) = delete;

  const std::string& path() const { return path_; }

  // Writes `text` to <folder>/<relative>, making the folders on the way; returns its path.
  std::string Write(const std::string& relative, const std::string& text = "") const {
    const std::filesystem::path file = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  std::string path_;
};

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_TEST_FOLDER_H_
