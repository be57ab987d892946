#include "fuzz/recipe_check.h"

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_support.h"

namespace titan::fuzz {

void ValidateAndRoundTrip(const RawRecipe& raw) {
  absl::StatusOr<Recipe> recipe = ValidateRecipe(raw, Registry());
  if (!recipe.ok()) return;
  const std::string printed = recipe->ToToml();
  absl::StatusOr<RawRecipe> reparsed = ParseRecipeText(printed, "printed");
  TITAN_FUZZ_CHECK(reparsed.ok(), absl::StrCat(reparsed.status().message(), "\n", printed));
  absl::StatusOr<Recipe> again = ValidateRecipe(*reparsed, Registry());
  TITAN_FUZZ_CHECK(again.ok(), absl::StrCat(again.status().message(), "\n", printed));
  TITAN_FUZZ_CHECK(again->ToToml() == printed,
                   absl::StrCat(printed, "\nprints back as\n", again->ToToml()));
}

}  // namespace titan::fuzz
