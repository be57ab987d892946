#include "plugins/checkpoint/safetensors/hf_save.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/checkpoint/safetensors/collective.h"
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

// Rank 0's decisions: the file's tensors, where each comes from, and what config.json says.
struct Plan {
  ModelShape shape;
  std::vector<TensorEntry> entries;              // Hugging Face names, as the writer orders them
  std::map<std::string, TensorSources> sources;  // by Hugging Face name
  std::map<std::string, std::string> file_metadata;
  std::vector<std::vector<int32_t>> send_order;  // per rank: its pieces to send, -1 padded
};

// The shape the metadata describes must be exactly the shape of the pieces.
absl::Status MatchShapes(const ModelShape& shape, const std::vector<TensorSources>& tensors) {
  const std::map<std::string, std::vector<int64_t>> expected = ParameterShapes(shape);
  std::map<std::string, const TensorSources*> given;
  for (const TensorSources& t : tensors) given[t.name.substr(strlen(kModelPrefix))] = &t;
  for (const auto& [name, t] : given) {
    auto it = expected.find(name);
    if (it == expected.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", t->name, "' is not a parameter of the model the metadata describes (",
          shape.n_layers, " layers", shape.tie_embeddings ? ", tied embeddings" : "", ")"));
    }
    if (it->second != t->full_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t->name, "' has shape ", Shape(t->full_shape),
                       ", the metadata's model implies ", Shape(it->second)));
    }
  }
  for (const auto& [name, shape_of] : expected) {
    if (given.count(name) == 0) {
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
  for (TensorSources& t : tensors) {
    TITAN_ASSIGN_OR_RETURN(std::string hf, HfName(t.name.substr(strlen(kModelPrefix))));
    plan.entries.push_back(TensorEntry{hf, t.dtype, t.full_shape, 0, 0});
    plan.sources[hf] = std::move(t);
  }
  // The order the writer lays the tensors out in is the order every rank sends its pieces in.
  EncodeHeader(plan.entries, {});
  plan.send_order.resize(described.size());
  for (const TensorEntry& entry : plan.entries) {
    for (const PieceInfo& piece : plan.sources[entry.name].pieces) {
      if (piece.rank != 0) plan.send_order[piece.rank].push_back(piece.index);
    }
  }
  for (size_t rank = 0; rank < counts.size(); ++rank)
    plan.send_order[rank].resize(counts[rank], -1);
  plan.file_metadata = metadata;
  plan.file_metadata["format"] = "pt";  // transformers refuses safetensors files without it
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

// Rank 0: receives and writes every tensor in file order. After a write error it keeps
// receiving, so no sender is left waiting, and reports the first error.
absl::Status WriteModel(const Plan& plan, std::span<const CheckpointPiece> own,
                        const fs::path& path, Communicator& comm) {
  auto writer = FileWriter::Create(path.string(), plan.entries, plan.file_metadata);
  absl::Status written = writer.status();
  std::vector<char> tensor, received;
  for (const TensorEntry& entry : plan.entries) {
    const TensorSources& sources = plan.sources.at(entry.name);
    const int64_t element = static_cast<int64_t>(DTypeSize(entry.dtype));
    tensor.resize(entry.end - entry.begin);
    for (const PieceInfo& piece : sources.pieces) {
      TensorView data;
      Box box;
      if (piece.rank == 0) {
        data = own[piece.index].data;
        box = *BoxOf(own[piece.index]);
      } else {
        received.resize(static_cast<size_t>(piece.numel() * element));
        TITAN_RETURN_IF_ERROR(
            RecvElements(received.data(), entry.dtype, piece.numel(), piece.rank, kDataTag, comm));
        data = TensorView{received.data(), entry.dtype, Device{}, piece.extent, {}};
        box = BoxOf(piece);
      }
      for (int64_t r = 0; r < box.rows; ++r) {
        std::memcpy(&tensor[((box.row0 + r) * box.full_cols + box.col0) * element],
                    PieceRow(data, box, r), static_cast<size_t>(box.cols * element));
      }
    }
    if (!written.ok()) continue;
    const int64_t row_bytes = sources.full_shape.back() * element;
    if (HasRotaryRows(sources.name)) {
      for (int64_t row = 0; row < sources.full_shape[0] && written.ok(); ++row) {
        const int64_t titan_row = TitanRow(row, plan.shape.head_dim());
        written = (*writer)->Append(&tensor[titan_row * row_bytes], row_bytes);
      }
    } else {
      written = (*writer)->Append(tensor.data(), tensor.size());
    }
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
  const DType dtype = plan.sources.at("model.embed_tokens.weight").dtype;
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
