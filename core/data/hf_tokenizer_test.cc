#include "core/data/hf_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/strings/str_cat.h"
#include "core/data/pretokenize.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Ids = std::vector<int32_t>;

// GPT-2's ids for the bytes: the printable ones in byte order, then the others.
int32_t Gpt2ByteId(unsigned char byte) {
  const auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  };
  int32_t id = 0;
  if (printable(byte)) {
    for (int b = 0; b < byte; ++b) id += printable(b);
    return id;
  }
  id = 188;
  for (int b = 0; b < byte; ++b) id += !printable(b);
  return id;
}

// A GPT-2-style tokenizer.json: the 256 bytes with GPT-2's ids ('a' 64, ' ' 220), then
// "ab" 256, "bc" 257, "Ġa" 258, "Ġabc" 259, "abc" 260 (no merge makes it) and the special
// "<|endoftext|>" 261, with a non-special added token "[xyz]" 262. The merges are not in id
// order: "b c" comes first, so "abc" is a + bc where id order would make ab + c.
Json Gpt2Style() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) {
    vocab[ByteLevelEncode(std::string(1, static_cast<char>(b)))] = Gpt2ByteId(b);
  }
  vocab["ab"] = 256, vocab["bc"] = 257, vocab["Ġa"] = 258, vocab["Ġabc"] = 259;
  vocab["abc"] = 260, vocab["<|endoftext|>"] = 261;
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 261},
             {"content", "<|endoftext|>"},
             {"single_word", false},
             {"lstrip", false},
             {"rstrip", false},
             {"normalized", false},
             {"special", true}},
            {{"id", 262}, {"content", "[xyz]"}, {"normalized", true}, {"special", false}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"vocab", vocab},
            {"merges", {"b c", "a b", "Ġ a", "Ġa bc"}}}}};
}

// Llama 3's form: byte ids in byte order, its Split pattern then a ByteLevel without regex,
// ignore_merges, and special tokens numbered after the vocabulary.
Json Llama3Style() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[ByteLevelEncode(std::string(1, static_cast<char>(b)))] = b;
  vocab["he"] = 256, vocab["ll"] = 257, vocab["hell"] = 258, vocab["Ġw"] = 259;
  return {{"added_tokens",
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
          {"model",
           {{"type", "BPE"},
            {"ignore_merges", true},
            {"vocab", vocab},
            {"merges", Json::array({Json::array({"h", "e"}), Json::array({"l", "l"}),
                                    Json::array({"he", "ll"}), Json::array({"Ġ", "w"})})}}}};
}

