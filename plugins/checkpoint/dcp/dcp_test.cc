// The dcp plugin on one rank: round trips, loading other boxes than were saved (resharding),
// de-duplication, and the errors for incomplete and corrupt checkpoints.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "core/runtime/plugin_registry.h"
#include "core/runtime/single_process_comm.h"
#include "plugins/checkpoint/dcp/box.h"
#include "tests/checkpoint/file_size_limit.h"
#include "titan/checkpoint.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

struct Dcp {
  std::unique_ptr<PluginRegistry> registry =
      std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value();
  std::unique_ptr<CheckpointPlugin> plugin =
      std::move(registry->Create<CheckpointPlugin>("dcp")).value();
  SingleProcessCommunicator comm;
};

std::string Folder(const std::string& name) {
  std::string folder = testing::TempDir() + "dcp_test_" + std::to_string(getpid()) + "/" + name;
  fs::remove_all(folder);
  fs::create_directories(fs::path(folder).parent_path());
  return folder;
}

CheckpointPiece Piece(const std::string& name, std::vector<int64_t> full,
                      std::vector<int64_t> offset, std::vector<int64_t> shape, float* data) {
  return {name, std::move(full), std::move(offset),
          TensorView{data, DType::kF32, Device{}, std::move(shape), {}}};
}

// A 4 x 6 matrix holding 0..23, saved as two row blocks, and a vector of 5.
absl::Status SaveExample(Dcp& dcp, const std::string& folder, std::vector<float>& matrix,
                         std::vector<float>& vector) {
  matrix.resize(24);
  std::iota(matrix.begin(), matrix.end(), 0.0f);
  vector = {1, 2, 3, 4, 5};
  std::vector<CheckpointPiece> pieces = {
      Piece("model/w", {4, 6}, {0, 0}, {1, 6}, matrix.data()),
      Piece("model/w", {4, 6}, {1, 0}, {3, 6}, matrix.data() + 6),
      Piece("model/v", {5}, {0}, {5}, vector.data()),
      Piece("model/v", {5}, {0}, {5}, vector.data()),  // a replica: stored once
  };
  return dcp.plugin->Save(folder, pieces, {{"train.step", "7"}}, dcp.comm);
}

TEST(Dcp, LoadsAnyBoxFromPiecesSavedDifferently) {
  Dcp dcp;
  const std::string folder = Folder("reshard");
  std::vector<float> matrix, vector;
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  EXPECT_TRUE(fs::exists(folder + "/metadata.json"));
  EXPECT_FALSE(fs::exists(folder + ".tmp"));

  // Columns 2..4 of rows 0..2: crosses both saved row blocks.
  std::vector<float> block(9, -1.0f), v(3);
  std::vector<CheckpointPiece> want = {Piece("model/w", {4, 6}, {0, 2}, {3, 3}, block.data()),
                                       Piece("model/v", {5}, {2}, {3}, v.data())};
  absl::Status loaded = dcp.plugin->Load(folder, want, dcp.comm);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(block, (std::vector<float>{2, 3, 4, 8, 9, 10, 14, 15, 16}));
  EXPECT_EQ(v, (std::vector<float>{3, 4, 5}));

  absl::StatusOr<CheckpointContents> contents = dcp.plugin->Read(folder);
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->tensors.size(), 2u);
  EXPECT_EQ(contents->metadata.at("train.step"), "7");
}

TEST(Dcp, ConvertsToBf16OnLoad) {
  Dcp dcp;
  const std::string folder = Folder("bf16");
  std::vector<float> matrix, vector;
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  std::vector<uint16_t> out(5);
  std::vector<CheckpointPiece> want = {
      {"model/v", {5}, {0}, TensorView{out.data(), DType::kBF16, Device{}, {5}, {}}}};
  absl::Status loaded = dcp.plugin->Load(folder, want, dcp.comm);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(out[2], 0x4040);  // 3.0 in bf16
}

TEST(Dcp, ReplaceTheFolderOfAnEarlierSaveOfTheSameStep) {
  Dcp dcp;
  const std::string folder = Folder("again");
  std::vector<float> matrix, vector;
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  EXPECT_TRUE(dcp.plugin->Read(folder).ok());
}

