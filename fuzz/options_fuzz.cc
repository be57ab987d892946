// titan-run's command line, one argument a line: the flags, then each --section.key=value
// override applied to the debug recipe and validated as titan-run does.
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "core/cli/options.h"
#include "core/runtime/recipe.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/recipe_check.h"

namespace {

const titan::RawRecipe& DebugRecipe() {
  static const titan::RawRecipe* recipe = [] {
    const std::string path = TITAN_SOURCE_DIR "/recipes/llama3_debug.toml";
    absl::StatusOr<titan::RawRecipe> raw = titan::ParseRecipeFile(path);
    if (!raw.ok()) titan::fuzz::Fail(std::string(raw.status().message()));
    return new titan::RawRecipe(*std::move(raw));
  }();
  return *recipe;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> args = absl::StrSplit(titan::fuzz::Bytes(data, size), '\n');
  absl::StatusOr<titan::Options> options = titan::ParseOptions(args);
  if (!options.ok()) return 0;
  titan::RawRecipe raw = DebugRecipe();
  for (const std::string& assignment : options->overrides) {
    if (!titan::ApplyOverride(raw, assignment).ok()) return 0;
  }
  titan::fuzz::ValidateAndRoundTrip(raw);
  return 0;
}
