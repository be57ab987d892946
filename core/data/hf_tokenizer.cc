#include "core/data/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/data/pretokenize.h"

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

// titan splits text with Llama 3's pattern only; a file asking for another pre-tokenization
// (GPT-2's ByteLevel regex, whitespace splitting, ...) is refused rather than encoded
// differently from its own library.
absl::Status CheckPreTokenizer(const nlohmann::json& json, const std::string& path) {
  const std::string expected =
      absl::StrCat("Llama 3's: a Split with the pattern ", kLlama3Pattern,
                   ", optionally in a Sequence with a ByteLevel whose use_regex is false");
  auto refuse = [&](absl::string_view where) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", where, ": expected the pre-tokenization ", expected));
  };
  const auto pre = json.find("pre_tokenizer");
  if (pre == json.end() || !pre->is_object()) return refuse("pre_tokenizer");
  std::vector<nlohmann::json> steps = {*pre};
  if (pre->value("type", "") == "Sequence") {
    const auto list = pre->find("pretokenizers");
    if (list == pre->end() || !list->is_array()) return refuse("pre_tokenizer.pretokenizers");
    steps.clear();
    for (const nlohmann::json& step : *list) steps.push_back(step);
  }
  bool split = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const nlohmann::json& step = steps[i];
    const std::string where = absl::StrCat("pre_tokenizer step ", i);
    const std::string type = step.is_object() ? step.value("type", "") : "";
    if (type == "Split") {
      const auto pattern = step.find("pattern");
      if (pattern == step.end() || !pattern->is_object() ||
          pattern->value("Regex", "") != kLlama3Pattern) {
        return refuse(absl::StrCat(where, " (Split)"));
      }
      split = true;
    } else if (type != "ByteLevel" || step.value("use_regex", true)) {
      return refuse(absl::StrCat(where, " (", type, ")"));
    }
  }
  return split ? absl::OkStatus() : refuse("pre_tokenizer");
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> LoadHuggingFaceTokenizer(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the tokenizer file"));
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON object"));
  }
  auto error = [&](absl::string_view where, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", where, ": expected ", what));
  };
  const auto model = json.find("model");
  if (model == json.end() || !model->is_object() || model->value("type", "") != "BPE") {
    return error("model.type", "\"BPE\" (titan reads byte-level BPE tokenizer.json files)");
  }
  if (absl::Status status = CheckPreTokenizer(json, path); !status.ok()) return status;
  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object() || vocab->empty()) {
    return error("model.vocab", "an object of token -> id");
  }
  std::vector<std::string> ranks(vocab->size());
  std::vector<bool> seen(vocab->size(), false);
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(ranks.size()) || seen[id.get<size_t>()]) {
      return error(absl::StrCat("model.vocab[\"", token, "\"]"),
                   absl::StrCat("a unique id below the vocabulary size ", ranks.size()));
    }
    absl::StatusOr<std::string> bytes = ByteLevelDecode(token);
    if (!bytes.ok()) return error("model.vocab", bytes.status().message());
    ranks[id.get<size_t>()] = *std::move(bytes);
    seen[id.get<size_t>()] = true;
  }
  if (const auto merges = model->find("merges"); merges != model->end() && merges->is_array()) {
    for (size_t i = 0; i < merges->size(); ++i) {
      const nlohmann::json& merge = (*merges)[i];
      std::vector<std::string> parts;
      if (merge.is_string()) {
        parts = absl::StrSplit(merge.get<std::string>(), ' ');
      } else if (merge.is_array()) {
        for (const auto& part : merge)
          parts.push_back(part.is_string() ? part.get<std::string>() : "");
      }
      const std::string where = absl::StrCat("model.merges[", i, "]");
      if (parts.size() != 2) return error(where, "\"left right\" or [left, right]");
      const auto left = vocab->find(parts[0]), right = vocab->find(parts[1]),
                 merged = vocab->find(parts[0] + parts[1]);
      if (left == vocab->end() || right == vocab->end() || merged == vocab->end()) {
        return error(where, "parts and a result that are all in model.vocab");
      }
      if (merged->get<int64_t>() <= std::max(left->get<int64_t>(), right->get<int64_t>())) {
        return error(where, "a result ranked after its parts (merge priority in id order)");
      }
    }
  }
  const std::vector<std::string>& special = Llama3SpecialTokens();
  if (const auto added = json.find("added_tokens"); added != json.end() && added->is_array()) {
    for (size_t i = 0; i < added->size(); ++i) {
      const nlohmann::json& token = (*added)[i];
      const int64_t id = token.value("id", int64_t{-1});
      const std::string content = token.value("content", "");
      const int64_t index = id - static_cast<int64_t>(ranks.size());
      if (id >= 0 && id < static_cast<int64_t>(ranks.size()) && ranks[id] == content) continue;
      if (index < 0 || index >= static_cast<int64_t>(special.size()) || special[index] != content) {
        return error(
            absl::StrCat("added_tokens[", i, "] (\"", content, "\", id ", id, ")"),
            absl::StrCat(
                "Llama 3's special token \"",
                index >= 0 && index < static_cast<int64_t>(special.size()) ? special[index] : "?",
                "\" numbered after the ", ranks.size(), " vocabulary tokens"));
      }
    }
  }
  return BpeTokenizer::Create(std::move(ranks), path);
}

}  // namespace titan
