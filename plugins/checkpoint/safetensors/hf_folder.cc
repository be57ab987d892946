#include "plugins/checkpoint/safetensors/hf_folder.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "plugins/checkpoint/safetensors/convert.h"
#include "plugins/checkpoint/safetensors/hf_layout.h"
#include "plugins/checkpoint/safetensors/pieces.h"

namespace titan::safetensors {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kModelPrefix[] = "model/";

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::error_code error;
  if (fs::exists(path, error) && !fs::is_regular_file(path, error)) {
    // A folder reads as empty text, which would be reported as JSON that does not parse.
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a file (a folder?)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HfFolder>> HfFolder::Open(const std::string& folder) {
  std::error_code error;
  if (!fs::is_directory(folder, error)) {
    return absl::NotFoundError(absl::StrCat(folder, ": no such folder"));
  }
  std::unique_ptr<HfFolder> result(new HfFolder(folder));
  const std::string index = (fs::path(folder) / kIndexFile).string();
  const std::string single = (fs::path(folder) / kModelFile).string();
  std::string source;  // what names the tensors: the index or the one file
  if (fs::exists(index, error)) {
    source = index;
  } else if (fs::exists(single, error)) {
    source = single;
  } else {
    return absl::NotFoundError(absl::StrCat(folder, ": expected ", kModelFile, " or ", kIndexFile,
                                            ", found neither: not a safetensors checkpoint"));
  }
  // config.json first: the family decides what the tensors' names mean.
  const std::string config_path = (fs::path(folder) / kConfigFile).string();
  absl::StatusOr<std::string> config = ReadText(config_path);
  if (!config.ok() && !absl::IsNotFound(config.status())) return config.status();
  if (!config.ok()) {
    return absl::NotFoundError(absl::StrCat(config_path, ": missing; a Hugging Face Llama folder ",
                                            "holds its config.json beside the tensors"));
  }
  result->config_path_ = config_path;
  TITAN_ASSIGN_OR_RETURN(result->shape_, ModelShapeFromHfConfig(*config, config_path));
  TITAN_RETURN_IF_ERROR(source == index ? result->ReadIndex(index) : result->AddFile(kModelFile));
  TITAN_RETURN_IF_ERROR(result->CheckAgainstConfig(source));
  return result;
}

absl::Status HfFolder::ReadIndex(const std::string& path) {
  TITAN_ASSIGN_OR_RETURN(std::string text, ReadText(path));
  Json index;
  try {
    index = Json::parse(text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": does not parse as JSON: ", e.what()));
  }
  auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected an object \"weight_map\" of tensor name -> file"));
  }
  std::set<std::string> files;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string() || file.get<std::string>().empty() ||
        file.get<std::string>().find('/') != std::string::npos || file == "." || file == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map[\"", name,
                       "\"]: expected a file name in the folder, found ", file.dump()));
    }
    files.insert(file.get<std::string>());
  }
  for (const std::string& file : files) TITAN_RETURN_IF_ERROR(AddFile(file));
  for (const auto& [name, file] : map->items()) {
    bool found = false;
    for (const auto& [titan, parts] : tensors_) {
      for (const auto& [expert, stored] : parts) {
        found |= stored.entry.name == name &&
                 fs::path(stored.file->path()).filename().string() == file.get<std::string>();
      }
    }
    if (!found && !absl::EndsWith(name, "rotary_emb.inv_freq") &&
        !IsPredictionLayer(shape_, name)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": weight_map puts '", name, "' in ",
                                                     file.get<std::string>(),
                                                     ", which does not hold it"));
    }
  }
  return absl::OkStatus();
}

