#include "core/data/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <fstream>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/data/input_file.h"

namespace titan {
namespace {

// bytes_to_unicode(): printable bytes stand for themselves, the others for 256, 257, ...
const std::array<uint32_t, 256>& ByteToCodePoint() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

void AppendUtf8(uint32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else {  // the map's code points are all below 0x800: two bytes
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace

std::string ByteLevelEncode(absl::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) AppendUtf8(ByteToCodePoint()[b], out);
  return out;
}

absl::StatusOr<std::string> ByteLevelDecode(absl::string_view text) {
  static const std::array<int, 512> inverse = [] {
    std::array<int, 512> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[ByteToCodePoint()[b]] = b;
    return t;
  }();
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = text[i];
    uint32_t c = lead;
    size_t length = 1;
    if ((lead & 0xE0) == 0xC0 && i + 1 < text.size()) {
      c = ((lead & 0x1Fu) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3Fu);
      length = 2;
    }
    if ((lead >= 0x80 && length == 1) || c >= inverse.size() || inverse[c] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", text, "\": expected byte-level characters (GPT-2's bytes_to_unicode)"));
    }
    out += static_cast<char>(inverse[c]);
    i += length;
  }
  return out;
}

namespace {

using Json = nlohmann::json;

// Errors name the file, the field and what was expected.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  absl::Status Error(absl::string_view where, absl::string_view expected,
                     const Json* found = nullptr) const {
    std::string shown;
    if (found != nullptr) {
      shown = found->dump();
      if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
      shown = absl::StrCat(", found ", shown);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", where, ": expected ", expected, shown));
  }

  // object[key] when it is present, not null and of type T; `fallback` when absent or null.
  template <typename T>
  absl::StatusOr<T> Field(const Json& object, absl::string_view where, const char* key,
                          T fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    bool fits;
    if constexpr (std::is_same_v<T, bool>) {
      fits = it->is_boolean();
    } else if constexpr (std::is_same_v<T, std::string>) {
      fits = it->is_string();
    } else if constexpr (std::is_integral_v<T>) {
      fits = it->is_number_integer();
    } else {
      fits = it->is_number();
    }
    if (!fits) return Error(absl::StrCat(where, ".", key), "a value of another type", &*it);
    return it->get<T>();
  }

  // Refuses a field that would change the encoding unless it has its neutral value.
  template <typename T>
  absl::Status Require(const Json& object, absl::string_view where, const char* key, T neutral,
                       absl::string_view why) const {
    TITAN_ASSIGN_OR_RETURN(T value, Field<T>(object, where, key, neutral));
    if (value == neutral) return absl::OkStatus();
    return Error(absl::StrCat(where, ".", key), why, &object[key]);
  }

  const std::string& path() const { return path_; }

 private:
  const std::string& path_;
};

absl::Status CheckModel(const Json& model, const Reader& r) {
  TITAN_ASSIGN_OR_RETURN(std::string type, r.Field<std::string>(model, "model", "type", ""));
  if (type != "BPE") {
    return r.Error("model.type", "\"BPE\" (titan reads byte-level BPE tokenizer.json files)",
                   &model["type"]);
  }
  TITAN_RETURN_IF_ERROR(r.Require(model, "model", "dropout", 0.0, "null or 0 (no BPE dropout)"));
  TITAN_RETURN_IF_ERROR(r.Require(model, "model", "byte_fallback", false,
                                  "false (a byte-level vocabulary covers every byte)"));
  TITAN_RETURN_IF_ERROR(r.Require(model, "model", "continuing_subword_prefix", std::string(),
                                  "null or \"\" (no subword prefix)"));
  return r.Require(model, "model", "end_of_word_suffix", std::string(),
                   "null or \"\" (no end-of-word suffix)");
}

absl::Status CheckNormalizer(const Json& json, const Reader& r) {
  const auto normalizer = json.find("normalizer");
  if (normalizer == json.end() || normalizer->is_null()) return absl::OkStatus();
  const bool empty_sequence =
      normalizer->is_object() && normalizer->value("type", Json()) == "Sequence" &&
      normalizer->contains("normalizers") && (*normalizer)["normalizers"].is_array() &&
      (*normalizer)["normalizers"].empty();
  if (empty_sequence) return absl::OkStatus();
  return r.Error("normalizer", "null (titan encodes the text as it is, unnormalized)",
                 &*normalizer);
}

