// The titan-run command lines of the proof, built from the bundle's layout, so the CPU
// reference, the bundle's own CPU run and the GPU runs differ only where they mean to.
#ifndef TITAN_TOOLS_GPU_PROOF_TITAN_COMMAND_H_
#define TITAN_TOOLS_GPU_PROOF_TITAN_COMMAND_H_

#include <string>
#include <vector>

namespace titan::gpu_proof {

// The files of a bundle folder.
struct Bundle {
  std::string dir;

  std::string TitanRun() const { return dir + "/bin/titan-run"; }
  std::string Launcher() const { return dir + "/bin/mpirun"; }
  std::string Recipe() const { return dir + "/recipes/llama3_debug.toml"; }
  std::string Dataset() const { return dir + "/data/fortunes"; }
  std::string Tokenizer128k() const { return dir + "/data/tokenizer128k.model"; }
  std::string PluginDir() const { return dir + "/lib/titan/plugins"; }
  std::string Test(const std::string& name) const { return dir + "/tests/" + name; }
  std::string Manifest() const { return dir + "/manifest.json"; }
  std::string ReferenceDir() const { return dir + "/reference"; }
  std::string ReferenceMetrics() const { return dir + "/reference/cpu_f32/metrics.jsonl"; }
};

// titan-run on the debug recipe and the bundle's corpus, dumping into `dump_folder`, with no
// generation and no validation unless `overrides` (which come last) ask for them; under the
// bundle's launcher with `ranks` > 1.
std::vector<std::string> DebugRecipeCommand(const Bundle& bundle, const std::string& dump_folder,
                                            const std::vector<std::string>& overrides,
                                            int ranks = 1);

// The first 10 steps in f32 on `device` ("cpu" or "cuda"): the losses the reference holds.
std::vector<std::string> F32LossOverrides(const std::string& device);

// The exact-resume runs: 20 steps with an asynchronous checkpoint every 10 and an eval every 5.
std::vector<std::string> ResumeOverrides(const std::string& device);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_TITAN_COMMAND_H_
