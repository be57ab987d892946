#include "fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace titan::fuzz {
namespace {

namespace fs = std::filesystem;

void RemoveScratch() {
  std::error_code error;
  fs::remove_all(ScratchFolder(), error);
}

}  // namespace

const std::string& ScratchFolder() {
  // Never destroyed: RemoveScratch runs at exit, after the destructors of later statics.
  static const std::string* folder = [] {
    fs::path path = fs::temp_directory_path() / absl::StrCat("titan_fuzz_", getpid());
    fs::create_directories(path);
    std::atexit(RemoveScratch);
    return new std::string(path.string());
  }();
  return *folder;
}

std::string WriteInput(absl::string_view name, absl::string_view bytes) {
  const std::string path = (fs::path(ScratchFolder()) / std::string(name)).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) Fail(absl::StrCat("cannot write the input to ", path));
  return path;
}

const PluginRegistry& Registry() {
  static const PluginRegistry* registry = [] {
    // Warnings about the recipes being fuzzed are expected by the million; only findings count.
    spdlog::set_level(spdlog::level::off);
    auto discovered = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
    if (!discovered.ok()) Fail(std::string(discovered.status().message()));
    return discovered->release();
  }();
  return *registry;
}

void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace titan::fuzz