absl::StatusOr<PreTokenizer> ReadSplit(const Json& step, const std::string& where,
                                       const Reader& r) {
  const auto pattern = step.find("pattern");
  const bool regex = pattern != step.end() && pattern->is_object() && pattern->contains("Regex") &&
                     (*pattern)["Regex"].is_string();
  const bool literal = pattern != step.end() && pattern->is_object() &&
                       pattern->contains("String") && (*pattern)["String"].is_string();
  if (!regex && !literal) {
    return r.Error(absl::StrCat(where, ".pattern"), "{\"Regex\": ...} or {\"String\": ...}",
                   pattern == step.end() ? nullptr : &*pattern);
  }
  TITAN_ASSIGN_OR_RETURN(std::string behavior, r.Field<std::string>(step, where, "behavior", ""));
  if (behavior != "Isolated" && behavior != "Removed") {
    return r.Error(absl::StrCat(where, ".behavior"), "\"Isolated\" or \"Removed\"",
                   step.contains("behavior") ? &step["behavior"] : nullptr);
  }
  TITAN_RETURN_IF_ERROR(r.Require(step, where, "invert", false, "false"));
  const std::string text = (*pattern)[regex ? "Regex" : "String"].get<std::string>();
  absl::StatusOr<PreTokenizer> split = PreTokenizer::Create(
      text, literal, behavior == "Isolated" ? SplitBehavior::kIsolated : SplitBehavior::kRemoved);
  if (!split.ok()) {
    return r.Error(absl::StrCat(where, ".pattern"),
                   absl::StrCat("a usable pattern: ", split.status().message()));
  }
  return split;
}

// Splits, then the ByteLevel step that every byte-level vocabulary needs.
absl::StatusOr<std::vector<PreTokenizer>> ReadPreTokenizers(const Json& json, const Reader& r) {
  const char kExpected[] =
      "a ByteLevel, or a Sequence of Splits ending in a ByteLevel (the vocabulary is byte-level)";
  const auto pre = json.find("pre_tokenizer");
  if (pre == json.end() || !pre->is_object()) {
    return r.Error("pre_tokenizer", kExpected, pre == json.end() ? nullptr : &*pre);
  }
  std::vector<std::pair<std::string, const Json*>> steps = {{"pre_tokenizer", &*pre}};
  if (pre->value("type", Json()) == "Sequence") {
    const auto list = pre->find("pretokenizers");
    if (list == pre->end() || !list->is_array()) {
      return r.Error("pre_tokenizer.pretokenizers", "an array");
    }
    steps.clear();
    for (size_t i = 0; i < list->size(); ++i) {
      steps.emplace_back(absl::StrCat("pre_tokenizer.pretokenizers[", i, "]"), &(*list)[i]);
    }
  }
  std::vector<PreTokenizer> pretokenizers;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& [where, step] = steps[i];
    const Json type = step->is_object() ? step->value("type", Json()) : Json();
    const bool last = i + 1 == steps.size();
    if (type == "Split" && !last) {
      TITAN_ASSIGN_OR_RETURN(PreTokenizer split, ReadSplit(*step, where, r));
      pretokenizers.push_back(std::move(split));
    } else if (type == "ByteLevel" && last) {
      TITAN_RETURN_IF_ERROR(r.Require(*step, where, "add_prefix_space", false,
                                      "false (a prefix space would change the text)"));
      TITAN_ASSIGN_OR_RETURN(bool use_regex, r.Field<bool>(*step, where, "use_regex", true));
      if (use_regex) {
        TITAN_ASSIGN_OR_RETURN(PreTokenizer gpt2,
                               PreTokenizer::Create(kGpt2Pattern, false, SplitBehavior::kIsolated));
        pretokenizers.push_back(std::move(gpt2));
      }
      return pretokenizers;
    } else {
      return r.Error(absl::StrCat(where, ".type"), kExpected, step->is_object() ? &type : step);
    }
  }
  return r.Error("pre_tokenizer", kExpected, &*pre);
}

absl::StatusOr<std::vector<AddedToken>> ReadAddedTokens(const Json& json, const Reader& r) {
  std::vector<AddedToken> added;
  const auto list = json.find("added_tokens");
  if (list == json.end() || list->is_null()) return added;
  if (!list->is_array()) return r.Error("added_tokens", "an array", &*list);
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& token = (*list)[i];
    const std::string where = absl::StrCat("added_tokens[", i, "]");
    if (!token.is_object()) return r.Error(where, "an object", &token);
    AddedToken t;
    TITAN_ASSIGN_OR_RETURN(int64_t id, r.Field<int64_t>(token, where, "id", -1));
    TITAN_ASSIGN_OR_RETURN(t.text, r.Field<std::string>(token, where, "content", ""));
    if (id < 0 || id > INT32_MAX || t.text.empty()) {
      return r.Error(where, "a non-negative id and a non-empty content", &token);
    }
    t.id = static_cast<int32_t>(id);
    TITAN_ASSIGN_OR_RETURN(t.special, r.Field<bool>(token, where, "special", false));
    TITAN_ASSIGN_OR_RETURN(t.normalized, r.Field<bool>(token, where, "normalized", !t.special));
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      TITAN_RETURN_IF_ERROR(r.Require(token, where, flag, false,
                                      "false (titan matches added tokens exactly as written)"));
    }
    added.push_back(std::move(t));
  }
  return added;
}

