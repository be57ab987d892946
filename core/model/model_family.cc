#include "core/model/model_family.h"

#include "absl/strings/str_cat.h"

namespace titan {

std::vector<ParameterDecl> InArenaOrder(FamilyParameters family) {
  std::vector<ParameterDecl> all = std::move(family.embedding);
  for (std::vector<ParameterDecl>& block : family.blocks) {
    for (ParameterDecl& decl : block) all.push_back(std::move(decl));
  }
  for (ParameterDecl& decl : family.head) all.push_back(std::move(decl));
  return all;
}

absl::StatusOr<const ModelFamily*> ModelFamilyNamed(absl::string_view name) {
  for (const ModelFamily* family : {&LlamaFamily()}) {
    if (family->name() == name) return family;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.name: no model family \"", name, "\"; known: ", LlamaFamily().name()));
}

}  // namespace titan
