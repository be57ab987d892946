// A dcp checkpoint's metadata.json, beside the rank-0.bin of a small real save: the plugin reads
// the folder as titan-checkpoint does and loads every tensor it lists as a resumed run does.
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/runtime/single_process_comm.h"
#include "fuzz/fuzz_support.h"
#include "titan/checkpoint.h"

namespace {

namespace fs = std::filesystem;

struct Fixture {
  std::unique_ptr<titan::CheckpointPlugin> plugin;
  titan::SingleProcessCommunicator comm;
  std::string folder;
};

// Saves a f32 [2, 3] tensor in two pieces and a bf16 [4] one; the seed corpus holds the
// metadata.json this writes, so the pieces' positions match the bytes of rank-0.bin.
Fixture& Setup() {
  static Fixture* fixture = [] {
    auto* f = new Fixture;
    auto plugin = titan::fuzz::Registry().Create<titan::CheckpointPlugin>("dcp");
    if (!plugin.ok()) titan::fuzz::Fail(std::string(plugin.status().message()));
    f->plugin = *std::move(plugin);
    static float a[6] = {1, 2, 3, 4, 5, 6};
    static uint16_t b[4] = {0x3f80, 0x4000, 0x4040, 0x4080};
    const std::vector<titan::CheckpointPiece> pieces = {
        {"model/a", {2, 3}, {0, 0}, {a, titan::DType::kF32, {}, {1, 3}, {}}},
        {"model/a", {2, 3}, {1, 0}, {a + 3, titan::DType::kF32, {}, {1, 3}, {}}},
        {"model/b", {4}, {0}, {b, titan::DType::kBF16, {}, {4}, {}}}};
    f->folder = (fs::path(titan::fuzz::ScratchFolder()) / "step-1").string();
    absl::Status saved = f->plugin->Save(f->folder, pieces, {{"train.step", "1"}}, f->comm);
    if (!saved.ok()) titan::fuzz::Fail(std::string(saved.message()));
    return f;
  }();
  return *fixture;
}

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 16) / d)) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = Setup();
  titan::fuzz::WriteInput("step-1/metadata.json", titan::fuzz::Bytes(data, size));
  absl::StatusOr<titan::CheckpointContents> contents = f.plugin->Read(f.folder);
  if (!contents.ok()) return 0;
  // Every small tensor whole, as f32 where it converts (what a resumed model asks for).
  std::vector<std::vector<char>> buffers;
  std::vector<titan::CheckpointPiece> pieces;
  for (const titan::CheckpointTensor& t : contents->tensors) {
    const int64_t n = Elements(t.full_shape);
    if (n < 0) continue;
    const bool is_float = t.dtype == titan::DType::kF32 || t.dtype == titan::DType::kBF16 ||
                          t.dtype == titan::DType::kF16;
    const titan::DType dtype = is_float ? titan::DType::kF32 : t.dtype;
    buffers.emplace_back(static_cast<size_t>(n) * titan::DTypeSize(dtype) + 1);
    pieces.push_back({t.name,
                      t.full_shape,
                      std::vector<int64_t>(t.full_shape.size(), 0),
                      {buffers.back().data(), dtype, {}, t.full_shape, {}}});
  }
  f.plugin->Load(f.folder, pieces, f.comm).IgnoreError();
  return 0;
}
