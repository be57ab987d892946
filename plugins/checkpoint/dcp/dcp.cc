// The `dcp` checkpoint plugin (after PyTorch's distributed checkpoint): a folder per save in
// which each rank writes the pieces it was assigned to rank-<R>.bin, zstd-compressed and
// checksummed, and rank 0 writes metadata.json, the index of every logical tensor's pieces.
// Pieces several ranks hold alike (replicas) are written once, by the lowest such rank. The
// folder is written as <folder>.tmp and renamed once every rank has finished, so an
// interrupted save never damages an earlier checkpoint. Loading fills each requested piece
// from whichever stored pieces overlap it, so a checkpoint saved on one mesh loads on another.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plugins/checkpoint/dcp/box.h"
#include "plugins/checkpoint/dcp/shard_file.h"
#include "titan/checkpoint.h"

namespace titan::dcp {
namespace {

namespace fs = std::filesystem;

// Every rank's `mine`, in rank order (a collective over `comm`).
absl::StatusOr<std::vector<std::string>> AllGatherText(Communicator& comm,
                                                       const std::string& mine) {
  const int n = comm.size();
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(static_cast<size_t>(n));
  auto i64 = [](int64_t* data, int64_t count) {
    return TensorView{data, DType::kI64, Device{}, {count}, {}};
  };
  TITAN_RETURN_IF_ERROR(comm.AllGather(i64(&length, 1), i64(lengths.data(), n)));
  int64_t words = 0;
  for (int64_t l : lengths) words = std::max(words, (l + 7) / 8);
  std::vector<int64_t> padded(static_cast<size_t>(words), 0), all(static_cast<size_t>(words * n));
  std::memcpy(padded.data(), mine.data(), mine.size());
  TITAN_RETURN_IF_ERROR(comm.AllGather(i64(padded.data(), words), i64(all.data(), words * n)));
  std::vector<std::string> texts;
  for (int r = 0; r < n; ++r) {
    texts.emplace_back(reinterpret_cast<const char*>(all.data() + r * words),
                       static_cast<size_t>(lengths[static_cast<size_t>(r)]));
  }
  return texts;
}

// Every rank learns whether all succeeded, so that none waits for a rank that gave up; the
// failing rank keeps its own error, the others name it.
absl::Status Agree(Communicator& comm, const absl::Status& mine, absl::string_view what) {
  int64_t failed = mine.ok() ? -1 : comm.rank();
  TITAN_RETURN_IF_ERROR(
      comm.AllReduce(TensorView{&failed, DType::kI64, Device{}, {1}, {}}, ReduceOp::kMax));
  if (!mine.ok()) return mine;
  if (failed >= 0) {
    return absl::AbortedError(absl::StrCat(what, ": rank ", failed, " failed (see its error)"));
  }
  return absl::OkStatus();
}

absl::Status CheckPiece(const CheckpointPiece& piece) {
  const Box box{piece.offset, piece.data.shape};
  absl::Status inside = CheckInside(box, piece.full_shape);
  if (!inside.ok())
    return absl::InvalidArgumentError(absl::StrCat(piece.name, ": ", inside.message()));
  if (piece.data.data == nullptr && box.numel() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(piece.name, ": the piece has no data"));
  }
  if (piece.data.device.type != DeviceType::kCpu || !piece.data.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat(piece.name, ": a piece must be contiguous in CPU memory"));
  }
  return absl::OkStatus();
}

// A piece's identity for de-duplication: replicas hold the same box of the same tensor.
using PieceKey = std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>>;

class Dcp : public CheckpointPlugin {
 public:
  absl::Status Save(const std::string& folder, std::span<const CheckpointPiece> pieces,
                    const CheckpointMetadata& metadata, Communicator& comm) override;
  absl::Status Load(const std::string& folder, std::span<CheckpointPiece> pieces,
                    Communicator& comm) override;
  absl::StatusOr<CheckpointContents> Read(const std::string& folder) override;

 private:
  absl::Status WriteFolder(const std::string& folder, const std::string& temporary,
                           const std::vector<const CheckpointPiece*>& assigned,
                           const CheckpointMetadata& metadata,
                           const std::map<std::string, CheckpointTensor>& tensors,
                           Communicator& comm);
};