absl::Status HfFolder::AddFile(const std::string& name) {
  const std::string path = (fs::path(folder_) / name).string();
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  TITAN_ASSIGN_OR_RETURN(FileHeader header, ParseHeader(file->bytes(), path));
  for (TensorEntry& entry : header.tensors) {
    // Older transformers saved each layer's rotary frequencies; they follow from config.json.
    if (absl::EndsWith(entry.name, "rotary_emb.inv_freq")) continue;
    if (IsPredictionLayer(shape_, entry.name)) continue;
    auto error = [&](absl::string_view message) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", entry.name, "': ", message));
    };
    absl::StatusOr<TitanPlace> titan = TitanPlaceOf(shape_.family, entry.name);
    if (!titan.ok()) return error(titan.status().message());
    if (!IsStoredFloat(entry.dtype)) {
      return error(
          absl::StrCat("expected F32, BF16 or F16, found ", SafetensorsDTypeName(entry.dtype)));
    }
    std::map<int64_t, Stored>& parts = tensors_[titan->name];
    if (parts.count(titan->expert) > 0) {
      return error(absl::StrCat("also in ", parts[titan->expert].file->path()));
    }
    parts[titan->expert] = Stored{file.get(), header.data_start, std::move(entry)};
  }
  for (auto& [key, value] : header.metadata) file_metadata_.insert({key, value});
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

std::vector<int64_t> HfFolder::FullShape(const std::string& name,
                                         const std::map<int64_t, Stored>& parts) {
  std::vector<int64_t> shape = parts.begin()->second.entry.shape;
  if (IsStackedExperts(name)) shape.insert(shape.begin(), static_cast<int64_t>(parts.size()));
  return shape;
}

absl::Status HfFolder::CheckAgainstConfig(const std::string& source) const {
  const std::map<std::string, std::vector<int64_t>> expected = ParameterShapes(shape_);
  for (const auto& [name, shape] : expected) {
    if (HasNoHfCounterpart(shape_.family, name)) continue;  // Fill sets it to zero
    auto it = tensors_.find(name);
    const bool stacked = IsStackedExperts(name);
    for (int64_t e = stacked ? 0 : -1; e < (stacked ? shape[0] : 0); ++e) {
      if (it == tensors_.end() || it->second.count(e) == 0) {
        return absl::NotFoundError(
            absl::StrCat(source, ": no tensor '", *HfName(shape_.family, name, e), "' (titan's '",
                         name, "'", stacked ? absl::StrCat(", expert ", e) : "",
                         "), which the model of ", config_path_, " has"));
      }
    }
  }
  const std::string model =
      absl::StrCat("the model ", config_path_, " describes (", shape_.n_layers, " layers",
                   shape_.experts > 0 ? absl::StrCat(", ", shape_.experts, " experts") : "", ")");
  for (const auto& [name, parts] : tensors_) {
    auto it = expected.find(name);
    for (const auto& [expert, stored] : parts) {
      // A tied model may still carry lm_head; it must then match the embeddings.
      std::vector<int64_t> want = it != expected.end()      ? it->second
                                  : name == "output.weight" ? expected.at("tok_embeddings.weight")
                                                            : std::vector<int64_t>{};
      if (expert >= 0 && !want.empty()) {  // one expert of the stack
        want = expert < want[0] ? std::vector<int64_t>(want.begin() + 1, want.end())
                                : std::vector<int64_t>{};
      }
      if (want.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            stored.file->path(), ": tensor '", stored.entry.name, "' is not part of ", model));
      }
      if (want != stored.entry.shape) {
        return absl::InvalidArgumentError(
            absl::StrCat(stored.file->path(), ": tensor '", stored.entry.name, "' has shape ",
                         Shape(stored.entry.shape), ", ", config_path_, " implies ", Shape(want)));
      }
    }
  }
  return absl::OkStatus();
}

