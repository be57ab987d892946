// What titan-checkpoint does, apart from its flags: finding the format of a checkpoint folder,
// listing what it holds, and converting the model between formats through the checkpoint
// plugins, so a format added as a plugin (dcp, safetensors, ...) works with no change here.
#ifndef TITAN_TOOLS_CHECKPOINT_CHECKPOINT_TOOL_H_
#define TITAN_TOOLS_CHECKPOINT_CHECKPOINT_TOOL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "core/runtime/plugin_registry.h"
#include "titan/checkpoint.h"

namespace titan {

// The checkpoint plugin `name`, configured with its keys' defaults. The error for an unknown
// name lists the formats there are.
absl::StatusOr<std::unique_ptr<CheckpointPlugin>> MakeCheckpointPlugin(
    const PluginRegistry& registry, absl::string_view name);

// The format of `folder`: "safetensors" when it holds model.safetensors or its index, else the
// first checkpoint plugin (by name) whose Read accepts it. The error says what each refused.
absl::StatusOr<std::string> DetectFormat(const PluginRegistry& registry, const std::string& folder);

// The step (metadata train.step), one line per tensor (name, shape, dtype, size), the totals,
// and the rest of the metadata.
std::string FormatListing(const std::string& folder, const std::string& format,
                          const CheckpointContents& contents);

struct ConvertOptions {
  std::string from;            // empty: detected
  std::string to;              // required
  std::optional<DType> dtype;  // empty: as stored
};

struct ConvertReport {
  std::string from;
  int64_t tensors = 0;
  int64_t bytes = 0;            // of the tensors as written
  int64_t skipped = 0;          // tensors outside model/, which a conversion leaves behind
  std::string skipped_example;  // the first of them
};

// Loads every "model/" tensor of `source` whole, through its plugin on one rank, and saves them
// with the source's metadata through the plugin of `options.to`.
absl::StatusOr<ConvertReport> ConvertCheckpoint(const PluginRegistry& registry,
                                                const std::string& source,
                                                const std::string& destination,
                                                const ConvertOptions& options);

// "512 B", "8.0 KiB", "1.5 MiB", ...
std::string HumanBytes(int64_t bytes);

}  // namespace titan

#endif  // TITAN_TOOLS_CHECKPOINT_CHECKPOINT_TOOL_H_