TEST(Dcp, RefusesAMissingTensorAWrongShapeAndAnUncoveredBox) {
  Dcp dcp;
  const std::string folder = Folder("errors");
  std::vector<float> matrix, vector;
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  std::vector<float> out(24);
  std::vector<CheckpointPiece> missing = {Piece("model/x", {4}, {0}, {4}, out.data())};
  absl::Status status = dcp.plugin->Load(folder, missing, dcp.comm);
  EXPECT_NE(status.message().find("holds no tensor 'model/x'"), std::string::npos) << status;
  std::vector<CheckpointPiece> shape = {Piece("model/w", {6, 4}, {0, 0}, {6, 4}, out.data())};
  status = dcp.plugin->Load(folder, shape, dcp.comm);
  EXPECT_NE(status.message().find("saved with shape [4, 6], expected [6, 4]"), std::string::npos)
      << status;

  // Only the first row block saved: loading the whole matrix finds 6 of 24 elements.
  const std::string partial = Folder("partial");
  std::vector<CheckpointPiece> first_row = {
      Piece("model/w", {4, 6}, {0, 0}, {1, 6}, matrix.data())};
  ASSERT_TRUE(dcp.plugin->Save(partial, first_row, {}, dcp.comm).ok());
  std::vector<CheckpointPiece> whole = {Piece("model/w", {4, 6}, {0, 0}, {4, 6}, out.data())};
  status = dcp.plugin->Load(partial, whole, dcp.comm);
  EXPECT_NE(status.message().find("cover 6 of the 24 elements"), std::string::npos) << status;

  std::vector<CheckpointPiece> outside = {Piece("model/w", {4, 6}, {3, 0}, {2, 6}, out.data())};
  EXPECT_FALSE(dcp.plugin->Save(Folder("outside"), outside, {}, dcp.comm).ok());
}

TEST(Dcp, CorruptionIsAnErrorNamingTheFile) {
  Dcp dcp;
  std::vector<float> matrix, vector, out(24);
  std::vector<CheckpointPiece> whole = {Piece("model/w", {4, 6}, {0, 0}, {4, 6}, out.data())};

  const std::string truncated = Folder("truncated");
  ASSERT_TRUE(SaveExample(dcp, truncated, matrix, vector).ok());
  const std::string shard = truncated + "/rank-0.bin";
  fs::resize_file(shard, fs::file_size(shard) / 2);
  absl::Status status = dcp.plugin->Load(truncated, whole, dcp.comm);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(shard), std::string::npos) << status;

  const std::string flipped = Folder("flipped");
  ASSERT_TRUE(SaveExample(dcp, flipped, matrix, vector).ok());
  {
    std::fstream file(flipped + "/rank-0.bin", std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(20);
    char byte = 0;
    file.read(&byte, 1);
    byte ^= 0x10;
    file.seekp(20);
    file.write(&byte, 1);
  }
  status = dcp.plugin->Load(flipped, whole, dcp.comm);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("rank-0.bin: model/w"), std::string::npos) << status;

  const std::string no_index = Folder("no_index");
  ASSERT_TRUE(SaveExample(dcp, no_index, matrix, vector).ok());
  fs::remove(no_index + "/metadata.json");
  status = dcp.plugin->Load(no_index, whole, dcp.comm);
  EXPECT_NE(status.message().find("metadata.json is missing"), std::string::npos) << status;
  EXPECT_FALSE(dcp.plugin->Read(no_index).ok());

  // A folder in metadata.json's place is named as one (issue #39), not as libstdc++'s
  // "basic_filebuf::underflow error reading the file".
  fs::create_directory(no_index + "/metadata.json");
  status = dcp.plugin->Read(no_index).status();
  EXPECT_EQ(status.message(), no_index +
                                  "/metadata.json is not a file (a folder?): expected the "
                                  "index of the dcp checkpoint " +
                                  no_index);

  const std::string bad_index = Folder("bad_index");
  ASSERT_TRUE(SaveExample(dcp, bad_index, matrix, vector).ok());
  std::ofstream(bad_index + "/metadata.json") << "{\"format\": \"titan-dcp\", \"vers";
  status = dcp.plugin->Load(bad_index, whole, dcp.comm);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("malformed index"), std::string::npos) << status;
}

