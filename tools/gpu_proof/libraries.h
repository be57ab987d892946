// Finding the CUDA libraries titan's plugins load (cuBLASLt, NCCL, cuDNN) on a GPU machine whose
// image was not made for titan: in LD_LIBRARY_PATH, the CUDA toolkit's folders, or the NVIDIA
// wheels of whatever Python is there (torch images carry them). The folders found are
// prepended to every child's LD_LIBRARY_PATH.
#ifndef TITAN_TOOLS_GPU_PROOF_LIBRARIES_H_
#define TITAN_TOOLS_GPU_PROOF_LIBRARIES_H_

#include <string>
#include <vector>

namespace titan::gpu_proof {

// The libraries searched for, by soname. cuDNN's runtime-compiled engines (among its fused
// attention's) dlopen NVRTC of the CUDA major cuDNN was built for, 13 or 12.
inline const std::vector<std::string> kCudaLibraries = {
    "libcublasLt.so.13", "libnccl.so.2", "libcudnn.so.9", "libnvrtc.so.13", "libnvrtc.so.12"};

// Where to look, in order. Patterns may hold glob wildcards.
struct SearchRoots {
  std::string ld_library_path;
  std::vector<std::string> cuda_folders;
  std::vector<std::string> python_prefixes;      // <prefix>/lib/python3*/site-packages/nvidia
  std::vector<std::string> dist_packages_globs;  // folders holding nvidia/<package>/lib
};

// This machine's roots: $LD_LIBRARY_PATH, /usr/local/cuda's library folders, the prefixes of
// the Pythons found (PythonPrefixes) and /usr/local/lib/python3*/dist-packages.
SearchRoots DefaultSearchRoots();

// The prefix of every python3 in the folders of `path` (a PATH value) and of each
// <opt_root>/*/.venv/bin/python3, plus <home>/.local (pip --user), for those that exist.
// A prefix is the folder above bin/, not the interpreter's target: a venv's python3 links to
// the system's, but its wheels live in the venv.
std::vector<std::string> PythonPrefixes(const std::string& path, const std::string& opt_root,
                                        const std::string& home);

// The existing folders to search, in order, without repeats.
std::vector<std::string> CandidateFolders(const SearchRoots& roots);

struct FoundLibrary {
  std::string name;
  std::string path;  // its real path; empty when not found
};

struct LibrarySearch {
  std::vector<FoundLibrary> libraries;
  std::vector<std::string> folders;  // those where a library was found, in search order
};

// Looks for each of `names` in `folders`, the first folder that has it winning.
LibrarySearch FindLibraries(const std::vector<std::string>& names,
                            const std::vector<std::string>& folders);

// `folders` then the entries of `current`, joined with ':'.
std::string PrependToPath(const std::vector<std::string>& folders, const std::string& current);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_LIBRARIES_H_
