#include "core/model/model_family.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace titan {

std::vector<ParameterDecl> InArenaOrder(FamilyParameters family) {
  std::vector<ParameterDecl> all = std::move(family.embedding);
  for (std::vector<ParameterDecl>& block : family.blocks) {
    for (ParameterDecl& decl : block) all.push_back(std::move(decl));
  }
  for (ParameterDecl& decl : family.head) all.push_back(std::move(decl));
  return all;
}

std::vector<const ModelFamily*> ModelFamilies() {
  return {&LlamaFamily(), &Qwen3Family(), &DeepSeekV3Family()};
}

absl::StatusOr<const ModelFamily*> ModelFamilyNamed(absl::string_view name) {
  std::vector<std::string> known;
  for (const ModelFamily* family : ModelFamilies()) {
    if (family->name() == name) return family;
    known.push_back(family->name());
  }
  return absl::InvalidArgumentError(absl::StrCat("model.name: no model family \"", name,
                                                 "\"; known: ", absl::StrJoin(known, ", ")));
}

absl::Status UnknownFlavor(const ModelFamily& family, absl::string_view flavor) {
  return absl::InvalidArgumentError(absl::StrCat("model.flavor: ", family.name(),
                                                 " has no flavor '", flavor, "'; expected one of ",
                                                 absl::StrJoin(family.flavors(), ", ")));
}

}  // namespace titan
