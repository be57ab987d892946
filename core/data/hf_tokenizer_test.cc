#include "core/data/hf_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/data/pretokenize.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

// A byte-level BPE tokenizer.json: the 256 bytes (ids in byte order), merges "h e", "l l",
// "he ll", "Ġ w" (a space is "Ġ"), and Llama 3's first two special tokens after them.
nlohmann::json SmallTokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelEncode(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256, vocab["ll"] = 257, vocab["hell"] = 258, vocab["Ġw"] = 259;
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 260}, {"content", "<|begin_of_text|>"}, {"special", true}},
        {{"id", 261}, {"content", "<|end_of_text|>"}, {"special", true}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(kLlama3Pattern)}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "l l", "he ll", "Ġ w"}}}}};
}

class HfTokenizerTest : public testing::Test {
 protected:
  std::string Write(const nlohmann::json& json) {
    std::ofstream(path_) << json.dump();
    return path_;
  }
  void TearDown() override { fs::remove(path_); }
  std::string path_ =
      (fs::path(testing::TempDir()) / absl::StrCat("titan_tokenizer_", getpid(), ".json")).string();
};

TEST_F(HfTokenizerTest, ByteLevelMapMatchesGpt2) {
  EXPECT_EQ(ByteLevelEncode(" "), "Ġ");
  EXPECT_EQ(ByteLevelEncode("\n"), "Ċ");
  EXPECT_EQ(ByteLevelEncode("a!"), "a!");
  EXPECT_EQ(*ByteLevelDecode("ĠhelloĊ"), " hello\n");
  EXPECT_FALSE(ByteLevelDecode("\xe4\xb8\xad").ok());  // a character outside the map
}

TEST_F(HfTokenizerTest, EncodesDecodesAndKnowsItsSpecialTokens) {
  auto tokenizer = LoadTokenizer(Write(SmallTokenizer()));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Encode("hello world"),
            (std::vector<int32_t>{258, 'o', 259, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ((*tokenizer)->bos_id(), 260);
  EXPECT_EQ((*tokenizer)->eos_id(), 261);
  EXPECT_EQ((*tokenizer)->Decode(std::vector<int32_t>{260, 258, 'o', 261}),
            "<|begin_of_text|>hello<|end_of_text|>");
  const std::string bytes = "caf\xc3\xa9 \xff\xfe\x00 hell";
  EXPECT_EQ((*tokenizer)->Decode((*tokenizer)->Encode(bytes)), bytes);
}

TEST_F(HfTokenizerTest, BadFilesAreErrorsNamingFileAndPlace) {
  EXPECT_EQ(LoadTokenizer(path_ + ".missing.json").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(path_) << "{ not json";
  EXPECT_NE(LoadTokenizer(path_).status().message().find("expected a JSON object"),
            std::string::npos);
  nlohmann::json wordpiece = SmallTokenizer();
  wordpiece["model"]["type"] = "WordPiece";
  auto status = LoadTokenizer(Write(wordpiece)).status();
  EXPECT_NE(status.message().find(path_ + ": model.type: expected \"BPE\""), std::string::npos)
      << status;
  nlohmann::json out_of_order = SmallTokenizer();
  out_of_order["model"]["merges"].push_back("hell o");
  status = LoadTokenizer(Write(out_of_order)).status();
  EXPECT_NE(status.message().find("model.merges[4]"), std::string::npos) << status;
  nlohmann::json foreign_special = SmallTokenizer();
  foreign_special["added_tokens"][1]["content"] = "<eos>";
  status = LoadTokenizer(Write(foreign_special)).status();
  EXPECT_NE(status.message().find("added_tokens[1] (\"<eos>\", id 261)"), std::string::npos)
      << status;
}

TEST_F(HfTokenizerTest, RefusesAnotherPreTokenization) {
  nlohmann::json gpt2 = SmallTokenizer();
  gpt2["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  auto tokenizer = LoadHuggingFaceTokenizer(Write(gpt2));
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_NE(tokenizer.status().message().find(path_ + ": pre_tokenizer step 0 (ByteLevel): "
                                                      "expected the pre-tokenization Llama 3's"),
            std::string::npos)
      << tokenizer.status();
  nlohmann::json none = SmallTokenizer();
  none.erase("pre_tokenizer");
  EXPECT_FALSE(LoadHuggingFaceTokenizer(Write(none)).ok());
}

}  // namespace
}  // namespace titan
