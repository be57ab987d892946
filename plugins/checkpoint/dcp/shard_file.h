// The bytes of a dcp checkpoint: each rank's pieces zstd-compressed (with zstd's content
// checksum) back to back in one file, and the metadata index mapping every logical tensor to
// its pieces. Reading verifies sizes and checksums and names the file and tensor on failure.
#ifndef TITAN_PLUGINS_CHECKPOINT_DCP_SHARD_FILE_H_
#define TITAN_PLUGINS_CHECKPOINT_DCP_SHARD_FILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "plugins/checkpoint/dcp/box.h"
#include "titan/checkpoint.h"

namespace titan::dcp {

inline constexpr char kIndexFile[] = "metadata.json";
inline constexpr int kFormatVersion = 1;

// Where one saved piece lies.
struct StoredPiece {
  std::string tensor;
  std::vector<int64_t> full_shape;  // the tensor's
  Box box;
  DType dtype = DType::kF32;
  std::string file;  // relative to the checkpoint folder
  int64_t position = 0;
  int64_t bytes = 0;      // compressed
  int64_t raw_bytes = 0;  // box.numel() * dtype size
};

struct Index {
  CheckpointMetadata metadata;
  std::map<std::string, CheckpointTensor> tensors;
  std::vector<StoredPiece> pieces;
  int world_size = 0;
};

// Appends each piece compressed to `path` (created), fsyncs it, and returns where each went.
absl::StatusOr<std::vector<StoredPiece>> WritePieces(
    const std::string& path, const std::string& file_name,
    const std::vector<const CheckpointPiece*>& pieces);

// Reads and decompresses one stored piece from `folder`.
absl::StatusOr<std::vector<char>> ReadPiece(const std::string& folder, const StoredPiece& piece);

std::string PiecesToJson(const std::vector<StoredPiece>& pieces);
absl::StatusOr<std::vector<StoredPiece>> PiecesFromJson(const std::string& json,
                                                        const std::string& where);

absl::Status WriteIndex(const std::string& path, const Index& index);
absl::StatusOr<Index> ReadIndex(const std::string& folder);

}  // namespace titan::dcp

#endif  // TITAN_PLUGINS_CHECKPOINT_DCP_SHARD_FILE_H_
