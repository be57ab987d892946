#include "core/model/model_family.h"

namespace titan {

std::vector<ParameterDecl> InArenaOrder(FamilyParameters family) {
  std::vector<ParameterDecl> all = std::move(family.embedding);
  for (std::vector<ParameterDecl>& block : family.blocks) {
    for (ParameterDecl& decl : block) all.push_back(std::move(decl));
  }
  for (ParameterDecl& decl : family.head) all.push_back(std::move(decl));
  return all;
}

}  // namespace titan