// What a removal cut short leaves (metadata.json and no rank file, or half of one) is no
// complete checkpoint: Read, which decides what a run may resume from, says which file is short.
TEST(Dcp, ReadRefusesAFolderWhosePieceFilesAreMissingOrShort) {
  Dcp dcp;
  std::vector<float> matrix, vector;
  const std::string missing = Folder("missing_rank_file");
  ASSERT_TRUE(SaveExample(dcp, missing, matrix, vector).ok());
  ASSERT_TRUE(dcp.plugin->Read(missing).ok());
  fs::remove(missing + "/rank-0.bin");
  absl::Status status = dcp.plugin->Read(missing).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(missing +
                                  "/rank-0.bin is missing: metadata.json names 3 "
                                  "piece(s) in it, so " +
                                  missing + " is not a complete dcp checkpoint"),
            std::string::npos)
      << status;

  fs::create_directory(missing + "/rank-0.bin");  // a folder in its place is named as one
  EXPECT_NE(dcp.plugin->Read(missing).status().message().find(
                missing + "/rank-0.bin is not a file (a folder?): metadata.json names 3 piece(s)"),
            std::string::npos);

  const std::string short_file = Folder("short_rank_file");
  ASSERT_TRUE(SaveExample(dcp, short_file, matrix, vector).ok());
  fs::resize_file(short_file + "/rank-0.bin", 3);
  status = dcp.plugin->Read(short_file).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(short_file + "/rank-0.bin is 3 bytes, but metadata.json places "
                                               "pieces up to byte "),
            std::string::npos)
      << status;
}

// Rewrites the folder's metadata.json through `edit`.
template <typename Edit>
void EditIndex(const std::string& folder, Edit edit) {
  nlohmann::json index = nlohmann::json::parse(std::ifstream(folder + "/metadata.json"));
  edit(index);
  std::ofstream(folder + "/metadata.json") << index.dump(1);
}

TEST(Dcp, EditedIndexSaysWhichTensorAndWhatDisagrees) {
  Dcp dcp;
  std::vector<float> matrix, vector, out(24);
  std::vector<CheckpointPiece> whole = {Piece("model/w", {4, 6}, {0, 0}, {4, 6}, out.data())};

  // Every f32 turned bf16: the records no longer match the bytes stored.
  const std::string dtype = Folder("dtype_edit");
  ASSERT_TRUE(SaveExample(dcp, dtype, matrix, vector).ok());
  EditIndex(dtype, [](nlohmann::json& index) {
    for (auto& [name, tensor] : index["tensors"].items()) tensor["dtype"] = "bf16";
    for (auto& piece : index["pieces"]) piece["dtype"] = "bf16";
  });
  absl::Status status = dcp.plugin->Load(dtype, whole, dcp.comm);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find(dtype + "/metadata.json: tensor 'model/w', piece at [0, 0]: "
                                          "shape [1, 6] of bf16 is 12 bytes, but the piece was "
                                          "stored with 24"),
            std::string::npos)
      << status;

  // A piece's shape and size edited alike: only the stored frame can tell.
  const std::string shape = Folder("shape_edit");
  ASSERT_TRUE(SaveExample(dcp, shape, matrix, vector).ok());
  EditIndex(shape, [](nlohmann::json& index) {
    for (auto& piece : index["pieces"]) {
      if (piece["tensor"] == "model/w" && piece["offset"][0] == 1) {
        piece["shape"] = {2, 6};
        piece["raw_bytes"] = 48;
      }
    }
  });
  std::vector<float> rows(12);
  std::vector<CheckpointPiece> second = {Piece("model/w", {4, 6}, {1, 0}, {2, 6}, rows.data())};
  status = dcp.plugin->Load(shape, second, dcp.comm);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("rank-0.bin: model/w: the stored data is 72 bytes, but the "
                                  "index describes 48 bytes (shape [2, 6] of f32"),
            std::string::npos)
      << status;

  // A piece whose dtype differs from its tensor's.
  const std::string mixed = Folder("mixed_edit");
  ASSERT_TRUE(SaveExample(dcp, mixed, matrix, vector).ok());
  EditIndex(mixed, [](nlohmann::json& index) { index["tensors"]["model/w"]["dtype"] = "f16"; });
  status = dcp.plugin->Load(mixed, whole, dcp.comm);
  EXPECT_NE(status.message().find("the tensor is f16 [4, 6], the piece says f32 [4, 6]"),
            std::string::npos)
      << status;
}

