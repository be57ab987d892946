#include "core/runtime/closest_name.h"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace titan {
namespace {

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

}  // namespace

std::string ClosestName(absl::string_view name, const std::vector<std::string>& candidates) {
  const std::string lower = absl::AsciiStrToLower(name);
  std::string best;
  size_t best_distance = std::string::npos;
  size_t best_length_gap = std::string::npos;
  for (const std::string& candidate : candidates) {
    size_t distance = EditDistance(lower, absl::AsciiStrToLower(candidate));
    // Among equally distant names, prefer one as long as the typo: a changed letter is a more
    // common slip than a dropped one.
    size_t length_gap = candidate.size() > name.size() ? candidate.size() - name.size()
                                                       : name.size() - candidate.size();
    if (distance < best_distance || (distance == best_distance && length_gap < best_length_gap)) {
      best_length_gap = length_gap;
      best_distance = distance;
      best = candidate;
    }
  }
  // A typo changes a few characters; beyond half the name it is a different word.
  size_t limit = std::max<size_t>(2, std::max(name.size(), best.size()) / 2);
  return best_distance <= limit ? best : std::string();
}

std::string DidYouMean(absl::string_view name, const std::vector<std::string>& candidates) {
  std::string closest = ClosestName(name, candidates);
  return closest.empty() ? std::string() : absl::StrCat("; did you mean '", closest, "'?");
}

}  // namespace titan
