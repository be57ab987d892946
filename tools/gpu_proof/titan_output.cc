#include "tools/gpu_proof/titan_output.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace titan::gpu_proof {

namespace fs = std::filesystem;

std::vector<std::string> BundlePluginPaths(const std::string& plugin_dir) {
  std::vector<std::string> paths;
  std::error_code error;
  const fs::path folder = fs::canonical(plugin_dir, error);
  if (error) return paths;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "titan_") && absl::EndsWith(name, ".so")) {
      paths.push_back((folder / name).string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::vector<std::string> PluginListingProblems(const std::string& listing,
                                               const std::vector<std::string>& expected) {
  std::vector<std::string> problems;
  std::vector<std::string> lines = absl::StrSplit(listing, '\n');
  for (const std::string& path : expected) {
    // A path is listed as a whole word: titan_x.so must not be found inside titan_x.so.1.
    const bool listed = std::any_of(lines.begin(), lines.end(), [&path](const std::string& line) {
      return absl::EndsWith(line, " " + path) || absl::StrContains(line, " " + path + " ");
    });
    if (!listed) problems.push_back(absl::StrCat("not listed: ", path));
  }
  for (const std::string& line : lines) {
    if (absl::StrContains(line, "skipping plugin file")) {
      problems.push_back(absl::StrCat("rejected: ", line));
    }
  }
  return problems;
}

bool SaysLoadedStep(const std::string& output, int64_t step) {
  const std::string folder = absl::StrCat("step-", step, " (step ", step);
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    const size_t at = line.find(folder);
    if (!absl::StrContains(line, "loaded ") || at == absl::string_view::npos) continue;
    // "(step 10)": all of it restored; not "(step 100)" nor "(step 10; not restored: rng)".
    if (absl::StartsWith(line.substr(at + folder.size()), ")")) return true;
  }
  return false;
}

absl::StatusOr<bool> SameBytes(const std::string& a, const std::string& b) {
  std::ifstream first(a, std::ios::binary), second(b, std::ios::binary);
  if (!first) return absl::NotFoundError(absl::StrCat("cannot read ", a));
  if (!second) return absl::NotFoundError(absl::StrCat("cannot read ", b));
  return std::equal(std::istreambuf_iterator<char>(first), std::istreambuf_iterator<char>(),
                    std::istreambuf_iterator<char>(second), std::istreambuf_iterator<char>());
}

}  // namespace titan::gpu_proof
