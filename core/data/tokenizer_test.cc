#include "core/data/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/data/bpe_tokenizer.h"
#include "core/data/bpe_trainer.h"
#include "core/data/byte_tokenizer.h"
#include "core/data/pretokenize.h"
#include "core/data/unicode_classes.h"
#include "core/runtime/utf8.h"

namespace titan {
namespace {

std::string RandomBytes(std::mt19937& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

const char kCorpus[] =
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs.\n"
    "It's 12345 o'clock, and they're   here!\n\nNaïve café — ünïcödé 東京 ok?";

std::unique_ptr<BpeTokenizer> TrainOnCorpus(int64_t vocab) {
  BpeTrainer trainer;
  for (int i = 0; i < 3; ++i) trainer.AddText(kCorpus);
  auto ranks = trainer.Train(vocab);
  EXPECT_TRUE(ranks.ok()) << ranks.status();
  auto tokenizer = BpeTokenizer::FromRanks(*ranks, "test");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(*tokenizer);
}

TEST(ByteTokenizer, RoundTripsArbitraryBytes) {
  ByteTokenizer tokenizer;
  std::mt19937 rng(1);
  std::string text = RandomBytes(rng, 1000);
  std::vector<int32_t> tokens = tokenizer.Encode(text);
  ASSERT_EQ(tokens.size(), text.size());
  EXPECT_EQ(tokenizer.Decode(tokens), text);
  EXPECT_EQ(tokenizer.vocab_size(), 512);
  std::vector<int32_t> special = {tokenizer.bos_id(), 'a', tokenizer.eos_id()};
  EXPECT_EQ(tokenizer.Decode(special), "<|begin_of_text|>a<|end_of_text|>");
}

TEST(PreTokenizer, SplitsLikeLlama3) {
  PreTokenizer p;
  std::vector<absl::string_view> pieces = p.Split("Hello world's 12345 ok!!\n\n  x");
  std::vector<std::string> got(pieces.begin(), pieces.end());
  EXPECT_EQ(got, (std::vector<std::string>{"Hello", " world", "'s", " ", "123", "45", " ok",
                                           "!!\n\n", " ", " x"}));
}

TEST(PreTokenizer, Gpt2PatternAndGeneralSplits) {
  auto gpt2 = PreTokenizer::Create(kGpt2Pattern, false, SplitBehavior::kIsolated);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  std::vector<absl::string_view> pieces = gpt2->Split("Hello world's 12345 ok!!\n\n  x");
  EXPECT_EQ(
      std::vector<std::string>(pieces.begin(), pieces.end()),
      (std::vector<std::string>{"Hello", " world", "'s", " 12345", " ok", "!!", "\n\n ", " x"}));
  // Text a pattern skips is a piece, except that each invalid UTF-8 byte in it is one alone.
  auto space = PreTokenizer::Create(" ", true, SplitBehavior::kIsolated);
  ASSERT_TRUE(space.ok()) << space.status();
  pieces = space->Split(
      "ab c\xff\xc3\xa9"
      "d");
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
            (std::vector<std::string>{"ab", " ", "c", "\xff",
                                      "\xc3\xa9"
                                      "d"}));
  auto removed = PreTokenizer::Create("\\s+", false, SplitBehavior::kRemoved);
  ASSERT_TRUE(removed.ok());
  pieces = removed->Split(" ab  c ");
  EXPECT_EQ(std::vector<std::string>(pieces.begin(), pieces.end()),
            (std::vector<std::string>{"ab", "c"}));
  EXPECT_NE(PreTokenizer::Create("(", false, SplitBehavior::kIsolated)
                .status()
                .message()
                .find("the pattern \"(\" does not compile"),
            std::string::npos);
  EXPECT_NE(PreTokenizer::Create("x?", false, SplitBehavior::kIsolated)
                .status()
                .message()
                .find("can match the empty string"),
            std::string::npos);
}

// The classes are tiktoken's and tokenizers', not PCRE2's (Unicode 14): U+180E is no white space
// (a letter follows it into its piece), and letters and digits of Unicode 15 and 16 scripts are
// letters and digits (Kawi, Garay's cased letters).
TEST(PreTokenizer, ClassesAreTheReferenceLibrariesNotPcre2s) {
  const auto split = [](const PreTokenizer& p, absl::string_view text) {
    std::vector<absl::string_view> pieces = p.Split(text);
    return std::vector<std::string>(pieces.begin(), pieces.end());
  };
  PreTokenizer llama3;
  EXPECT_EQ(split(llama3,
                  "a\u180e"
                  "b"),
            (std::vector<std::string>{"a",
                                      "\u180e"
                                      "b"}));
  EXPECT_EQ(split(llama3, "x \u180e y"), (std::vector<std::string>{"x", " \u180e", " y"}));
  EXPECT_EQ(split(llama3, "\U00011F04\U00011F05 ab"),
            (std::vector<std::string>{"\U00011F04\U00011F05", " ab"}));
  EXPECT_EQ(split(llama3, "\U00011F50\U00011F51\U00011F52\U00011F53"),
            (std::vector<std::string>{"\U00011F50\U00011F51\U00011F52", "\U00011F53"}));
  auto upper = PreTokenizer::Create("\\p{Lu}+", false, SplitBehavior::kIsolated);
  ASSERT_TRUE(upper.ok()) << upper.status();
  EXPECT_EQ(split(*upper, "\U00010D50\U00010D51\U00010D70"),
            (std::vector<std::string>{"\U00010D50\U00010D51", "\U00010D70"}));
}

// Only class escapes change: \s becomes Unicode's white space; \p{X} keeps PCRE2's class and
// gains a second one of what was added since (outside a bracket an alternative, beside a
// bracket's members an alternative too, before a negated bracket a lookahead), or is spelled out
// whole where a code point left it. An escaped backslash, a quote, \P and \S in a bracket and
// other escapes pass through; a bracket's leading ']' and POSIX classes do not end it.
TEST(PreTokenizer, WithReferenceClassesSpellsOutOnlyClassEscapes) {
  const std::string ws = unicode_classes::kWhiteSpace;
  EXPECT_EQ(WithReferenceClasses("\\s"), "[" + ws + "]");
  EXPECT_EQ(WithReferenceClasses("\\S+"), "[^" + ws + "]+");
  EXPECT_EQ(WithReferenceClasses("[^\\s\\d]"), "[^" + ws + "\\d]");
  EXPECT_EQ(WithReferenceClasses("[]\\s]"), "[]" + ws + "]");
  EXPECT_EQ(WithReferenceClasses("[[:alpha:]\\s]"), "[[:alpha:]" + ws + "]");
  EXPECT_EQ(WithReferenceClasses("[\\S]\\P{L}"), "[\\S]\\P{L}");
  EXPECT_EQ(WithReferenceClasses("a\\\\s\\x{41}"), "a\\\\s\\x{41}");
  EXPECT_EQ(WithReferenceClasses("\\Q\\s[\\E\\s"), "\\Q\\s[\\E[" + ws + "]");
  EXPECT_EQ(WithReferenceClasses("\\p{Lt}"), "\\p{Lt}");  // nothing added since 14
  const std::string lu = WithReferenceClasses("\\p{Lu}");
  EXPECT_TRUE(absl::StartsWith(lu, "(?:\\p{Lu}|[\\x{1c89}") && absl::EndsWith(lu, "])")) << lu;
  EXPECT_EQ(WithReferenceClasses("\\p{Lu}x"), lu + "x");
  const std::string a_or_lu = WithReferenceClasses("[a\\p{Lu}]");
  EXPECT_TRUE(absl::StartsWith(a_or_lu, "(?:[a\\p{Lu}]|[\\x{1c89}")) << a_or_lu;
  const std::string neither = WithReferenceClasses("[^a\\p{Lu}]");
  EXPECT_TRUE(absl::StartsWith(neither, "(?:(?![\\x{1c89}") &&
              absl::EndsWith(neither, "])[^a\\p{Lu}])"))
      << neither;
  EXPECT_TRUE(absl::StartsWith(WithReferenceClasses("\\p{Mn}"), "[\\x{300}-\\x{36f}"));
}

// 400 documents over 36 Unicode blocks (old scripts and Unicode 15 and 16 ones, every kind of
// white space, digits, contractions; tools/tokenizer-parity) split into exactly the pieces
// Hugging Face's tokenizers gives them, under the Llama 3 and GPT-2 patterns.
TEST(PreTokenizer, SplitsAsTokenizersDoesOnDocumentsOverUnicodeBlocks) {
  std::ifstream file(std::string(TITAN_SOURCE_DIR) +
                     "/core/data/testdata/pretokenize_parity.jsonl");
  ASSERT_TRUE(file) << "core/data/testdata/pretokenize_parity.jsonl";
  PreTokenizer llama3;
  auto gpt2 = PreTokenizer::Create(kGpt2Pattern, false, SplitBehavior::kIsolated);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  int documents = 0, differing = 0;
  for (std::string line; std::getline(file, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    const std::string text = row["text"];
    // The code point index of each character's first byte, for offsets as tokenizers counts.
    std::vector<int64_t> index(text.size() + 1, -1);
    int64_t point = 0;
    for (size_t byte = 0; byte < text.size(); ++point) {
      const size_t length = Utf8CharLength(absl::string_view(text).substr(byte));
      ASSERT_GT(length, 0u) << "invalid UTF-8 in document " << documents;
      index[byte] = point;
      byte += length;
    }
    index[text.size()] = point;
    for (const auto& [name, splitter] :
         {std::pair<const char*, const PreTokenizer*>{"llama3", &llama3}, {"gpt2", &*gpt2}}) {
      std::vector<std::vector<int64_t>> ours;
      for (absl::string_view piece : splitter->Split(text)) {
        const size_t start = static_cast<size_t>(piece.data() - text.data());
        ours.push_back({index[start], index[start + piece.size()]});
      }
      const auto theirs = row[name].get<std::vector<std::vector<int64_t>>>();
      if (ours != theirs && ++differing <= 5) {
        ADD_FAILURE() << name << " splits document " << documents << " otherwise: " << line;
      }
    }
    ++documents;
  }
  EXPECT_EQ(documents, 400);
  EXPECT_EQ(differing, 0);
}

TEST(PreTokenizer, CoversInvalidUtf8ByteByByte) {
  PreTokenizer p;
  std::string text = "ab\xff\xfe cd\xc3";
  std::vector<absl::string_view> pieces = p.Split(text);
  std::string joined;
  for (auto piece : pieces) joined += std::string(piece);
  EXPECT_EQ(joined, text);
  EXPECT_EQ(std::string(pieces[1]), "\xff");
}

TEST(BpeTrainer, LearnsFrequentPairsFirst) {
  BpeTrainer trainer;
  trainer.AddText("aaaa aaaa aaaa bb");
  auto ranks = trainer.Train(258);
  ASSERT_TRUE(ranks.ok());
  ASSERT_EQ(ranks->size(), 258u);
  EXPECT_EQ((*ranks)[256], "aa");
  EXPECT_EQ((*ranks)[257], "aaaa");
  EXPECT_FALSE(trainer.Train(10).ok());
}

TEST(BpeTrainer, IsDeterministic) {
  BpeTrainer a, b;
  a.AddText(kCorpus);
  b.AddText(kCorpus);
  EXPECT_EQ(*a.Train(300), *b.Train(300));
}

TEST(BpeTokenizer, KnownEncodingAndRoundTrips) {
  std::unique_ptr<BpeTokenizer> tokenizer = TrainOnCorpus(400);
  std::vector<int32_t> tokens = tokenizer->Encode(" the fox");
  ASSERT_EQ(tokens.size(), 2u);  // " the" and " fox" were learned
  EXPECT_EQ(tokenizer->Decode(tokens), " the fox");
  EXPECT_EQ(tokenizer->vocab()[tokens[1]], " fox");
  std::mt19937 rng(2);
  for (int i = 0; i < 20; ++i) {
    std::string text = RandomBytes(rng, 200) + kCorpus;
    EXPECT_EQ(tokenizer->Decode(tokenizer->Encode(text)), text);
  }
  EXPECT_LT(tokenizer->Encode(kCorpus).size(), sizeof(kCorpus) / 2);
}

// tiktoken's own loop: merge the adjacent parts whose joined bytes rank lowest, leftmost first.
std::vector<int32_t> TiktokenPiece(const BpeTokenizer& tokenizer, absl::string_view piece) {
  absl::flat_hash_map<std::string, int32_t> rank;
  for (size_t i = 0; i < tokenizer.vocab().size(); ++i) rank[tokenizer.vocab()[i]] = i;
  if (rank.contains(piece)) return {rank.at(std::string(piece))};
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    size_t best = 0;
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto it = rank.find(parts[i] + parts[i + 1]);
      if (it != rank.end() && it->second < best_rank) best = i, best_rank = it->second;
    }
    if (best_rank == INT32_MAX) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + best + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& part : parts) ids.push_back(rank.at(part));
  return ids;
}

TEST(BpeTokenizer, RankMergesEncodeAsTiktokenDoes) {
  std::unique_ptr<BpeTokenizer> tokenizer = TrainOnCorpus(420);
  PreTokenizer llama3;
  std::mt19937 rng(4);
  for (int i = 0; i < 50; ++i) {
    std::string text = RandomBytes(rng, 40) + kCorpus + RandomBytes(rng, 40);
    std::vector<int32_t> expected;
    for (absl::string_view piece : llama3.Split(text)) {
      for (int32_t id : TiktokenPiece(*tokenizer, piece)) expected.push_back(id);
    }
    EXPECT_EQ(tokenizer->Encode(text), expected);
  }
}

TEST(BpeTokenizer, SpecialTokens) {
  std::unique_ptr<BpeTokenizer> tokenizer = TrainOnCorpus(300);
  const std::string text = "<|begin_of_text|>the fox<|eot_id|>";
  std::vector<int32_t> with = tokenizer->EncodeWithSpecialTokens(text);
  EXPECT_EQ(with.front(), tokenizer->bos_id());
  EXPECT_EQ(with.back(), tokenizer->bos_id() + 9);
  EXPECT_EQ(tokenizer->Decode(with), text);
  std::vector<int32_t> plain = tokenizer->Encode(text);  // corpus text never becomes control
  for (int32_t t : plain) EXPECT_LT(t, tokenizer->bos_id());
  EXPECT_EQ(tokenizer->Decode(plain), text);
  EXPECT_EQ(tokenizer->vocab_size(), 300 + 256);
}

TEST(BpeTokenizer, TiktokenFileRoundTripAndErrors) {
  std::unique_ptr<BpeTokenizer> tokenizer = TrainOnCorpus(320);
  auto dir = std::filesystem::temp_directory_path() / "titan_tokenizer_test";
  std::filesystem::create_directories(dir);
  std::string path = (dir / "vocab.tiktoken").string();
  ASSERT_TRUE(WriteTiktoken(tokenizer->vocab(), path).ok());
  auto loaded = BpeTokenizer::LoadTiktoken(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->vocab(), tokenizer->vocab());
  EXPECT_EQ((*loaded)->Encode(kCorpus), tokenizer->Encode(kCorpus));

  auto missing = BpeTokenizer::LoadTiktoken((dir / "none").string());
  EXPECT_NE(std::string(missing.status().message()).find("no such file or folder"),
            std::string::npos);
  std::ofstream((dir / "bad").string()) << "QQ== 0\nnot-base64!! 1\n";
  auto bad = BpeTokenizer::LoadTiktoken((dir / "bad").string());
  EXPECT_NE(std::string(bad.status().message()).find("bad:2"), std::string::npos);
  // A binary file's bytes are quoted escaped and cut short (issue #39), never raw.
  std::ofstream((dir / "binary").string())
      << "\x1b[31m\xff\x01 and sixty more bytes of a binary file, which the message cuts short\n";
  auto binary = BpeTokenizer::LoadTiktoken((dir / "binary").string());
  EXPECT_THAT(std::string(binary.status().message()),
              testing::HasSubstr("binary:1: expected \"<base64 bytes> <rank>\" (tiktoken format), "
                                 "found \"\\x1b[31m\\xff\\x01 and sixty more bytes of a binary "
                                 "file, which the mes...\""));
  std::ofstream((dir / "short").string()) << "QQ== 0\n";
  auto short_vocab = BpeTokenizer::LoadTiktoken((dir / "short").string());
  EXPECT_NE(std::string(short_vocab.status().message()).find("single byte"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// A folder, or a path whose NUL would cut it to a folder's name, used to escape as libstdc++'s
// "basic_filebuf::underflow error reading the file".
TEST(LoadTokenizer, AFolderOrAPathWithANulIsNamedForWhatItIs) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("titan_load_tokenizer_", ::getpid());
  std::filesystem::create_directories(dir / "tokenizer.json");
  for (const std::string& path : {dir.string(), (dir / "tokenizer.json").string()}) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> loaded = LoadTokenizer(path);
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(loaded.status().message(),
              absl::StrCat("\"", path, "\" is a folder; expected a ",
                           path == dir ? "tiktoken rank file" : "Hugging Face tokenizer.json"));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> loaded =
      LoadTokenizer(dir.string() + std::string("\0.json", 6));
  EXPECT_NE(std::string(loaded.status().message()).find("the path has a NUL byte at offset"),
            std::string::npos)
      << loaded.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace titan
