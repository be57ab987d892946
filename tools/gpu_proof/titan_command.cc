#include "tools/gpu_proof/titan_command.h"

#include "absl/strings/str_cat.h"

namespace titan::gpu_proof {

std::vector<std::string> DebugRecipeCommand(const Bundle& bundle, const std::string& dump_folder,
                                            const std::vector<std::string>& overrides, int ranks) {
  std::vector<std::string> command;
  if (ranks > 1) {
    command = {bundle.Launcher(), "--oversubscribe", "--allow-run-as-root", "-np",
               absl::StrCat(ranks)};
  }
  for (const std::string& arg :
       {bundle.TitanRun(), std::string("--recipe"), bundle.Recipe(),
        absl::StrCat("--job.dump_folder=", dump_folder),
        absl::StrCat("--training.dataset_path=", bundle.Dataset()),
        std::string("--generate.max_new_tokens=0"), std::string("--validation.freq=1000")}) {
    command.push_back(arg);
  }
  command.insert(command.end(), overrides.begin(), overrides.end());
  return command;
}

std::vector<std::string> F32LossOverrides(const std::string& device) {
  return {"--training.mixed_precision_param=float32", "--training.steps=10",
          absl::StrCat("--job.device=", device)};
}

std::vector<std::string> ResumeOverrides(const std::string& device) {
  return {"--training.steps=20",           "--validation.freq=5",
          "--validation.steps=1",          "--training.global_batch_size=4",
          "--training.local_batch_size=4", "--checkpoint.enable=true",
          "--checkpoint.interval=10",      "--checkpoint.last_save_model_only=false",
          "--checkpoint.async_mode=async", absl::StrCat("--job.device=", device)};
}

}  // namespace titan::gpu_proof
