// TensorBoard event files (metrics.enable_tensorboard): TFRecord records (length, masked CRC32C
// of the length, an Event protocol buffer, masked CRC32C of it), one Event per step holding that
// step's scalars, readable by TensorBoard and its Python reader.
#ifndef TITAN_CORE_RUNTIME_TENSORBOARD_H_
#define TITAN_CORE_RUNTIME_TENSORBOARD_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

class TensorBoardWriter {
 public:
  // Creates `folder` and an events.out.tfevents.<time>.<host>.<pid> file in it.
  static absl::StatusOr<std::unique_ptr<TensorBoardWriter>> Open(const std::string& folder);

  // Writes the scalars (tag, value) of `step` as one event and flushes it.
  absl::Status AddScalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  const std::string& path() const { return path_; }

 private:
  absl::Status WriteRecord(const std::string& data);
  std::string path_;
  std::ofstream out_;
};

// TFRecord's masked CRC32C, which keeps a CRC of data holding CRCs from looking like one.
uint32_t MaskedCrc32c(absl::string_view data);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_TENSORBOARD_H_
