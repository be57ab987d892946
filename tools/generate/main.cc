// titan-generate: samples text from a model saved by titan-run (<job.dump_folder>/model.arena),
// with temperature, top-k and top-p. Flags are documented in docs/training.md.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/data/tokenizer.h"
#include "core/model/decoder_model.h"
#include "core/tensor/arena_file.h"
#include "core/train/generate.h"

namespace titan {
namespace {

constexpr char kUsage[] =
    R"(usage: titan-generate --model=FILE --tokenizer=PATH [flags]
  --model=FILE           parameters saved by titan-run (<job.dump_folder>/model.arena)
  --tokenizer=PATH       the tokenizer it was trained with (tiktoken, tokenizer.json, byte)
  --name=NAME            the model.name it was trained with       (default llama3)
  --flavor=NAME          the model.flavor it was trained with     (default debugmodel)
  --prompt=TEXT          text to continue                         (default: empty)
  --max-new-tokens=N     tokens to sample                         (default 64)
  --temperature=T        0: always the most likely token          (default 0.8)
  --top-k=K              sample among the K likeliest; 0: all     (default 0)
  --top-p=P              sample within probability mass P         (default 1.0)
  --seq-len=N            tokens of context the model sees         (default 128)
  --seed=S               sampling seed                            (default 0)
)";

struct Flags {
  std::string model, tokenizer, name = "llama3", flavor = "debugmodel", prompt;
  int64_t max_new_tokens = 64, seq_len = 128, seed = 0;
  SamplingOptions sampling;
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    bool ok = true;
    if (name == "--model") {
      flags.model = value;
    } else if (name == "--tokenizer") {
      flags.tokenizer = value;
    } else if (name == "--name") {
      flags.name = value;
    } else if (name == "--flavor") {
      flags.flavor = value;
    } else if (name == "--prompt") {
      flags.prompt = value;
    } else if (name == "--max-new-tokens") {
      ok = absl::SimpleAtoi(value, &flags.max_new_tokens) && flags.max_new_tokens >= 0;
    } else if (name == "--seq-len") {
      ok = absl::SimpleAtoi(value, &flags.seq_len) && flags.seq_len >= 1;
    } else if (name == "--seed") {
      ok = absl::SimpleAtoi(value, &flags.seed);
    } else if (name == "--temperature") {
      ok = absl::SimpleAtod(value, &flags.sampling.temperature) && flags.sampling.temperature >= 0;
    } else if (name == "--top-k") {
      ok = absl::SimpleAtoi(value, &flags.sampling.top_k) && flags.sampling.top_k >= 0;
    } else if (name == "--top-p") {
      ok = absl::SimpleAtod(value, &flags.sampling.top_p) && flags.sampling.top_p > 0 &&
           flags.sampling.top_p <= 1;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg, "\n", kUsage));
    }
    if (!ok) return absl::InvalidArgumentError(absl::StrCat(arg, ": see the ranges in --help"));
  }
  if (flags.model.empty() || flags.tokenizer.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model and --tokenizer are required\n", kUsage));
  }
  return flags;
}

absl::StatusOr<std::string> Sample(const Flags& flags) {
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(flags.tokenizer));
  TITAN_ASSIGN_OR_RETURN(const ModelFamily* family, ModelFamilyNamed(flags.name));
  TITAN_ASSIGN_OR_RETURN(LlamaConfig config, family->Flavor(flags.flavor));
  config.vocab_size = tokenizer->vocab_size();
  TITAN_ASSIGN_OR_RETURN(ActivationCheckpoint none, ParseActivationCheckpoint("none", ""));
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<DecoderModel> model,
                         DecoderModel::Create(config, none, {}, {}, *family));
  TITAN_RETURN_IF_ERROR(ReadArena(flags.model, model->params()));
  std::vector<int32_t> tokens = {tokenizer->bos_id()};
  const std::vector<int32_t> prompt = tokenizer->Encode(flags.prompt);
  tokens.insert(tokens.end(), prompt.begin(), prompt.end());
  TITAN_RETURN_IF_ERROR(Generate(*model, tokens, flags.max_new_tokens, flags.seq_len,
                                 tokenizer->eos_id(), flags.sampling,
                                 static_cast<uint64_t>(flags.seed)));
  return tokenizer->Decode(std::span<const int32_t>(tokens).subspan(1));
}

int Run(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "titan-generate: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::string> text = Sample(*flags);
  if (!text.ok()) {
    std::fprintf(stderr, "titan-generate: %s\n", std::string(text.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", text->c_str());
  return 0;
}

}  // namespace
}  // namespace titan

int main(int argc, char** argv) { return titan::Run(argc, argv); }