class HfTokenizerTest : public testing::Test {
 protected:
  std::string Write(const Json& json) {
    std::ofstream(path_) << json.dump();
    return path_;
  }
  std::unique_ptr<BpeTokenizer> Load(const Json& json) {
    auto tokenizer = LoadHuggingFaceTokenizer(Write(json));
    EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
    return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
  }
  // The error loading `json` gives; it must name the file and `field`.
  std::string Refusal(const Json& json, absl::string_view field) {
    auto tokenizer = LoadHuggingFaceTokenizer(Write(json));
    EXPECT_FALSE(tokenizer.ok()) << field;
    const std::string message(tokenizer.status().message());
    EXPECT_NE(message.find(absl::StrCat(path_, ": ", field)), std::string::npos) << message;
    return message;
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
  EXPECT_EQ(Gpt2ByteId('a'), 64);
  EXPECT_EQ(Gpt2ByteId(' '), 220);
}

// The expected ids were worked out by hand (and agree with the tokenizers library).
TEST_F(HfTokenizerTest, MergePriorityIsTheMergesListOrderNotIdOrder) {
  auto tokenizer = Load(Gpt2Style());
  ASSERT_NE(tokenizer, nullptr);
  // [a b c]: "b c" (priority 0) before "a b" (1).
  EXPECT_EQ(tokenizer->Encode("abc"), (Ids{64, 257}));
  // [Ġ a b c] -> [Ġ a bc] -> [Ġa bc] -> [Ġabc].
  EXPECT_EQ(tokenizer->Encode(" abc"), (Ids{259}));
  // Equal priorities: the leftmost first, [ab a b] -> [ab ab].
  EXPECT_EQ(tokenizer->Encode("abab"), (Ids{256, 256}));
  // GPT-2's pattern makes the pieces "cab" and " ab".
  EXPECT_EQ(tokenizer->Encode("cab ab"), (Ids{66, 256, 220, 256}));
  // The [left, right] form of merges is the same list.
  Json pairs = Gpt2Style();
  pairs["model"]["merges"] = Json::array({Json::array({"b", "c"}), Json::array({"a", "b"}),
                                          Json::array({"Ġ", "a"}), Json::array({"Ġa", "bc"})});
  EXPECT_EQ(Load(pairs)->Encode("cab ab abc"), (Ids{66, 256, 220, 256, 259}));
  // ignore_merges: a piece that is a token is that token.
  Json ignore = Gpt2Style();
  ignore["model"]["ignore_merges"] = true;
  EXPECT_EQ(Load(ignore)->Encode("abc"), (Ids{260}));
}

TEST_F(HfTokenizerTest, AddedTokensAreMatchedBeforeBpe) {
  auto tokenizer = Load(Gpt2Style());
  ASSERT_NE(tokenizer, nullptr);
  const std::string text = "x<|endoftext|>y[xyz] abc";
  EXPECT_EQ(tokenizer->EncodeWithSpecialTokens(text), (Ids{87, 261, 88, 262, 259}));
  // Encode leaves a special token's text plain, split by GPT-2's pattern into "x", "<|",
  // "endoftext", "|>", "y"; the non-special [xyz] is still a word of its own.
  EXPECT_EQ(tokenizer->Encode(text),
            (Ids{87, 27, 91, 68, 77, 67, 78, 69, 83, 68, 87, 83, 91, 29, 88, 262, 259}));
  EXPECT_EQ(tokenizer->Decode(tokenizer->EncodeWithSpecialTokens(text)), text);
  // GPT-2 has one special token for both ends.
  EXPECT_EQ(tokenizer->bos_id(), 261);
  EXPECT_EQ(tokenizer->eos_id(), 261);
  EXPECT_EQ(tokenizer->vocab_size(), 263);
}

TEST_F(HfTokenizerTest, Llama3StyleFile) {
  auto tokenizer = Load(Llama3Style());
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->Encode("hello world"), (Ids{258, 'o', 259, 'o', 'r', 'l', 'd'}));
  EXPECT_EQ(tokenizer->bos_id(), 260);
  EXPECT_EQ(tokenizer->eos_id(), 261);
  EXPECT_EQ(tokenizer->Decode(Ids{260, 258, 'o', 261}), "<|begin_of_text|>hello<|end_of_text|>");
}

TEST_F(HfTokenizerTest, BosAndEosAreAddedWhenTheFileHasNone) {
  Json none = Gpt2Style();
  none["added_tokens"] = Json::array();
  auto tokenizer = Load(none);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->bos_id(), 262);
  EXPECT_EQ(tokenizer->eos_id(), 263);
  EXPECT_EQ(tokenizer->vocab_size(), 264);
  EXPECT_EQ(tokenizer->Decode(Ids{262, 64, 263}), "<|begin_of_text|>a<|end_of_text|>");
  Json sentencepiece_names = Gpt2Style();
  sentencepiece_names["added_tokens"] = {{{"id", 262}, {"content", "</s>"}, {"special", true}},
                                         {{"id", 263}, {"content", "<s>"}, {"special", true}}};
  tokenizer = Load(sentencepiece_names);
  EXPECT_EQ(tokenizer->bos_id(), 263);
  EXPECT_EQ(tokenizer->eos_id(), 262);
}

