// The raw files titan's C++ reference tests exchange with the PyTorch scripts beside them
// (run by /usr/bin/python3, Debian's interpreter with python3-torch, or for transformers itself by
// bench/torch-venv's python).
#ifndef TITAN_TESTS_REFERENCE_REFERENCE_FILES_H_
#define TITAN_TESTS_REFERENCE_REFERENCE_FILES_H_

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "core/model/decoder_model.h"

namespace titan::reference {

namespace fs = std::filesystem;

template <typename T>
void WriteBinary(const fs::path& path, const T* data, size_t count) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(T)));
}

template <typename T>
std::vector<T> ReadBinary(const fs::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<T> values(static_cast<size_t>(in.tellg()) / sizeof(T));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(values.data()),
          static_cast<std::streamsize>(values.size() * sizeof(T)));
  return values;
}

inline std::vector<float> ReadFloats(const fs::path& path) { return ReadBinary<float>(path); }

// ||actual - expected|| / ||expected||.
inline double RelativeError(const float* actual, const float* expected, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; ++i) {
    diff += std::pow(static_cast<double>(actual[i]) - expected[i], 2);
    norm += std::pow(static_cast<double>(expected[i]), 2);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// config.txt, params.txt and params.bin as llama_reference.py's read_config/read_params expect.
inline void WriteModel(const LlamaConfig& config, const DecoderModel& model, int64_t batch,
                       int64_t seq_len, const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.txt")
      << "dim " << config.dim << "\nn_layers " << config.n_layers << "\nn_heads " << config.n_heads
      << "\nn_kv_heads " << config.n_kv_heads << "\nvocab_size " << config.vocab_size
      << "\nhidden_dim " << config.hidden_dim() << "\nnorm_eps " << std::scientific
      << config.norm_eps << "\nrope_theta " << config.rope.theta << std::defaultfloat
      << "\ntie_embeddings " << config.tie_embeddings << "\nbatch " << batch << "\nseq_len "
      << seq_len << "\nhead_dim " << config.head_dim() << "\nqk_norm " << config.qk_norm
      << "\nexperts " << config.moe.experts << "\ntop_k " << config.moe.top_k
      << "\nexpert_hidden_dim " << config.moe.hidden_dim << "\nshared_experts "
      << config.moe.shared_experts << "\ndense_layers " << config.moe.dense_layers << "\nsigmoid "
      << config.moe.sigmoid << "\nnormalize " << config.moe.normalize << "\nforce_balance "
      << config.moe.force_balance << "\nroute_scale " << std::scientific << config.moe.route_scale
      << "\naux_loss_alpha " << config.moe.aux_loss_alpha << "\n";
  const Arena& params = model.params();
  std::ofstream names(dir / "params.txt");
  std::ofstream values(dir / "params.bin", std::ios::binary);
  for (int i = 0; i < params.size(); ++i) {
    names << params.name(i) << " " << absl::StrJoin(params.at(i).shape(), " ") << "\n";
    values.write(static_cast<const char*>(params.at(i).raw_data()),
                 static_cast<std::streamsize>(params.at(i).nbytes()));
  }
}

// Whether /usr/bin/python3 can import torch; the tests say how to get it when not.
inline bool HaveTorch() {
  return std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") == 0;
}

constexpr const char* kNoTorch =
    "the PyTorch reference needs /usr/bin/python3 with torch: install Debian's python3-torch "
    "(tools/setup-deps does)";

// The python of bench/torch-venv's virtual environment (PyPI's torch and Hugging Face's
// transformers, at the versions that script pins) when it is made, else empty. TITAN_SOURCE_DIR
// must be defined by the including test.
inline std::string TransformersPython() {
  const std::string command =
      std::string(TITAN_SOURCE_DIR) + "/bench/torch-venv --check 2>/dev/null";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  char line[4096] = {};
  const bool read = std::fgets(line, sizeof(line), pipe) != nullptr;
  if (pclose(pipe) != 0 || !read) return "";
  std::string python(line);
  while (!python.empty() && python.back() == '\n') python.pop_back();
  return python;
}

constexpr const char* kNoTransformers =
    "no virtual environment with PyPI's torch and transformers: bench/torch-venv makes it "
    "(TITAN_TORCH_VENV names another folder); this test checks titan's Hugging Face interop "
    "against transformers itself";

// hf_transformers_check.py under `python` over the case folders (separated by spaces): whether
// transformers loads every model folder there cleanly and agrees with titan's logits.
inline bool TransformersAgree(const std::string& python, const std::string& case_dirs) {
  const std::string command =
      python + " " + TITAN_SOURCE_DIR + "/tests/reference/hf_transformers_check.py " + case_dirs;
  return std::system(command.c_str()) == 0;
}

}  // namespace titan::reference

#endif  // TITAN_TESTS_REFERENCE_REFERENCE_FILES_H_
