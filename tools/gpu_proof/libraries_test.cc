#include "tools/gpu_proof/libraries.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tools/gpu_proof/test_folder.h"

namespace titan::gpu_proof {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

void MakeExecutable(const std::string& path) {
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add);
}

// A machine's worth of places: an empty LD_LIBRARY_PATH folder, a CUDA toolkit with NCCL, a
// Python on PATH with cuBLASLt's wheel (the soname a link to the versioned file), a venv under
// /opt with cuDNN's, and a dist-packages folder with CUDA 13's single wheel.
class LibrariesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(Path("ld"));
    root_.Write("cuda/lib64/libnccl.so.2", "nccl");
    MakeExecutable(root_.Write("py/bin/python3", "#!/bin/sh\n"));
    const std::string cublas = "py/lib/python3.12/site-packages/nvidia/cublas/lib/";
    root_.Write(cublas + "libcublasLt.so.13.1.0.3", "cublasLt");
    fs::create_symlink("libcublasLt.so.13.1.0.3", Path(cublas + "libcublasLt.so.13"));
    MakeExecutable(root_.Write("opt/app/.venv/bin/python3", "#!/bin/sh\n"));
    root_.Write("opt/app/.venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9");
    root_.Write("usrlocal/lib/python3.11/dist-packages/nvidia/cu13/lib/libnccl.so.2");
  }

  std::string Path(const std::string& relative) const { return root_.path() + "/" + relative; }

  SearchRoots Roots() const {
    SearchRoots roots;
    roots.ld_library_path = Path("ld") + "::" + Path("nowhere");
    roots.cuda_folders = {Path("cuda/lib64"), Path("cuda/targets/x86_64-linux/lib")};
    roots.python_prefixes = PythonPrefixes(Path("nowhere") + ":" + Path("py/bin"), Path("opt"), "");
    roots.dist_packages_globs = {Path("usrlocal/lib/python3*/dist-packages")};
    return roots;
  }

  TestFolder root_;
};

TEST_F(LibrariesTest, PythonPrefixesAreTheFoldersAboveBinOfEachPythonFound) {
  EXPECT_THAT(PythonPrefixes(Path("nowhere") + ":" + Path("py/bin") + ":" + Path("py/bin/"),
                             Path("opt"), ""),
              ElementsAre(Path("py"), Path("opt/app/.venv")));
}

TEST_F(LibrariesTest, CandidateFoldersInSearchOrderThatExist) {
  EXPECT_THAT(CandidateFolders(Roots()),
              ElementsAre(Path("ld"), Path("cuda/lib64"),
                          Path("py/lib/python3.12/site-packages/nvidia/cublas/lib"),
                          Path("opt/app/.venv/lib/python3.11/site-packages/nvidia/cudnn/lib"),
                          Path("usrlocal/lib/python3.11/dist-packages/nvidia/cu13/lib")));
}

TEST_F(LibrariesTest, FindsEachLibraryByItsRealPathAndTheFoldersToPrepend) {
  LibrarySearch search = FindLibraries(kCudaLibraries, CandidateFolders(Roots()));
  ASSERT_EQ(search.libraries.size(), 5u);
  EXPECT_EQ(search.libraries[0].name, "libcublasLt.so.13");
  EXPECT_EQ(search.libraries[0].path,
            fs::canonical(Path("py/lib/python3.12/site-packages/nvidia/cublas/lib/"
                               "libcublasLt.so.13.1.0.3"))
                .string());
  // NVRTC is in none of these places: reported as not found, no folder added for it.
  EXPECT_EQ(search.libraries[3].name, "libnvrtc.so.13");
  EXPECT_TRUE(search.libraries[3].path.empty());
  // The toolkit's NCCL comes before the dist-packages one.
  EXPECT_EQ(search.libraries[1].path, fs::canonical(Path("cuda/lib64/libnccl.so.2")).string());
  EXPECT_THAT(
      search.folders,
      ElementsAre(Path("cuda/lib64"), Path("py/lib/python3.12/site-packages/nvidia/cublas/lib"),
                  Path("opt/app/.venv/lib/python3.11/site-packages/nvidia/cudnn/lib")));
}

TEST_F(LibrariesTest, ALibraryFoundNowhereHasNoPath) {
  LibrarySearch search = FindLibraries({"libnothing.so.1"}, CandidateFolders(Roots()));
  ASSERT_EQ(search.libraries.size(), 1u);
  EXPECT_TRUE(search.libraries[0].path.empty());
  EXPECT_TRUE(search.folders.empty());
}

TEST_F(LibrariesTest, LdLibraryPathComesFirst) {
  root_.Write("ld/libnccl.so.2", "mine");
  LibrarySearch search = FindLibraries({"libnccl.so.2"}, CandidateFolders(Roots()));
  EXPECT_EQ(search.libraries[0].path, fs::canonical(Path("ld/libnccl.so.2")).string());
}

TEST(PrependToPath, PutsTheFoldersFirstWithoutRepeats) {
  EXPECT_EQ(PrependToPath({"/a", "/b"}, "/b:/c::"), "/a:/b:/c");
  EXPECT_EQ(PrependToPath({}, ""), "");
}

}  // namespace
}  // namespace titan::gpu_proof