CheckpointContents HfFolder::Contents() const {
  std::map<std::string, CheckpointTensor> tensors;
  for (const auto& [name, parts] : tensors_) {
    tensors[name] = {absl::StrCat(kModelPrefix, name), FullShape(name, parts),
                     parts.begin()->second.entry.dtype};
  }
  for (const auto& [name, shape] : ParameterShapes(shape_)) {
    if (HasNoHfCounterpart(shape_.family, name)) {
      tensors[name] = {absl::StrCat(kModelPrefix, name), shape};
    }
  }
  CheckpointContents contents;
  for (auto& [name, tensor] : tensors) contents.tensors.push_back(std::move(tensor));
  contents.metadata = MetadataOf(shape_);
  for (const auto& [key, value] : file_metadata_) {
    // config.json wins; what an export left out is not missing from what titan loads.
    if (key != "format" && key != kNotExportedKey) contents.metadata.insert({key, value});
  }
  return contents;
}

absl::Status HfFolder::Fill(const CheckpointPiece& piece) const {
  absl::string_view name = piece.name;
  if (!absl::ConsumePrefix(&name, kModelPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat("safetensors checkpoints hold the model only; ",
                                                   folder_, " has no '", piece.name, "'"));
  }
  TITAN_ASSIGN_OR_RETURN(Box box, BoxOf(piece));
  const size_t piece_element = DTypeSize(piece.data.dtype);
  // The experts' bias starts at zero: Hugging Face's Qwen3-MoE has none.
  if (HasNoHfCounterpart(shape_.family, name)) {
    const std::map<std::string, std::vector<int64_t>> expected = ParameterShapes(shape_);
    auto bias = expected.find(std::string(name));
    if (bias != expected.end() && bias->second == piece.full_shape) {
      for (int64_t r = 0; r < box.rows; ++r) {
        std::memset(PieceRow(piece.data, box, r), 0, static_cast<size_t>(box.cols) * piece_element);
      }
      return absl::OkStatus();
    }
  }
  auto it = tensors_.find(std::string(name));
  // Tied embeddings serve as the output projection of a model that keeps its own.
  if (it == tensors_.end() && name == "output.weight" && shape_.tie_embeddings) {
    it = tensors_.find("tok_embeddings.weight");
  }
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(folder_, " has no tensor '", piece.name, "'"));
  }
  const std::map<int64_t, Stored>& parts = it->second;
  const std::vector<int64_t> stored_shape = FullShape(it->first, parts);
  if (stored_shape != piece.full_shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", piece.name, "': ", folder_,
                                                   " holds shape ", Shape(stored_shape),
                                                   ", expected ", Shape(piece.full_shape)));
  }
  const RowLayout layout = RowLayout::Of(shape_, name);
  // A stack's rows: expert `row / expert_rows`, row `row % expert_rows` of its tensor.
  const int64_t expert_rows = parts.begin()->first >= 0 ? box.full_rows / stored_shape[0] : 0;
  for (int64_t r = 0; r < box.rows; ++r) {
    const int64_t row = box.row0 + r;
    const Stored& stored = parts.at(expert_rows > 0 ? row / expert_rows : -1);
    const int64_t element = static_cast<int64_t>(DTypeSize(stored.entry.dtype));
    const char* data = stored.file->bytes().data() + stored.data_start + stored.entry.begin;
    const int64_t file_row = expert_rows > 0              ? row % expert_rows
                             : layout.permutes_elements() ? row
                                                          : layout.ToHf(row);
    const char* from = data + (file_row * box.full_cols + box.col0) * element;
    char* to = PieceRow(piece.data, box, r);
    if (!layout.permutes_elements()) {
      TITAN_RETURN_IF_ERROR(
          ConvertElements(from, stored.entry.dtype, to, piece.data.dtype, box.cols));
      if (const double scale = layout.Scale(row); scale != 1.0) {
        ScaleElements(to, piece.data.dtype, box.cols, scale, /*divide=*/true);
      }
      continue;
    }
    for (int64_t c = 0; c < box.cols; ++c) {  // q_norm/k_norm: one head's elements
      TITAN_RETURN_IF_ERROR(ConvertElements(data + layout.ToHf(box.col0 + c) * element,
                                            stored.entry.dtype, to + c * piece_element,
                                            piece.data.dtype, 1));
    }
  }
  return absl::OkStatus();
}

}  // namespace titan::safetensors
