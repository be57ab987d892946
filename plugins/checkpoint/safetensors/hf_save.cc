#include "plugins/checkpoint/safetensors/hf_save.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/checkpoint/safetensors/collective.h"
#include "plugins/checkpoint/safetensors/convert.h"
#include "plugins/checkpoint/safetensors/hf_config.h"
#include "plugins/checkpoint/safetensors/hf_folder.h"
#include "plugins/checkpoint/safetensors/hf_layout.h"
#include "plugins/checkpoint/safetensors/pieces.h"
#include "plugins/checkpoint/safetensors/safetensors_file.h"

namespace titan::safetensors {
namespace {

namespace fs = std::filesystem;

constexpr char kModelPrefix[] = "model/";
constexpr int kOrderTag = 0x5a18;
constexpr int kDataTag = 0x5a19;

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// What every rank can check alone, before any rank waits on another.
absl::Status CheckOwnPieces(std::span<const CheckpointPiece> pieces) {
  std::vector<std::string> outside;
  for (const CheckpointPiece& piece : pieces) {
    if (!absl::StartsWith(piece.name, kModelPrefix)) outside.push_back(piece.name);
  }
  if (!outside.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "safetensors checkpoints hold the model only; asked to save '", outside[0], "'",
        outside.size() > 1 ? absl::StrCat(" and ", outside.size() - 1, " more pieces") : "",
        " outside model/"));
  }
  for (const CheckpointPiece& piece : pieces) TITAN_RETURN_IF_ERROR(BoxOf(piece).status());
  return absl::OkStatus();
}

// Where a tensor of the file comes from: a titan tensor, or one expert of a stacked one.
struct FileTensor {
  std::string titan;  // with "model/"
  int64_t expert = -1;
};

// Rank 0's decisions: the file's tensors, where each comes from, and what config.json says.
struct Plan {
  ModelShape shape;
  std::vector<TensorEntry> entries;              // Hugging Face names, as the writer orders them
  std::map<std::string, FileTensor> from;        // by Hugging Face name
  std::map<std::string, TensorSources> sources;  // by titan name, those the file holds
  std::map<std::string, std::string> file_metadata;
  std::vector<std::vector<int32_t>> send_order;  // per rank: its pieces to send, -1 padded
};

