// `checkpoint` plugins write and read checkpoint folders. Every rank passes the pieces it
// holds; the plugin records where each piece sits in its logical tensor, so a checkpoint
// saved on one mesh loads into another.
#ifndef TITAN_CHECKPOINT_H_
#define TITAN_CHECKPOINT_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "titan/communicator.h"
#include "titan/plugin.h"
#include "titan/tensor_view.h"

namespace titan {

struct CheckpointPiece {
  std::string name;                 // logical tensor, e.g. "model/layers.0.attention.wq.weight"
  std::vector<int64_t> full_shape;  // the logical tensor's shape
  std::vector<int64_t> offset;      // where this piece starts in it, per dimension
  TensorView data;                  // the piece itself (its shape is the piece's extent)
};

class CheckpointPlugin : public Plugin {
 public:
  // Collective over `comm`: returns once the folder is complete on disk.
  virtual absl::Status Save(const std::string& folder, std::span<const CheckpointPiece> pieces,
                            Communicator& comm) = 0;
  // Collective over `comm`: fills each piece from whichever saved pieces overlap it.
  virtual absl::Status Load(const std::string& folder, std::span<CheckpointPiece> pieces,
                            Communicator& comm) = 0;
};

template <>
struct PluginKind<CheckpointPlugin> {
  static constexpr const char* kName = "checkpoint";
};

}  // namespace titan

#endif  // TITAN_CHECKPOINT_H_
