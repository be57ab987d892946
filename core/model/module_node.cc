#include "core/model/module_node.h"

#include "absl/strings/str_cat.h"

namespace titan {

std::vector<Module*> ModuleNode::children() {
  return std::vector<Module*>(children_.begin(), children_.end());
}

void ModuleNode::AddHooks(std::unique_ptr<ModuleHooks> hooks) {
  hooks_.push_back(std::move(hooks));
}

absl::Status ModuleNode::RunHooks(absl::Status (ModuleHooks::*hook)(), const char* when) {
  for (const std::unique_ptr<ModuleHooks>& hooks : hooks_) {
    absl::Status status = ((*hooks).*hook)();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(name_.empty() ? "model" : name_, " ", when,
                                                      ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ModuleNode::BeforeForward() {
  return RunHooks(&ModuleHooks::BeforeForward, "before forward");
}
absl::Status ModuleNode::AfterForward() {
  return RunHooks(&ModuleHooks::AfterForward, "after forward");
}
absl::Status ModuleNode::BeforeBackward() {
  return RunHooks(&ModuleHooks::BeforeBackward, "before backward");
}
absl::Status ModuleNode::AfterBackward() {
  return RunHooks(&ModuleHooks::AfterBackward, "after backward");
}

}  // namespace titan