// Every piece file the index names is there and long enough to hold its pieces: a folder whose
// rank files are gone (a prune or a copy cut short) is no checkpoint to resume from.
absl::Status CheckPieceFiles(const std::string& folder, const Index& index) {
  std::map<std::string, std::pair<int64_t, int64_t>> needed;  // file: pieces, bytes up to
  for (const StoredPiece& piece : index.pieces) {
    auto& [count, end] = needed[piece.file];
    ++count;
    end = std::max(end, piece.position + piece.bytes);
  }
  for (const auto& [file, need] : needed) {
    const std::filesystem::path path = std::filesystem::path(folder) / file;
    std::error_code error;
    const bool regular = std::filesystem::is_regular_file(path, error);
    const auto size = regular ? std::filesystem::file_size(path, error) : 0;
    if (!regular || error) {
      return absl::DataLossError(absl::StrCat(
          path.string(),
          std::filesystem::exists(path, error) ? " is not a file (a folder?)" : " is missing", ": ",
          kIndexFile, " names ", need.first, " piece(s) in it, so ", folder,
          " is not a complete dcp checkpoint (a removal or copy cut short?)"));
    }
    if (static_cast<int64_t>(size) < need.second) {
      return absl::DataLossError(absl::StrCat(
          path.string(), " is ", size, " bytes, but ", kIndexFile, " places pieces up to byte ",
          need.second, " in it: ", folder, " is not a complete dcp checkpoint"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointContents> Dcp::Read(const std::string& folder) {
  TITAN_ASSIGN_OR_RETURN(Index index, ReadIndex(folder));
  TITAN_RETURN_IF_ERROR(CheckPieceFiles(folder, index));
  CheckpointContents contents{{}, index.metadata};
  for (const auto& [name, tensor] : index.tensors) contents.tensors.push_back(tensor);
  return contents;
}

absl::Status Dcp::Save(const std::string& folder, std::span<const CheckpointPiece> pieces,
                       const CheckpointMetadata& metadata, Communicator& comm) {
  absl::Status valid = absl::OkStatus();
  for (const CheckpointPiece& piece : pieces) valid.Update(CheckPiece(piece));
  TITAN_RETURN_IF_ERROR(Agree(comm, valid, absl::StrCat("saving ", folder)));

  // Plan: each distinct piece goes to the lowest rank holding it.
  std::vector<StoredPiece> described;
  for (const CheckpointPiece& piece : pieces) {
    described.push_back({piece.name, piece.full_shape, Box{piece.offset, piece.data.shape},
                         piece.data.dtype, "", 0, 0, static_cast<int64_t>(piece.data.nbytes())});
  }
  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> plans,
                         AllGatherText(comm, PiecesToJson(described)));
  // Every rank checks the whole plan alike, so all agree on its verdict.
  std::map<PieceKey, int> owner;
  std::map<std::string, CheckpointTensor> tensors;
  for (int r = 0; r < comm.size(); ++r) {
    TITAN_ASSIGN_OR_RETURN(std::vector<StoredPiece> plan,
                           PiecesFromJson(plans[static_cast<size_t>(r)], "save plan"));
    for (const StoredPiece& p : plan) {
      owner.emplace(PieceKey{p.tensor, p.box.offset, p.box.shape}, r);
      auto [it, added] =
          tensors.emplace(p.tensor, CheckpointTensor{p.tensor, p.full_shape, p.dtype});
      if (!added && (it->second.full_shape != p.full_shape || it->second.dtype != p.dtype)) {
        return absl::InvalidArgumentError(
            absl::StrCat("saving ", folder, ": the ranks' pieces of ", p.tensor,
                         " disagree on the tensor's shape or dtype (rank ", r, " has [",
                         absl::StrJoin(p.full_shape, ", "), "] ", DTypeName(p.dtype), ")"));
      }
    }
  }

  const std::string temporary = folder + ".tmp";
  std::error_code error;
  if (comm.rank() == 0) {
    fs::remove_all(temporary, error);
    fs::create_directories(temporary, error);
  }
  absl::Status created =
      error ? absl::InternalError(absl::StrCat(temporary, ": cannot create: ", error.message()))
            : absl::OkStatus();
  TITAN_RETURN_IF_ERROR(Agree(comm, created, absl::StrCat("saving ", folder)));

  std::vector<const CheckpointPiece*> assigned;
  for (const CheckpointPiece& piece : pieces) {
    auto it = owner.find(PieceKey{piece.name, piece.offset, piece.data.shape});
    if (it != owner.end() && it->second == comm.rank()) {
      assigned.push_back(&piece);
      owner.erase(it);  // a second copy on this rank is a replica too
    }
  }
  absl::Status saved = WriteFolder(folder, temporary, assigned, metadata, tensors, comm);
  if (!saved.ok() && comm.rank() == 0) {
    // Every rank has stopped writing (they agreed on the failure): a full disk keeps no debris.
    fs::remove_all(temporary, error);
  }
  return saved;
}

// The shards, the index and the rename of `temporary` to `folder`; collective.
absl::Status Dcp::WriteFolder(const std::string& folder, const std::string& temporary,
                              const std::vector<const CheckpointPiece*>& assigned,
                              const CheckpointMetadata& metadata,
                              const std::map<std::string, CheckpointTensor>& tensors,
                              Communicator& comm) {
  const std::string file = absl::StrCat("rank-", comm.rank(), ".bin");
  absl::StatusOr<std::vector<StoredPiece>> written =
      WritePieces((fs::path(temporary) / file).string(), file, assigned);
  TITAN_RETURN_IF_ERROR(Agree(comm, written.status(), absl::StrCat("saving ", folder)));

  TITAN_ASSIGN_OR_RETURN(std::vector<std::string> records,
                         AllGatherText(comm, PiecesToJson(*written)));
  absl::Status finished = absl::OkStatus();
  if (comm.rank() == 0) {
    Index index{metadata, tensors, {}, comm.size()};
    for (const std::string& text : records) {
      absl::StatusOr<std::vector<StoredPiece>> stored = PiecesFromJson(text, "save records");
      finished.Update(stored.status());
      if (!stored.ok()) break;
      for (StoredPiece& p : *stored) index.pieces.push_back(std::move(p));
    }
    if (finished.ok()) finished = WriteIndex((fs::path(temporary) / kIndexFile).string(), index);
    if (finished.ok()) {
      std::error_code error;
      fs::remove_all(folder, error);
      fs::rename(temporary, folder, error);
      if (error) {
        finished = absl::InternalError(
            absl::StrCat("renaming ", temporary, " to ", folder, ": ", error.message()));
      }
    }
  }
  return Agree(comm, finished, absl::StrCat("saving ", folder));
}

// Fills each piece from the stored pieces overlapping it; a piece left partly unfilled is an
// error naming the tensor and the folder.
absl::Status LoadPieces(const std::string& folder, std::span<CheckpointPiece> pieces) {
  TITAN_ASSIGN_OR_RETURN(Index index, ReadIndex(folder));
  std::map<std::string, std::vector<const StoredPiece*>> stored_by_tensor;
  for (const StoredPiece& p : index.pieces) stored_by_tensor[p.tensor].push_back(&p);
  // Decompressed stored pieces, kept while consecutive requests (the runs of one parameter
  // under fsdp) reuse them; bounded so a large model never holds much of itself twice.
  constexpr size_t kCacheBytes = size_t{256} << 20;
  std::map<std::pair<std::string, int64_t>, std::vector<char>> cache;
  size_t cached_bytes = 0;
  for (CheckpointPiece& piece : pieces) {
    TITAN_RETURN_IF_ERROR(CheckPiece(piece));
    auto tensor = index.tensors.find(piece.name);
    if (tensor == index.tensors.end()) {
      return absl::NotFoundError(absl::StrCat(folder, " holds no tensor '", piece.name, "'"));
    }
    if (tensor->second.full_shape != piece.full_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(folder, ": ", piece.name, " was saved with shape [",
                       absl::StrJoin(tensor->second.full_shape, ", "), "], expected [",
                       absl::StrJoin(piece.full_shape, ", "), "]"));
    }
    if (!CanConvert(tensor->second.dtype, piece.data.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(folder, ": ", piece.name, " is stored as ", DTypeName(tensor->second.dtype),
                       ", which cannot load into ", DTypeName(piece.data.dtype)));
    }
    const Box want{piece.offset, piece.data.shape};
    int64_t covered = 0;
    for (const StoredPiece* stored : stored_by_tensor[piece.name]) {
      if (!Overlaps(stored->box, want)) continue;
      const auto key = std::make_pair(stored->file, stored->position);
      auto found = cache.find(key);
      if (found == cache.end()) {
        if (cached_bytes > kCacheBytes) cache.clear(), cached_bytes = 0;
        TITAN_ASSIGN_OR_RETURN(std::vector<char> raw, ReadPiece(folder, *stored));
        cached_bytes += raw.size();
        found = cache.emplace(key, std::move(raw)).first;
      }
      // ReadPiece checked the size for the piece it read; a damaged index can point another
      // piece, of another size, at the same bytes.
      if (static_cast<int64_t>(found->second.size()) !=
          stored->box.numel() * static_cast<int64_t>(DTypeSize(stored->dtype))) {
        return absl::DataLossError(absl::StrCat(folder, ": ", stored->file, " at ",
                                                stored->position, ": pieces of different sizes ",
                                                "share these bytes (damaged metadata.json?)"));
      }
      covered += CopyOverlap(stored->box, found->second.data(), stored->dtype, want,
                             piece.data.data, piece.data.dtype);
    }
    if (covered != want.numel()) {
      return absl::DataLossError(absl::StrCat(folder, ": the stored pieces of ", piece.name,
                                              " cover ", covered, " of the ", want.numel(),
                                              " elements asked for (incomplete checkpoint?)"));
    }
  }
  return absl::OkStatus();
}

absl::Status Dcp::Load(const std::string& folder, std::span<CheckpointPiece> pieces,
                       Communicator& comm) {
  return Agree(comm, LoadPieces(folder, pieces), absl::StrCat("loading ", folder));
}

}  // namespace
}  // namespace titan::dcp

TITAN_PLUGIN(titan::CheckpointPlugin, titan::dcp::Dcp, "dcp", "1.0.0",
             "sharded checkpoints: per-rank zstd shards, a metadata index, reshardable")
