#include "core/model/modules/weight_pass.h"

#include "absl/strings/str_cat.h"

namespace titan {

absl::StatusOr<TensorView> WeightPass::Keep(const TensorView& values, int weight, bool input) {
  if (values.data != nullptr && activations_.Contains(values.data)) return values;
  const int entry = (input ? input_entries_ : grad_entries_)[weight];
  if (entry < 0 || entry >= kept_.size()) {
    return absl::InternalError(absl::StrCat("model: no memory planned to keep the ",
                                            input ? "input" : "output gradient", " of ",
                                            parameters_[weight].name, " for its weight pass"));
  }
  const TensorView kept = kept_.at(entry).view();
  // wq, wk and wv (w1 and w3) read one input, copied once.
  if (input && !work_.empty() && work_.back().in.data == kept.data) return kept;
  if (values.data != nullptr) TITAN_RETURN_IF_ERROR(compute_.Copy(values, kept));
  return kept;
}

}  // namespace titan
