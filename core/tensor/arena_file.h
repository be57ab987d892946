// An arena's tensors written to one file and read back into an arena of the same plan: the
// optimizer state and the model's parameters between runs (the checkpoint issue builds on it).
// The file is the magic "TITANARN", a u32 version (2), a u32 tensor count, the u32 CRC-32C of
// everything after it, then per tensor its name (u32 length + bytes), dtype name (u32 length +
// bytes), rank, dims (i64) and raw bytes. Version 1 files, without the checksum, still read.
#ifndef TITAN_CORE_TENSOR_ARENA_FILE_H_
#define TITAN_CORE_TENSOR_ARENA_FILE_H_

#include <string>

#include "core/tensor/arena.h"

namespace titan {

absl::Status WriteArena(const Arena& arena, const std::string& path);

// Fills `arena` from `path`; the file must hold the same names, dtypes and shapes in the same
// order, and the error names the file and the first tensor that differs; a checksum that does
// not match names the file and both values. On error the arena is left as it was.
absl::Status ReadArena(const std::string& path, const Arena& arena);

}  // namespace titan

#endif  // TITAN_CORE_TENSOR_ARENA_FILE_H_
