#include "core/data/tokenizer.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/data/bpe_tokenizer.h"
#include "core/data/byte_tokenizer.h"
#include "core/data/hf_tokenizer.h"

namespace titan {

const std::vector<std::string>& Llama3SpecialTokens() {
  static const std::vector<std::string> tokens = [] {
    std::vector<std::string> t = {"<|begin_of_text|>",
                                  "<|end_of_text|>",
                                  "<|reserved_special_token_0|>",
                                  "<|reserved_special_token_1|>",
                                  "<|finetune_right_pad_id|>",
                                  "<|step_id|>",
                                  "<|start_header_id|>",
                                  "<|end_header_id|>",
                                  "<|eom_id|>",
                                  "<|eot_id|>",
                                  "<|python_tag|>"};
    for (int i = 2; t.size() < 256; ++i)
      t.push_back(absl::StrCat("<|reserved_special_token_", i, "|>"));
    return t;
  }();
  return tokens;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  if (path == "byte") return std::make_unique<ByteTokenizer>();
  if (absl::EndsWith(path, ".json")) {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> hf, LoadHuggingFaceTokenizer(path));
    return std::unique_ptr<Tokenizer>(std::move(hf));
  }
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> bpe, BpeTokenizer::LoadTiktoken(path));
  return std::unique_ptr<Tokenizer>(std::move(bpe));
}

}  // namespace titan