TEST(Dcp, SaveThatRunsOutOfSpaceLeavesNoTemporaryFolder) {
  Dcp dcp;
  // Random values: zstd cannot shrink them below the limit.
  std::vector<float> values(16384);
  std::mt19937 random(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : values) v = uniform(random);
  std::vector<CheckpointPiece> pieces = {Piece("model/big", {16384}, {0}, {16384}, values.data())};
  const std::string folder = Folder("full_disk");
  absl::Status status;
  {
    checkpoint_testing::FileSizeLimit limit(4096);
    status = dcp.plugin->Save(folder, pieces, {}, dcp.comm);
  }
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("rank-0.bin: write failed"), std::string::npos) << status;
  EXPECT_FALSE(fs::exists(folder + ".tmp")) << "the partial save is removed";
  EXPECT_FALSE(fs::exists(folder));
  // With space again, the same save succeeds.
  ASSERT_TRUE(dcp.plugin->Save(folder, pieces, {}, dcp.comm).ok());
  EXPECT_TRUE(dcp.plugin->Read(folder).ok());
}

// docs/fuzzing.md, finding 3: extents whose byte count overflows passed as a tensor's shape.
TEST(Dcp, AnIndexWithAnImpossibleShapeIsRefused) {
  Dcp dcp;
  std::vector<float> matrix, vector;
  const std::string folder = Folder("impossible_shape");
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{int64_t{1} << 62, 4}, std::vector<int64_t>{-1}}) {
    nlohmann::json index = nlohmann::json::parse(std::ifstream(folder + "/metadata.json"));
    index["tensors"]["model/v"]["shape"] = shape;
    std::ofstream(folder + "/metadata.json") << index.dump();
    absl::StatusOr<CheckpointContents> read = dcp.plugin->Read(folder);
    ASSERT_FALSE(read.ok()) << shape[0];
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(read.status().message().find("model/v: expected a tensor's shape, found ["),
              std::string::npos)
        << read.status();
  }
}

// docs/fuzzing.md, finding 5: a float where an integer belongs was converted unchecked.
TEST(Dcp, AnIndexWithFloatsForIntegersIsRefused) {
  Dcp dcp;
  std::vector<float> matrix, vector;
  const std::string folder = Folder("float_integers");
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  const nlohmann::json saved = nlohmann::json::parse(std::ifstream(folder + "/metadata.json"));
  struct Edit {
    nlohmann::json::json_pointer where;
    nlohmann::json value;
    std::string expected;
  };
  for (const Edit& edit :
       {Edit{"/tensors/model~1v/shape"_json_pointer,
             {4.3e24},
             "shape: expected an array of integers"},
        Edit{"/pieces/0/offset"_json_pointer, {0.5, 0}, "offset: expected an array of integers"},
        Edit{"/pieces/0/position"_json_pointer, 1e30, "position: expected an integer"},
        Edit{"/world_size"_json_pointer, 1.5, "world_size: expected an integer"}}) {
    nlohmann::json index = saved;
    index[edit.where] = edit.value;
    std::ofstream(folder + "/metadata.json") << index.dump();
    absl::StatusOr<CheckpointContents> read = dcp.plugin->Read(folder);
    ASSERT_FALSE(read.ok()) << edit.expected;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(read.status().message().find(edit.expected), std::string::npos) << read.status();
  }
}