// The shape the metadata describes must be exactly the shape of the pieces; the experts' bias,
// which the file leaves out, may be missing.
absl::Status MatchShapes(const ModelShape& shape, const std::vector<TensorSources>& tensors) {
  const std::map<std::string, std::vector<int64_t>> expected = ParameterShapes(shape);
  std::map<std::string, const TensorSources*> given;
  for (const TensorSources& t : tensors) given[t.name.substr(strlen(kModelPrefix))] = &t;
  for (const auto& [name, t] : given) {
    auto it = expected.find(name);
    if (it == expected.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", t->name, "' is not a parameter of the model the metadata describes (",
          shape.n_layers, " layers", shape.tie_embeddings ? ", tied embeddings" : "",
          shape.qk_norm() ? ", QK-norm" : "",
          shape.experts > 0 ? absl::StrCat(", ", shape.experts, " experts") : "", ")"));
    }
    if (it->second != t->full_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t->name, "' has shape ", Shape(t->full_shape),
                       ", the metadata's model implies ", Shape(it->second)));
    }
  }
  for (const auto& [name, shape_of] : expected) {
    if (given.count(name) == 0 && !HasNoHfCounterpart(shape.family, name)) {
      return absl::InvalidArgumentError(absl::StrCat("no rank holds 'model/", name, "' ",
                                                     Shape(shape_of), ", a parameter of ",
                                                     "the model the metadata describes"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> MakePlan(const std::vector<std::string>& described,
                              const CheckpointMetadata& metadata) {
  std::vector<PieceInfo> all;
  std::vector<size_t> counts;
  for (size_t rank = 0; rank < described.size(); ++rank) {
    TITAN_ASSIGN_OR_RETURN(std::vector<PieceInfo> infos,
                           DecodePieceInfos(described[rank], static_cast<int>(rank)));
    counts.push_back(infos.size());
    all.insert(all.end(), infos.begin(), infos.end());
  }
  TITAN_ASSIGN_OR_RETURN(std::vector<TensorSources> tensors, PlanAssembly(std::move(all)));
  Plan plan;
  TITAN_ASSIGN_OR_RETURN(plan.shape, ModelShapeFromMetadata(metadata));
  bool has_output = false;
  for (const TensorSources& t : tensors) has_output |= t.name == "model/output.weight";
  if (metadata.count("model.tie_embeddings") > 0 && plan.shape.tie_embeddings == has_output) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint metadata 'model.tie_embeddings' is ", metadata.at("model.tie_embeddings"),
        " but the pieces ", has_output ? "hold" : "lack", " 'model/output.weight'"));
  }
  plan.shape.tie_embeddings = !has_output;
  TITAN_RETURN_IF_ERROR(MatchShapes(plan.shape, tensors));
  int64_t dropped = 0;
  for (TensorSources& t : tensors) {
    const std::string name = t.name.substr(strlen(kModelPrefix));
    if (HasNoHfCounterpart(plan.shape.family, name)) {
      ++dropped;  // no rank sends it
      continue;
    }
    if (IsStackedExperts(name)) {
      const std::vector<int64_t> one(t.full_shape.begin() + 1, t.full_shape.end());
      for (int64_t e = 0; e < t.full_shape[0]; ++e) {
        TITAN_ASSIGN_OR_RETURN(std::string hf, HfName(plan.shape.family, name, e));
        plan.entries.push_back(TensorEntry{hf, t.dtype, one, 0, 0});
        plan.from[hf] = FileTensor{t.name, e};
      }
    } else {
      TITAN_ASSIGN_OR_RETURN(std::string hf, HfName(plan.shape.family, name));
      plan.entries.push_back(TensorEntry{hf, t.dtype, t.full_shape, 0, 0});
      plan.from[hf] = FileTensor{t.name, -1};
    }
    plan.sources[t.name] = std::move(t);
  }
  // The order the writer lays the tensors out in is the order every rank sends its pieces in:
  // each titan tensor's pieces when the first file tensor it fills comes.
  EncodeHeader(plan.entries, {});
  plan.send_order.resize(described.size());
  std::set<std::string> sent;
  for (const TensorEntry& entry : plan.entries) {
    const std::string& titan = plan.from[entry.name].titan;
    if (!sent.insert(titan).second) continue;
    for (const PieceInfo& piece : plan.sources[titan].pieces) {
      if (piece.rank != 0) plan.send_order[piece.rank].push_back(piece.index);
    }
  }
  for (size_t rank = 0; rank < counts.size(); ++rank)
    plan.send_order[rank].resize(counts[rank], -1);
  plan.file_metadata = metadata;
  plan.file_metadata["format"] = "pt";  // transformers refuses safetensors files without it
  if (dropped > 0) {
    plan.file_metadata[kNotExportedKey] = absl::StrCat(
        "model/layers.N.moe.expert_bias of ", dropped, " layers: the experts' load-balancing ",
        "bias, which Hugging Face's Qwen3-MoE has no place for (an import starts it at zero)");
  }
  return plan;
}

// A folder Save may replace: none yet, or one holding nothing but an earlier export's files.
// Anything else there (a tokenizer beside a downloaded model, unrelated files) would be lost.
absl::Status CheckReplaceable(const fs::path& folder) {
  std::error_code error;
  if (!fs::exists(folder, error)) return absl::OkStatus();
  if (!fs::is_directory(folder, error)) {
    return absl::AlreadyExistsError(
        absl::StrCat(folder.string(), " exists and is not a folder; refusing to replace it"));
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (name != kModelFile && name != kConfigFile) {
      return absl::AlreadyExistsError(
          absl::StrCat(folder.string(), " holds ", name,
                       ", which is not part of a safetensors export; "
                       "refusing to replace the folder (save elsewhere, or remove it first)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Errno(absl::string_view what, const fs::path& path) {
  return absl::InternalError(absl::StrCat(path.string(), ": ", what, ": ", std::strerror(errno)));
}

absl::Status SyncPath(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open to sync", path);
  const bool synced = ::fsync(fd) == 0;
  ::close(fd);
  return synced ? absl::OkStatus() : Errno("cannot sync", path);
}

absl::Status WriteSynced(const fs::path& path, const std::string& text) {
  std::FILE* file = std::fopen(path.c_str(), "wbe");
  if (file == nullptr) return Errno("cannot create", path);
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size() &&
                       std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  if (std::fclose(file) != 0 || !written) return Errno("cannot write", path);
  return absl::OkStatus();
}

// Moves the finished `staging` folder to `folder`, replacing an earlier checkpoint there.
absl::Status Publish(const fs::path& staging, const fs::path& folder) {
  std::error_code error;
  const fs::path old = fs::path(folder.string() + ".old");
  fs::remove_all(old, error);
  if (fs::exists(folder, error)) {
    fs::rename(folder, old, error);
    if (error) return absl::InternalError(absl::StrCat(folder.string(), ": ", error.message()));
  }
  fs::rename(staging, folder, error);
  if (error) {
    return absl::InternalError(absl::StrCat("cannot rename ", staging.string(), " to ",
                                            folder.string(), ": ", error.message()));
  }
  fs::remove_all(old, error);
  return SyncPath(folder.parent_path().empty() ? fs::path(".") : folder.parent_path());
}

// Rank 0: one whole titan tensor from its pieces, its own and those the other ranks send.
absl::StatusOr<std::vector<char>> Assemble(const TensorSources& sources,
                                           std::span<const CheckpointPiece> own,
                                           Communicator& comm) {
  const int64_t element = static_cast<int64_t>(DTypeSize(sources.dtype));
  int64_t numel = 1;
  for (int64_t d : sources.full_shape) numel *= d;
  std::vector<char> tensor(static_cast<size_t>(numel * element)), received;
  for (const PieceInfo& piece : sources.pieces) {
    TensorView data;
    Box box;
    if (piece.rank == 0) {
      data = own[piece.index].data;
      box = *BoxOf(own[piece.index]);
    } else {
      received.resize(static_cast<size_t>(piece.numel() * element));
      TITAN_RETURN_IF_ERROR(
          RecvElements(received.data(), sources.dtype, piece.numel(), piece.rank, kDataTag, comm));
      data = TensorView{received.data(), sources.dtype, Device{}, piece.extent, {}};
      box = BoxOf(piece);
    }
    for (int64_t r = 0; r < box.rows; ++r) {
      std::memcpy(&tensor[((box.row0 + r) * box.full_cols + box.col0) * element],
                  PieceRow(data, box, r), static_cast<size_t>(box.cols * element));
    }
  }
  return tensor;
}

// Appends one tensor of the file, `data` its titan values: in Hugging Face's order (q_proj/k_proj
// rows, q_norm/k_norm elements, DeepSeek-V3's rotated rows of rope_interleave false) and scale
// (DeepSeek-V3's rows before its latent norms).
absl::Status AppendInHfOrder(FileWriter& writer, const TensorEntry& entry, const RowLayout& layout,
                             const char* data) {
  const int64_t element = static_cast<int64_t>(DTypeSize(entry.dtype));
  const int64_t bytes = static_cast<int64_t>(entry.end - entry.begin);
  if (layout.permutes_elements()) {
    std::vector<char> permuted(static_cast<size_t>(bytes));
    for (int64_t i = 0; i < bytes / element; ++i) {
      std::memcpy(&permuted[i * element], data + layout.ToTitan(i) * element, element);
    }
    return writer.Append(permuted.data(), permuted.size());
  }
  if (!layout.permutes() && !layout.scales()) {
    return writer.Append(data, static_cast<size_t>(bytes));
  }
  const int64_t columns = entry.shape.back(), row_bytes = columns * element;
  std::vector<char> scaled(static_cast<size_t>(row_bytes));
  for (int64_t row = 0; row < entry.shape[0]; ++row) {
    const int64_t titan_row = layout.ToTitan(row);
    const char* from = data + titan_row * row_bytes;
    if (const double scale = layout.Scale(titan_row); scale != 1.0) {
      std::memcpy(scaled.data(), from, scaled.size());
      ScaleElements(scaled.data(), entry.dtype, columns, scale, /*divide=*/false);
      from = scaled.data();
    }
    TITAN_RETURN_IF_ERROR(writer.Append(from, static_cast<size_t>(row_bytes)));
  }
  return absl::OkStatus();
}

// Rank 0: receives and writes every tensor in file order, holding each titan tensor until the
// last file tensor it fills is written (a stack of experts fills one per expert). After a write
// error it keeps receiving, so no sender is left waiting, and reports the first error.
absl::Status WriteModel(const Plan& plan, std::span<const CheckpointPiece> own,
                        const fs::path& path, Communicator& comm) {
  auto writer = FileWriter::Create(path.string(), plan.entries, plan.file_metadata);
  absl::Status written = writer.status();
  std::map<std::string, int64_t> uses;  // file tensors still to write, by titan tensor
  for (const auto& [hf, from] : plan.from) ++uses[from.titan];
  std::map<std::string, std::vector<char>> held;
  for (const TensorEntry& entry : plan.entries) {
    const FileTensor& from = plan.from.at(entry.name);
    auto it = held.find(from.titan);
    if (it == held.end()) {
      TITAN_ASSIGN_OR_RETURN(std::vector<char> tensor,
                             Assemble(plan.sources.at(from.titan), own, comm));
      it = held.emplace(from.titan, std::move(tensor)).first;
    }
    const int64_t offset =
        std::max<int64_t>(from.expert, 0) * static_cast<int64_t>(entry.end - entry.begin);
    if (written.ok()) {
      written = AppendInHfOrder(**writer, entry,
                                RowLayout::Of(plan.shape, from.titan.substr(strlen(kModelPrefix))),
                                it->second.data() + offset);
    }
    if (--uses[from.titan] == 0) held.erase(it);
  }
  if (written.ok()) written = (*writer)->Close();
  return written;
}

// Ranks other than 0: send the pieces rank 0 asked for, in its order.
absl::Status SendPieces(std::span<const CheckpointPiece> own, const std::vector<int32_t>& order,
                        Communicator& comm) {
  std::vector<char> packed;
  for (int32_t index : order) {
    if (index < 0) break;
    const CheckpointPiece& piece = own[index];
    const Box box = *BoxOf(piece);
    const size_t row_bytes = static_cast<size_t>(box.cols) * DTypeSize(piece.data.dtype);
    const void* data = piece.data.data;
    if (box.rows > 1 && box.row_stride != box.cols) {
      packed.resize(row_bytes * static_cast<size_t>(box.rows));
      for (int64_t r = 0; r < box.rows; ++r) {
        std::memcpy(&packed[r * row_bytes], PieceRow(piece.data, box, r), row_bytes);
      }
      data = packed.data();
    }
    TITAN_RETURN_IF_ERROR(
        SendElements(data, piece.data.dtype, piece.data.numel(), 0, kDataTag, comm));
  }
  return absl::OkStatus();
}

// Rank 0: the staging folder, the two files, the rename.
absl::Status WriteFolder(const Plan& plan, std::span<const CheckpointPiece> own,
                         const fs::path& folder, Communicator& comm) {
  const fs::path staging = fs::path(folder.string() + ".tmp");
  std::error_code error;
  fs::remove_all(staging, error);
  fs::create_directories(staging, error);
  absl::Status status =
      error ? absl::InternalError(absl::StrCat(staging.string(), ": ", error.message()))
            : absl::OkStatus();
  // Still receive every piece when the folder cannot be made: the senders are waiting.
  absl::Status model = WriteModel(plan, own, staging / kModelFile, comm);
  if (status.ok()) status = model;
  const DType dtype = plan.sources.at("model/tok_embeddings.weight").dtype;
  if (status.ok()) status = WriteSynced(staging / kConfigFile, HfConfigJson(plan.shape, dtype));
  if (status.ok()) status = SyncPath(staging);
  if (status.ok()) status = Publish(staging, folder);
  if (!status.ok()) fs::remove_all(staging, error);  // a full disk keeps no partial folder
  return status;
}

}  // namespace

absl::Status SaveHfFolder(const std::string& folder, std::span<const CheckpointPiece> pieces,
                          const CheckpointMetadata& metadata, Communicator& comm) {
  TITAN_RETURN_IF_ERROR(AgreeOnStatus(CheckOwnPieces(pieces), comm));
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> described,
                         GatherToRoot(EncodePieceInfos(DescribePieces(pieces, comm.rank())), comm));
  // A trailing '/' would put the staging folder inside the target.
  const fs::path target = fs::path(folder).lexically_normal();
  const fs::path path = target.has_filename() ? target : target.parent_path();
  absl::StatusOr<Plan> plan = absl::InternalError("planned on rank 0");
  if (comm.rank() == 0) {
    absl::Status replaceable = CheckReplaceable(path);
    plan = replaceable.ok() ? MakePlan(described, metadata) : replaceable;
    if (!plan.ok()) {
      plan = absl::Status(plan.status().code(),
                          absl::StrCat("saving ", folder, ": ", plan.status().message()));
    }
  }
  TITAN_RETURN_IF_ERROR(BroadcastStatus(plan.status(), 0, comm));
  std::vector<int32_t> order(pieces.size());
  if (comm.rank() == 0) {
    for (int r = 1; r < comm.size(); ++r) {
      std::vector<int32_t>& theirs = plan->send_order[r];
      if (theirs.empty()) continue;
      TITAN_RETURN_IF_ERROR(SendElements(theirs.data(), DType::kI32,
                                         static_cast<int64_t>(theirs.size()), r, kOrderTag, comm));
    }
  } else if (!order.empty()) {
    TITAN_RETURN_IF_ERROR(RecvElements(order.data(), DType::kI32,
                                       static_cast<int64_t>(order.size()), 0, kOrderTag, comm));
  }
  absl::Status saved =
      comm.rank() == 0 ? WriteFolder(*plan, pieces, path, comm) : SendPieces(pieces, order, comm);
  // A sender's failure means the communicator is broken; rank 0's outcome is everyone's.
  if (comm.rank() != 0 && !saved.ok()) return saved;
  return BroadcastStatus(saved, 0, comm);
}

}  // namespace titan::safetensors
