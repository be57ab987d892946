#ifndef TITAN_CORE_RUNTIME_CLOSEST_NAME_H_
#define TITAN_CORE_RUNTIME_CLOSEST_NAME_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace titan {

// The candidate nearest to `name` by edit distance (case-insensitive), or "" when none is
// close enough to be a plausible typo.
std::string ClosestName(absl::string_view name, const std::vector<std::string>& candidates);

// ", did you mean 'x'?" when a close candidate exists, else "".
std::string DidYouMean(absl::string_view name, const std::vector<std::string>& candidates);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_CLOSEST_NAME_H_
