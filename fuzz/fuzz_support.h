// What the fuzz targets share: inputs written to files for the parsers that read a path, the
// plugin registry of the build tree, and a check that reports a broken property as a crash so
// that libFuzzer (and the replay driver) stop on it with the input saved.
#ifndef TITAN_FUZZ_FUZZ_SUPPORT_H_
#define TITAN_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "core/runtime/plugin_registry.h"

namespace titan::fuzz {

// Writes `bytes` to `name` in this process's scratch folder (made on first use, removed at exit)
// and returns its path; the same name is overwritten by the next input.
std::string WriteInput(absl::string_view name, absl::string_view bytes);

// The scratch folder itself, for parsers that take a folder.
const std::string& ScratchFolder();

// The built-in plugins and those of the build tree (TITAN_BUILD_PLUGIN_DIR), discovered once.
const PluginRegistry& Registry();

inline absl::string_view Bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Prints `what` and aborts: a finding.
[[noreturn]] void Fail(const std::string& what);

}  // namespace titan::fuzz

// A property every input must keep; its failure is a finding like a crash.
#define TITAN_FUZZ_CHECK(condition, what)                                         \
  do {                                                                            \
    if (!(condition)) ::titan::fuzz::Fail(std::string(#condition ": ") + (what)); \
  } while (0)

#endif  // TITAN_FUZZ_FUZZ_SUPPORT_H_
