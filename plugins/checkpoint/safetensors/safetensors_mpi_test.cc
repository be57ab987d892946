// Runs under `mpirun -np N` (N = 2, 4): every rank holds its own part of each tensor, as the
// parallel plugins leave them, and Save assembles the same file one rank writes from whole
// tensors. Every rank loads back just its part, and a failure on any rank fails every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "plugins/checkpoint/safetensors/pieces.h"
#include "plugins/checkpoint/safetensors/safetensors_test_util.h"
#include "titan/comm.h"

namespace titan::safetensors_testing {
namespace {

using ::testing::HasSubstr;

// Every rank of one mpirun shares the launcher as parent, so they agree on this folder.
fs::path SharedDir() {
  return fs::path(::testing::TempDir()) / absl::StrCat("titan_safetensors_mpi_", getppid());
}

Communicator& World() {
  static Communicator* world = [] {
    static PluginRegistry* registry =
        std::move(PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})).value().release();
    CommPlugin* mpi = std::move(registry->Create<CommPlugin>("mpi")).value().release();
    std::map<std::string, ConfigView::Entry> entries = {
        {"train_timeout_seconds", {int64_t{60}, "test"}}};
    EXPECT_TRUE(mpi->Configure(ConfigView("comm", entries)).ok());
    return std::move(mpi->ConnectWorld({})).value().release();
  }();
  return *world;
}

// This rank's part of every parameter: 2-D tensors split by rows (uneven when the ranks do not
// divide them), the feed-forward output projections by columns as tensor parallelism splits
// them, the experts' stacked weights by experts as expert parallelism splits them, norms and the
// experts' bias replicated on every rank.
std::vector<CheckpointPiece> OwnPieces(const DecoderModel& model, int rank, int ranks) {
  std::vector<CheckpointPiece> pieces;
  for (CheckpointPiece whole : ModelPieces(model)) {
    float* data = whole.data.data_as<float>();
    if (whole.full_shape.size() == 1) {
      pieces.push_back(whole);
      continue;
    }
    if (whole.full_shape.size() == 3) {
      const int64_t experts = whole.full_shape[0];
      const int64_t expert = whole.full_shape[1] * whole.full_shape[2];
      const int64_t begin = experts * rank / ranks, end = experts * (rank + 1) / ranks;
      whole.offset = {begin, 0, 0};
      whole.data = TensorView{data + begin * expert,
                              DType::kF32,
                              Device{},
                              {end - begin, whole.full_shape[1], whole.full_shape[2]},
                              {}};
      pieces.push_back(whole);
      continue;
    }
    const int64_t rows = whole.full_shape[0], cols = whole.full_shape[1];
    const bool by_columns = whole.name.find("w2") != std::string::npos;
    const int64_t n = by_columns ? cols : rows;
    const int64_t begin = n * rank / ranks, end = n * (rank + 1) / ranks;
    if (by_columns) {
      whole.offset = {0, begin};
      whole.data = TensorView{data + begin, DType::kF32, Device{}, {rows, end - begin}, {cols, 1}};
    } else {
      whole.offset = {begin, 0};
      whole.data = TensorView{data + begin * cols, DType::kF32, Device{}, {end - begin, cols}, {}};
    }
    pieces.push_back(whole);
  }
  return pieces;
}

class SafetensorsMpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (comm_.rank() == 0) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
    }
    ASSERT_TRUE(comm_.Barrier().ok());
  }
  void TearDown() override {
    ASSERT_TRUE(comm_.Barrier().ok());
    if (comm_.rank() == 0) fs::remove_all(dir_);
  }

  // Save from every rank's part gives the file one rank writes from whole tensors; each rank
  // then loads its own part into a model that starts elsewhere.
  void ExpectAssembledAndLoaded(const LlamaConfig& config, const ModelFamily& family) {
    auto model = SmallModel(config, 42, family);
    const std::string folder = (dir_ / "sharded").string();
    std::vector<CheckpointPiece> own = OwnPieces(*model, comm_.rank(), comm_.size());
    absl::Status saved = plugin_->Save(folder, own, ModelMetadata(config), comm_);
    ASSERT_TRUE(saved.ok()) << saved;
    if (comm_.rank() == 0) {
      SingleProcessCommunicator alone;
      ASSERT_TRUE(
          plugin_
              ->Save((dir_ / "whole").string(), ModelPieces(*model), ModelMetadata(config), alone)
              .ok());
      EXPECT_EQ(ReadFile(dir_ / "sharded" / "model.safetensors"),
                ReadFile(dir_ / "whole" / "model.safetensors"));
      EXPECT_EQ(ReadFile(dir_ / "sharded" / "config.json"),
                ReadFile(dir_ / "whole" / "config.json"));
    }
    auto loaded = SmallModel(config, 9, family);
    std::vector<CheckpointPiece> mine = OwnPieces(*loaded, comm_.rank(), comm_.size());
    ASSERT_TRUE(plugin_->Load(folder, mine, comm_).ok());
    for (size_t p = 0; p < mine.size(); ++p) {
      const safetensors::Box box = *safetensors::BoxOf(own[p]);
      for (int64_t r = 0; r < box.rows; ++r) {
        ASSERT_EQ(0, std::memcmp(safetensors::PieceRow(mine[p].data, box, r),
                                 safetensors::PieceRow(own[p].data, box, r),
                                 static_cast<size_t>(box.cols) * sizeof(float)))
            << own[p].name << " row " << r;
      }
    }
  }

  Communicator& comm_ = World();
  std::unique_ptr<CheckpointPlugin> plugin_ = LoadPlugin();
  fs::path dir_ = SharedDir();
  LlamaConfig config_ = SmallConfig();
};

TEST_F(SafetensorsMpiTest, RanksAssembleTheFileOneRankWrites) {
  ExpectAssembledAndLoaded(config_, LlamaFamily());
}

// Qwen3-MoE: each rank holds some experts of every layer; rank 0 writes each expert's tensors in
// the file's name order, which interleaves the layer's three stacked weights.
TEST_F(SafetensorsMpiTest, RanksAssembleTheExpertsOfQwen3Moe) {
  ExpectAssembledAndLoaded(SmallQwen3Config(/*experts=*/true, /*dense_layers=*/1), Qwen3Family());
}

TEST_F(SafetensorsMpiTest, OneRanksBadPieceFailsEveryRank) {
  auto model = SmallModel(config_);
  std::vector<CheckpointPiece> own = OwnPieces(*model, comm_.rank(), comm_.size());
  const int last = comm_.size() - 1;
  std::vector<float> state(4);
  if (comm_.rank() == last) own.push_back({"optimizer/step", {4}, {0}, FlatF32(state.data(), 4)});
  absl::Status saved = plugin_->Save((dir_ / "e").string(), own, ModelMetadata(config_), comm_);
  EXPECT_THAT(std::string(saved.message()),
              HasSubstr("safetensors checkpoints hold the model only; asked to save "
                        "'optimizer/step'"));
  if (comm_.rank() != last) {
    EXPECT_THAT(std::string(saved.message()), HasSubstr(absl::StrCat("rank ", last, ": ")));
  }
}

TEST_F(SafetensorsMpiTest, AGapFoundOnRankZeroFailsEveryRank) {
  auto model = SmallModel(config_);
  std::vector<CheckpointPiece> own = OwnPieces(*model, comm_.rank(), comm_.size());
  if (comm_.rank() == 1) own.erase(own.begin());  // its rows of the embeddings
  const std::string folder = (dir_ / "e").string();
  absl::Status saved = plugin_->Save(folder, own, ModelMetadata(config_), comm_);
  EXPECT_THAT(std::string(saved.message()),
              HasSubstr("saving " + folder + ": the pieces of 'model/tok_embeddings.weight'"));
  ASSERT_TRUE(comm_.Barrier().ok());
  EXPECT_FALSE(fs::exists(folder));
  EXPECT_FALSE(fs::exists(folder + ".tmp"));
}

TEST_F(SafetensorsMpiTest, OneRanksLoadErrorFailsEveryRank) {
  auto model = SmallModel(config_);
  const std::string folder = (dir_ / "e").string();
  ASSERT_TRUE(plugin_
                  ->Save(folder, OwnPieces(*model, comm_.rank(), comm_.size()),
                         ModelMetadata(config_), comm_)
                  .ok());
  std::vector<CheckpointPiece> mine = OwnPieces(*model, comm_.rank(), comm_.size());
  if (comm_.rank() == 1) mine[0].name = "model/layers.9.attention.wq.weight";
  absl::Status loaded = plugin_->Load(folder, mine, comm_);
  EXPECT_THAT(std::string(loaded.message()),
              HasSubstr(folder + " has no tensor 'model/layers.9.attention.wq.weight'"));
}

}  // namespace
}  // namespace titan::safetensors_testing