TEST_F(HfTokenizerTest, SplitRemovedDropsTheMatches) {
  Json removed = Gpt2Style();
  removed["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}},
        {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  EXPECT_EQ(Load(removed)->Encode("ab  c abc"), (Ids{256, 66, 64, 257}));
}

TEST_F(HfTokenizerTest, ArbitraryBytesRoundTrip) {
  std::mt19937 rng(3);
  for (const Json& json : {Gpt2Style(), Llama3Style()}) {
    auto tokenizer = Load(json);
    ASSERT_NE(tokenizer, nullptr);
    for (int i = 0; i < 20; ++i) {
      std::string text(300, '\0');
      for (char& c : text) c = static_cast<char>(rng() % 4 == 0 ? " abch"[rng() % 5] : rng());
      text += "caf\xc3\xa9 \xff\xfe\x00 \xc3 hello abc";
      EXPECT_EQ(tokenizer->Decode(tokenizer->Encode(text)), text);
      EXPECT_EQ(tokenizer->Decode(tokenizer->EncodeWithSpecialTokens(text)), text);
    }
  }
}

// A cut-off download: the error gives the line and column where the JSON stops making sense.
TEST_F(HfTokenizerTest, ATruncatedFileIsNamedWithItsPlace) {
  const std::string whole = Gpt2Style().dump(1);
  const std::string cut = whole.substr(0, whole.find("\"merges\""));
  std::ofstream(path_) << cut;
  const size_t lines = std::count(cut.begin(), cut.end(), '\n');
  const size_t column = cut.size() - cut.rfind('\n');
  const std::string message(LoadTokenizer(path_).status().message());
  EXPECT_EQ(
      message.rfind(absl::StrCat(path_, ":", lines + 1, ":", column, ": not valid JSON ("), 0), 0u)
      << message;
  EXPECT_NE(message.find("unexpected end of input"), std::string::npos) << message;
  EXPECT_NE(message.find("the file ends early: is it truncated?"), std::string::npos) << message;

  std::ofstream(path_) << "{\"model\": {\n  \"type\": BPE}}";  // an unquoted string, line 2
  const std::string bad(LoadTokenizer(path_).status().message());
  EXPECT_EQ(bad.rfind(absl::StrCat(path_, ":2:11: not valid JSON (syntax error"), 0), 0u) << bad;
  EXPECT_EQ(bad.find("truncated"), std::string::npos) << bad;
}

TEST_F(HfTokenizerTest, UnsupportedFieldsAreRefusedNamingFileAndField) {
  EXPECT_EQ(LoadTokenizer(path_ + ".missing.json").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(path_) << "[1, 2]";
  EXPECT_NE(LoadTokenizer(path_).status().message().find("expected a JSON object, found [1,2]"),
            std::string::npos);
  auto with = [](const char* a, const char* b, Json value) {
    Json json = Gpt2Style();
    if (b == nullptr) {
      json[a] = std::move(value);
    } else {
      json[a][b] = std::move(value);
    }
    return json;
  };
  Refusal(with("model", "type", "WordPiece"), "model.type: expected \"BPE\"");
  Refusal(with("model", "type", "Unigram"), "model.type");
  Refusal(with("model", "byte_fallback", true), "model.byte_fallback: expected false");
  Refusal(with("model", "dropout", 0.1), "model.dropout");
  Refusal(with("model", "continuing_subword_prefix", "##"), "model.continuing_subword_prefix");
  Refusal(with("model", "end_of_word_suffix", "</w>"), "model.end_of_word_suffix");
  Refusal(with("normalizer", nullptr, {{"type", "NFC"}}), "normalizer: expected null");
  Refusal(with("pre_tokenizer", nullptr, {{"type", "Whitespace"}}), "pre_tokenizer.type");
  Refusal(with("pre_tokenizer", "add_prefix_space", true), "pre_tokenizer.add_prefix_space");
  Refusal(with("pre_tokenizer", nullptr, nullptr), "pre_tokenizer: expected a ByteLevel");
  Json merged = Llama3Style();
  merged["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  Refusal(merged, "pre_tokenizer.pretokenizers[0].behavior: expected \"Isolated\" or \"Removed\"");
  Json inverted = Llama3Style();
  inverted["pre_tokenizer"]["pretokenizers"][0]["invert"] = true;
  Refusal(inverted, "pre_tokenizer.pretokenizers[0].invert");
  Json bad_regex = Llama3Style();
  bad_regex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  Refusal(bad_regex, "pre_tokenizer.pretokenizers[0].pattern: expected a usable pattern");
  Json empty_match = Llama3Style();
  empty_match["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "a*";
  Refusal(empty_match, "pre_tokenizer.pretokenizers[0].pattern");
  Json lstrip = Gpt2Style();
  lstrip["added_tokens"][0]["lstrip"] = true;
  Refusal(lstrip, "added_tokens[0].lstrip");
  Json unknown_merge = Gpt2Style();
  unknown_merge["model"]["merges"].push_back("q zz");
  Refusal(unknown_merge, "model.merges[4]: expected parts and a result");
  Json short_vocab = Gpt2Style();
  short_vocab["model"]["vocab"].erase("Ġ");
  short_vocab["model"]["vocab"]["Ġ"] = 999;
  Refusal(short_vocab, "model.vocab[\"Ġ\"]: expected a unique id below");
  Json not_byte_level = Gpt2Style();
  not_byte_level["model"]["vocab"].erase("abc");
  not_byte_level["model"]["vocab"]["a c"] = 260;  // a raw space is not a byte-level character
  Refusal(not_byte_level, "model.vocab[\"a c\"]: expected byte-level text");
}

}  // namespace
}  // namespace titan