// A piece's file is a name inside the checkpoint folder: an index edited to point elsewhere
// ("../x", an absolute path) is refused before anything is opened.
TEST(Dcp, APieceFileOutsideTheFolderIsRefused) {
  Dcp dcp;
  std::vector<float> matrix, vector;
  const std::string folder = Folder("piece_outside");
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  const nlohmann::json saved = nlohmann::json::parse(std::ifstream(folder + "/metadata.json"));
  for (const char* file : {"../outside.bin", "/etc/passwd", "..", ""}) {
    nlohmann::json index = saved;
    index["pieces"][0]["file"] = file;
    std::ofstream(folder + "/metadata.json") << index.dump();
    absl::StatusOr<CheckpointContents> read = dcp.plugin->Read(folder);
    ASSERT_FALSE(read.ok()) << file;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(read.status().message().find("is not a file name in the checkpoint folder"),
              std::string::npos)
        << read.status();
  }
}

// docs/fuzzing.md, finding 8: a piece pointed at bytes another piece had decompressed was
// copied from that piece's buffer, whatever its size (a heap overflow when it was smaller).
TEST(Dcp, PiecesOfDifferentSizesSharingBytesAreRefused) {
  Dcp dcp;
  std::vector<float> matrix, vector, w(24), v(5);
  const std::string folder = Folder("shared_bytes");
  ASSERT_TRUE(SaveExample(dcp, folder, matrix, vector).ok());
  nlohmann::json index = nlohmann::json::parse(std::ifstream(folder + "/metadata.json"));
  nlohmann::json* first_of_w = nullptr;
  for (nlohmann::json& piece : index["pieces"]) {
    if (piece["tensor"] == "model/w" && piece["offset"] == nlohmann::json{0, 0})
      first_of_w = &piece;
  }
  ASSERT_NE(first_of_w, nullptr);
  for (nlohmann::json& piece : index["pieces"]) {
    if (piece["tensor"] == "model/v") piece["position"] = (*first_of_w)["position"];
  }
  std::ofstream(folder + "/metadata.json") << index.dump();
  std::vector<CheckpointPiece> both = {Piece("model/w", {4, 6}, {0, 0}, {4, 6}, w.data()),
                                       Piece("model/v", {5}, {0}, {5}, v.data())};
  absl::Status status = dcp.plugin->Load(folder, both, dcp.comm);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("pieces of different sizes share these bytes"), std::string::npos)
      << status;
}

// docs/fuzzing.md, finding 3: offset + extent overflowed into a box "inside" the tensor.
TEST(Box, AnExtentPastTheEndIsOutsideWhereOffsetPlusExtentOverflows) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(dcp::CheckInside({{1}, {3}}, {4}).ok());
  EXPECT_FALSE(dcp::CheckInside({{1}, {4}}, {4}).ok());
  EXPECT_FALSE(dcp::CheckInside({{kMax}, {1}}, {4}).ok());
  EXPECT_FALSE(dcp::CheckInside({{2}, {kMax}}, {4}).ok());
  EXPECT_FALSE(dcp::CheckInside({{5}, {0}}, {4}).ok());
}

TEST(Box, CopiesTheOverlapOfThreeDimensionalBoxes) {
  // Source: the whole 2 x 3 x 4 tensor holding 0..23; destination: [1, 1..2, 2..3].
  std::vector<float> source(24);
  std::iota(source.begin(), source.end(), 0.0f);
  std::vector<float> target(4, -1.0f);
  const int64_t copied = dcp::CopyOverlap({{0, 0, 0}, {2, 3, 4}}, source.data(), DType::kF32,
                                          {{1, 1, 2}, {1, 2, 2}}, target.data(), DType::kF32);
  EXPECT_EQ(copied, 4);
  EXPECT_EQ(target, (std::vector<float>{18, 19, 22, 23}));
  EXPECT_EQ(dcp::CopyOverlap({{0}, {2}}, source.data(), DType::kF32, {{2}, {2}}, target.data(),
                             DType::kF32),
            0);
}

}  // namespace
}  // namespace titan
