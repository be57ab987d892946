#include "plugins/parallel/tp/tp_shards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/model/llama.h"

namespace titan::tp {
namespace {

TEST(PlannedDim, FollowsTorchTitansLlamaPlan) {
  EXPECT_EQ(PlannedDim("layers.0.attention.wq.weight"), 0);
  EXPECT_EQ(PlannedDim("layers.7.attention.wo.weight"), 1);
  EXPECT_EQ(PlannedDim("layers.1.feed_forward.w2.weight"), 1);
  EXPECT_EQ(PlannedDim("tok_embeddings.weight"), 0);
  EXPECT_EQ(PlannedDim("output.weight"), 0);
  EXPECT_EQ(PlannedDim("layers.2.ffn_norm.weight"), kReplicated);
  EXPECT_EQ(PlannedDim("norm.weight"), kReplicated);
  EXPECT_EQ(PlannedDim("layers.0.attention.wq.bias"), std::nullopt);
  EXPECT_EQ(PlannedDim("xnorm.weight"), std::nullopt);
}

Parameter Whole(const std::string& name, std::vector<int64_t> shape, float* data) {
  Parameter p;
  p.name = name;
  p.full_shape = shape;
  p.value = TensorView{data, DType::kF32, Device{}, shape, {}};
  return p;
}

TEST(TpShards, NarrowsEachParameterToItsBox) {
  std::vector<float> w(4 * 6), norm = {1, 2, 3};
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  Parameter wo = Whole("layers.0.attention.wo.weight", {4, 6}, w.data());
  Parameter n = Whole("norm.weight", {3}, norm.data());
  TpShards shards(CpuDevice::Host());
  ASSERT_TRUE(shards.Shard({&wo, &n}, 2, 1).ok());
  EXPECT_EQ(wo.value.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(wo.grad.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(wo.local_offset, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(wo.placements[static_cast<int>(MeshDim::kTp)].kind, Placement::Kind::kShard);
  EXPECT_EQ(wo.placements[static_cast<int>(MeshDim::kTp)].tensor_dim, 1);
  const float* box = wo.value.data_as<float>();
  EXPECT_EQ(std::vector<float>(box, box + 12),
            (std::vector<float>{3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23}));
  EXPECT_EQ(n.value.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(n.placements[static_cast<int>(MeshDim::kTp)].kind, Placement::Kind::kReplicate);
  EXPECT_EQ(shards.values().numel() % 16, 0);
  ASSERT_EQ(shards.segments().size(), 2u);
  EXPECT_EQ(shards.segments()[1].offset, 16);  // each box 64-byte aligned

  Parameter odd = Whole("layers.0.feed_forward.w1.weight", {3, 2}, w.data());
  absl::Status status = TpShards(CpuDevice::Host()).Shard({&odd}, 2, 0);
  EXPECT_NE(status.message().find("has 3 along dim 0, which 2 tensor-parallel ranks"),
            std::string::npos)
      << status;
}

// Ranks as threads of one process: each collective meets at a barrier and reads the others'
// buffers directly.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), barrier_(size), buffers_(size) {}
  int size() const { return size_; }
  // Publishes this rank's buffer, waits for every rank's, runs `read`, and waits again so no
  // rank changes its buffer while another reads it.
  template <typename Read>
  void Exchange(int rank, const float* buffer, Read read) {
    buffers_[rank] = buffer;
    barrier_.arrive_and_wait();
    read(buffers_);
    barrier_.arrive_and_wait();
  }

 private:
  int size_;
  std::barrier<> barrier_;
  std::vector<const float*> buffers_;
};

class ThreadComm : public Communicator {
 public:
  ThreadComm(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size(); }
  absl::Status AllReduce(TensorView buffer, ReduceOp op) override {
    const int64_t n = buffer.numel();
    std::vector<float> result(n);
    group_.Exchange(rank_, buffer.data_as<float>(), [&](const std::vector<const float*>& all) {
      for (int64_t i = 0; i < n; ++i) {
        float r = all[0][i];
        for (size_t k = 1; k < all.size(); ++k) {
          r = op == ReduceOp::kMax ? std::max(r, all[k][i]) : r + all[k][i];
        }
        result[i] = r;
      }
    });
    std::memcpy(buffer.data, result.data(), n * sizeof(float));
    return absl::OkStatus();
  }
  absl::Status ReduceScatter(const TensorView& input, TensorView output, ReduceOp) override {
    const int64_t n = output.numel();
    group_.Exchange(rank_, input.data_as<float>(), [&](const std::vector<const float*>& all) {
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0;
        for (const float* b : all) sum += b[rank_ * n + i];
        output.data_as<float>()[i] = sum;
      }
    });
    return absl::OkStatus();
  }
  absl::Status AllGather(const TensorView& input, TensorView output) override {
    const int64_t n = input.numel();
    group_.Exchange(rank_, input.data_as<float>(), [&](const std::vector<const float*>& all) {
      for (size_t r = 0; r < all.size(); ++r) {
        std::memcpy(output.data_as<float>() + r * n, all[r], n * sizeof(float));
      }
    });
    return absl::OkStatus();
  }
  absl::Status Broadcast(TensorView, int) override { return Unused(); }
  absl::Status Send(const TensorView&, int, int) override { return Unused(); }
  absl::Status Recv(TensorView, int, int) override { return Unused(); }
  absl::Status Barrier() override { return Unused(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int) override { return Unused(); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not needed by this test"); }
  ThreadGroup& group_;
  int rank_;
};

LlamaConfig SmallConfig() {
  LlamaConfig config;
  config.dim = 32, config.n_layers = 3, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = 48, config.multiple_of = 16;
  return config;
}

struct TrainedRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads;  // per parameter, the rank's box
  std::vector<std::vector<float>> whole;  // per parameter, after unsharding
};

constexpr int64_t kBatch = 2, kSeqLen = 8;

// Two microbatches accumulated (as gradient accumulation does), from one initialization; with a
// group, on this rank's boxes under the plan.
TrainedRun Train(ThreadComm* comm) {
  TrainedRun run;
  auto ac = ParseActivationCheckpoint("selective", "2");  // the recompute path too
  auto model = LlamaModel::Create(SmallConfig(), *ac);
  EXPECT_TRUE(model.ok());
  (*model)->Initialize(11);
  TpShards shards(CpuDevice::Host());
  std::vector<Parameter*> parameters;
  for (const Parameter& p : (*model)->Parameters())
    parameters.push_back(const_cast<Parameter*>(&p));
  if (comm != nullptr) {
    EXPECT_TRUE(shards.Shard(parameters, comm->size(), comm->rank()).ok());
    EXPECT_TRUE((*model)->SetTensorParallel({comm}).ok());
  }
  for (int micro = 0; micro < 2; ++micro) {
    std::vector<int32_t> tokens, targets;
    for (int64_t i = 0; i < kBatch * kSeqLen; ++i) {
      tokens.push_back(static_cast<int32_t>((i * 7 + 3 + micro) % 48));
      targets.push_back(i == 5 ? -100 : static_cast<int32_t>((i * 11 + 5 + micro) % 48));
    }
    auto loss = (*model)->Forward(tokens.data(), targets.data(), kBatch, kSeqLen);
    EXPECT_TRUE(loss.ok()) << loss.status();
    run.losses.push_back(loss.ok() ? *loss : NAN);
    EXPECT_TRUE((*model)->Backward().ok());
  }
  for (const Parameter* p : parameters) {
    const float* g = p->grad.data_as<float>();
    run.grads.emplace_back(g, g + p->grad.numel());
  }
  if (comm != nullptr) {
    EXPECT_TRUE(shards.Unshard(*comm).ok());
    EXPECT_TRUE((*model)->SetTensorParallel({}).ok());
  }
  for (const Parameter* p : parameters) {
    const float* v = p->value.data_as<float>();
    run.whole.emplace_back(v, v + p->value.numel());
  }
  return run;
}

// The model on 2 tensor-parallel ranks (sequence parallel, vocabulary-parallel embedding and
// loss) gives one rank's losses, and each rank's gradients are its boxes of one rank's, the
// replicated norms' summed over the ranks' tokens.
TEST(TpShards, TensorParallelModelMatchesOneRank) {
  const TrainedRun reference = Train(nullptr);
  constexpr int kRanks = 2;
  ThreadGroup group(kRanks);
  std::vector<TrainedRun> runs(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      ThreadComm comm(group, r);
      runs[r] = Train(&comm);
    });
  }
  for (std::thread& t : threads) t.join();

  auto model = LlamaModel::Create(SmallConfig());
  ASSERT_TRUE(model.ok());
  const std::vector<Parameter>& whole = (*model)->Parameters();
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(r);
    for (size_t m = 0; m < reference.losses.size(); ++m) {
      EXPECT_NEAR(runs[r].losses[m], reference.losses[m], 1e-5 * reference.losses[m]);
    }
    ASSERT_EQ(runs[r].grads.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) {
      SCOPED_TRACE(whole[i].name);
      // Cut this rank's box out of the whole gradient with the plan.
      Parameter p = whole[i];
      std::vector<float> full = reference.grads[i];
      p.value = FlatF32(full.data(), p.value.numel());
      p.value.shape = p.full_shape;
      TpShards cut(CpuDevice::Host());
      ASSERT_TRUE(cut.Shard({&p}, kRanks, r).ok());
      const float* want = p.value.data_as<float>();
      ASSERT_EQ(runs[r].grads[i].size(), static_cast<size_t>(p.value.numel()));
      float scale = 0;
      for (int64_t k = 0; k < p.value.numel(); ++k) scale = std::max(scale, std::abs(want[k]));
      for (int64_t k = 0; k < p.value.numel(); ++k) {
        ASSERT_NEAR(runs[r].grads[i][k], want[k], 1e-5 * scale + 1e-7) << k;
      }
      EXPECT_EQ(runs[r].whole[i], reference.whole[i]);  // unsharding restores the values
    }
  }
}

}  // namespace
}  // namespace titan::tp
