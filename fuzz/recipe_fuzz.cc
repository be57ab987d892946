// A recipe file: TOML parsing, every key's checks and the selected plugins' own checks; a valid
// recipe prints back (--print-recipe) to a recipe that validates to the same.
#include "core/runtime/recipe.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/recipe_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<titan::RawRecipe> raw =
      titan::ParseRecipeText(titan::fuzz::Bytes(data, size), "fuzz.toml");
  if (raw.ok()) titan::fuzz::ValidateAndRoundTrip(*raw);
  return 0;
}
