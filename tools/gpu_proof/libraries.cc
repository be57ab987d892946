#include "tools/gpu_proof/libraries.h"

#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace titan::gpu_proof {
namespace {

namespace fs = std::filesystem;

// The paths matching `pattern`, sorted.
std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> paths;
  glob_t found = {};
  if (glob(pattern.c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
  }
  globfree(&found);
  return paths;
}

bool IsExecutable(const std::string& path) {
  std::error_code error;
  return fs::is_regular_file(path, error) && access(path.c_str(), X_OK) == 0;
}

void AddOnce(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

std::string Getenv(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

SearchRoots DefaultSearchRoots() {
  SearchRoots roots;
  roots.ld_library_path = Getenv("LD_LIBRARY_PATH");
  roots.cuda_folders = {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"};
  roots.python_prefixes = PythonPrefixes(Getenv("PATH"), "/opt", Getenv("HOME"));
  roots.dist_packages_globs = {"/usr/local/lib/python3*/dist-packages"};
  return roots;
}

std::vector<std::string> PythonPrefixes(const std::string& path, const std::string& opt_root,
                                        const std::string& home) {
  std::vector<std::string> prefixes;
  for (absl::string_view folder : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    fs::path bin = fs::path(std::string(folder)).lexically_normal();
    if (!bin.has_filename()) bin = bin.parent_path();  // "x/bin/" -> "x/bin"
    if (IsExecutable((bin / "python3").string())) AddOnce(prefixes, bin.parent_path().string());
  }
  for (const std::string& python : Glob(opt_root + "/*/.venv/bin/python3")) {
    if (IsExecutable(python))
      AddOnce(prefixes, fs::path(python).parent_path().parent_path().string());
  }
  std::error_code error;
  if (!home.empty() && fs::is_directory(home + "/.local/lib", error)) {
    AddOnce(prefixes, home + "/.local");
  }
  return prefixes;
}

std::vector<std::string> CandidateFolders(const SearchRoots& roots) {
  std::vector<std::string> patterns;
  for (absl::string_view entry : absl::StrSplit(roots.ld_library_path, ':', absl::SkipEmpty())) {
    patterns.emplace_back(entry);
  }
  patterns.insert(patterns.end(), roots.cuda_folders.begin(), roots.cuda_folders.end());
  // nvidia/*/lib covers both layouts: a wheel per library (nvidia/cublas/lib, nvidia/nccl/lib)
  // and CUDA 13's single nvidia/cu13/lib.
  for (const std::string& prefix : roots.python_prefixes) {
    patterns.push_back(prefix + "/lib/python3*/site-packages/nvidia/*/lib");
  }
  for (const std::string& folder : roots.dist_packages_globs) {
    patterns.push_back(folder + "/nvidia/*/lib");
  }
  std::vector<std::string> folders;
  for (const std::string& pattern : patterns) {
    for (const std::string& folder : Glob(pattern)) {
      std::error_code error;
      if (fs::is_directory(folder, error)) AddOnce(folders, folder);
    }
  }
  return folders;
}

LibrarySearch FindLibraries(const std::vector<std::string>& names,
                            const std::vector<std::string>& folders) {
  LibrarySearch search;
  for (const std::string& name : names) {
    FoundLibrary library{name, ""};
    for (const std::string& folder : folders) {
      std::error_code error;
      fs::path real = fs::canonical(fs::path(folder) / name, error);
      if (error || !fs::is_regular_file(real, error)) continue;
      library.path = real.string();
      AddOnce(search.folders, folder);
      break;
    }
    search.libraries.push_back(library);
  }
  // In search order, whichever library found them first.
  std::vector<std::string> ordered;
  for (const std::string& folder : folders) {
    if (std::find(search.folders.begin(), search.folders.end(), folder) != search.folders.end()) {
      ordered.push_back(folder);
    }
  }
  search.folders = ordered;
  return search;
}

std::string PrependToPath(const std::vector<std::string>& folders, const std::string& current) {
  std::vector<std::string> entries = folders;
  for (absl::string_view entry : absl::StrSplit(current, ':', absl::SkipEmpty())) {
    AddOnce(entries, std::string(entry));
  }
  return absl::StrJoin(entries, ":");
}

}  // namespace titan::gpu_proof
