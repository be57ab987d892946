// The SDK's Module for the core's models: a name, parameters owned by the model, children, and
// the hooks parallel plugins add, which the model runs around each module's forward and
// backward.
#ifndef TITAN_CORE_MODEL_MODULE_NODE_H_
#define TITAN_CORE_MODEL_MODULE_NODE_H_

#include <memory>
#include <string>
#include <vector>

#include "titan/module.h"

namespace titan {

class ModuleNode : public Module {
 public:
  explicit ModuleNode(std::string name) : name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  std::vector<Parameter*> parameters() override { return parameters_; }
  std::vector<Module*> children() override;
  void AddHooks(std::unique_ptr<ModuleHooks> hooks) override;
  TensorParallelTarget* tensor_parallel_target() override { return tensor_parallel_target_; }

  void set_tensor_parallel_target(TensorParallelTarget* target) {
    tensor_parallel_target_ = target;
  }
  PipelineStageTarget* pipeline_stage_target() override { return pipeline_stage_target_; }
  void set_pipeline_stage_target(PipelineStageTarget* target) { pipeline_stage_target_ = target; }
  AttentionHost* attention_host() override { return attention_host_; }
  ExpertParallelTarget* expert_parallel_target() override { return expert_parallel_target_; }
  void set_expert_parallel_target(ExpertParallelTarget* target) {
    expert_parallel_target_ = target;
  }
  void set_attention_host(AttentionHost* host) { attention_host_ = host; }

  void AddParameter(Parameter* parameter) { parameters_.push_back(parameter); }
  void AddChild(ModuleNode* child) { children_.push_back(child); }
  bool has_hooks() const { return !hooks_.empty(); }

  // Each runs the hooks in the order they were added and stops at the first error, which it
  // returns prefixed with the module's name.
  absl::Status BeforeForward();
  absl::Status AfterForward();
  absl::Status BeforeBackward();
  absl::Status AfterBackward();

 private:
  absl::Status RunHooks(absl::Status (ModuleHooks::*hook)(), const char* when);

  std::string name_;
  std::vector<Parameter*> parameters_;
  std::vector<ModuleNode*> children_;  // owned by the model
  std::vector<std::unique_ptr<ModuleHooks>> hooks_;
  TensorParallelTarget* tensor_parallel_target_ = nullptr;  // the model, on its root
  ExpertParallelTarget* expert_parallel_target_ = nullptr;  // the model with experts, on its root
  PipelineStageTarget* pipeline_stage_target_ = nullptr;    // the model, on its root
  AttentionHost* attention_host_ = nullptr;                 // the model, on its root
};

}  // namespace titan

#endif  // TITAN_CORE_MODEL_MODULE_NODE_H_