// The vocabulary's bytes by id; an entry that is not byte-level text must be an added token's.
absl::StatusOr<std::vector<std::string>> ReadVocab(const Json& model,
                                                   const std::vector<AddedToken>& added,
                                                   const Reader& r) {
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object() || vocab->empty()) {
    return r.Error("model.vocab", "an object of token -> id");
  }
  std::vector<std::string> bytes(vocab->size());
  std::vector<bool> seen(vocab->size(), false);
  for (const auto& [token, id] : vocab->items()) {
    const std::string where = absl::StrCat("model.vocab[\"", token, "\"]");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(bytes.size()) || seen[id.get<size_t>()]) {
      return r.Error(where, absl::StrCat("a unique id below the vocabulary size ", bytes.size()),
                     &id);
    }
    const auto index = id.get<size_t>();
    seen[index] = true;
    absl::StatusOr<std::string> decoded = ByteLevelDecode(token);
    if (decoded.ok()) {
      bytes[index] = *std::move(decoded);
    } else if (std::any_of(added.begin(), added.end(), [&](const AddedToken& t) {
                 return t.id == static_cast<int32_t>(index) && t.text == token;
               })) {
      bytes[index] = token;
    } else {
      return r.Error(where, "byte-level text (GPT-2's bytes_to_unicode characters)");
    }
  }
  return bytes;
}

absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> ReadMerges(const Json& model,
                                                                    const Reader& r) {
  std::vector<std::pair<int32_t, int32_t>> merges;
  const auto list = model.find("merges");
  if (list == model.end() || list->is_null()) return merges;
  if (!list->is_array()) return r.Error("model.merges", "an array", &*list);
  const Json& vocab = model["vocab"];
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& merge = (*list)[i];
    std::vector<std::string> parts;
    if (merge.is_string()) {
      parts = absl::StrSplit(merge.get<std::string>(), ' ');
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      parts = {merge[0].get<std::string>(), merge[1].get<std::string>()};
    }
    const std::string where = absl::StrCat("model.merges[", i, "]");
    if (parts.size() != 2) return r.Error(where, "\"left right\" or [left, right]", &merge);
    const auto left = vocab.find(parts[0]), right = vocab.find(parts[1]);
    if (left == vocab.end() || right == vocab.end() || !vocab.contains(parts[0] + parts[1])) {
      return r.Error(where, "parts and a result that are all in model.vocab", &merge);
    }
    merges.emplace_back(left->get<int32_t>(), right->get<int32_t>());
  }
  return merges;
}

// The first of `names` among the added tokens, or a new special token after the last id.
int32_t FindOrAdd(std::initializer_list<absl::string_view> names, absl::string_view fallback,
                  int32_t vocab_size, std::vector<AddedToken>& added) {
  for (absl::string_view name : names) {
    for (const AddedToken& token : added) {
      if (token.text == name) return token.id;
    }
  }
  int32_t next = vocab_size;
  for (const AddedToken& token : added) next = std::max(next, token.id + 1);
  added.push_back({std::string(fallback), next, /*special=*/true, /*normalized=*/false});
  return next;
}

// The file's JSON; a syntax error (a truncated download, say) names its line and column.
absl::StatusOr<Json> ParseFile(const std::string& path) {
  TITAN_RETURN_IF_ERROR(
      InspectInput(path, /*folder_ok=*/false, "a Hugging Face tokenizer.json").status());
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the tokenizer file"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& error) {
    // nlohmann's byte is 1-based, the last one read; its message names the token it stopped at.
    const std::string what = error.what();
    const size_t reason = what.find("syntax error");
    return absl::InvalidArgumentError(absl::StrCat(
        path, ":", LineColumn(text, error.byte > 0 ? error.byte - 1 : 0), ": not valid JSON (",
        reason == std::string::npos ? what : what.substr(reason), ")",
        error.byte > text.size() ? "; the file ends early: is it truncated?" : ""));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadHuggingFaceTokenizer(const std::string& path) {
  TITAN_ASSIGN_OR_RETURN(const Json json, ParseFile(path));
  const Reader r(path);
  if (!json.is_object()) return r.Error("the file", "a JSON object", &json);
  const auto model = json.find("model");
  if (model == json.end() || !model->is_object()) return r.Error("model", "an object");
  TITAN_RETURN_IF_ERROR(CheckModel(*model, r));
  TITAN_RETURN_IF_ERROR(CheckNormalizer(json, r));
  BpeDefinition definition;
  TITAN_ASSIGN_OR_RETURN(definition.pretokenizers, ReadPreTokenizers(json, r));
  TITAN_ASSIGN_OR_RETURN(definition.added, ReadAddedTokens(json, r));
  TITAN_ASSIGN_OR_RETURN(definition.vocab, ReadVocab(*model, definition.added, r));
  TITAN_ASSIGN_OR_RETURN(definition.merges, ReadMerges(*model, r));
  TITAN_ASSIGN_OR_RETURN(definition.ignore_merges,
                         r.Field<bool>(*model, "model", "ignore_merges", false));
  const auto vocab_size = static_cast<int32_t>(definition.vocab.size());
  definition.bos_id =
      FindOrAdd({"<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>", "<|endoftext|>"},
                "<|begin_of_text|>", vocab_size, definition.added);
  definition.eos_id = FindOrAdd({"<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>"},
                                "<|end_of_text|>", vocab_size, definition.added);
  return BpeTokenizer::Create(std::move(definition), path);
}

}  // namespace titan
