// The property every valid recipe keeps, shared by the recipe and command-line targets: its
// effective recipe (--print-recipe) parses and validates back to the same text.
#ifndef TITAN_FUZZ_RECIPE_CHECK_H_
#define TITAN_FUZZ_RECIPE_CHECK_H_

#include "core/runtime/recipe.h"

namespace titan::fuzz {

// Validates `raw`; when valid, checks the round trip through ToToml().
void ValidateAndRoundTrip(const RawRecipe& raw);

}  // namespace titan::fuzz

#endif  // TITAN_FUZZ_RECIPE_CHECK_H_
