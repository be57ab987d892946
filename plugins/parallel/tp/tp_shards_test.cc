#include "plugins/parallel/tp/tp_shards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/model/decoder_model.h"
#include "core/model/float8_test_plugin.h"
#include "plugins/parallel/common/thread_comm.h"
#include "plugins/parallel/tp/tp_ring.h"

namespace titan::tp {
namespace {

TEST(SplitDim, FollowsTheDeclaredStyle) {
  EXPECT_EQ(SplitDim(TensorParallelStyle::kColumnwise, 2), 0);
  EXPECT_EQ(SplitDim(TensorParallelStyle::kRowwise, 2), 1);
  EXPECT_EQ(SplitDim(TensorParallelStyle::kVocabParallelEmbedding, 2), 0);
  EXPECT_EQ(SplitDim(TensorParallelStyle::kReplicate, 2), kReplicated);
  EXPECT_EQ(SplitDim(TensorParallelStyle::kUndeclared, 2), std::nullopt);
  // A stack of matrices [experts, out, in] splits each matrix as one alone.
  EXPECT_EQ(SplitDim(TensorParallelStyle::kColumnwise, 3), 1);
  EXPECT_EQ(SplitDim(TensorParallelStyle::kRowwise, 3), 2);
}

Parameter Whole(const std::string& name, std::vector<int64_t> shape, float* data,
                TensorParallelStyle style) {
  Parameter p;
  p.name = name;
  p.full_shape = shape;
  p.value = TensorView{data, DType::kF32, Device{}, shape, {}};
  p.tp_style = style;
  return p;
}

TEST(TpShards, NarrowsEachParameterToItsBox) {
  std::vector<float> w(4 * 6), norm = {1, 2, 3};
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  Parameter wo =
      Whole("layers.0.attention.wo.weight", {4, 6}, w.data(), TensorParallelStyle::kRowwise);
  Parameter n = Whole("norm.weight", {3}, norm.data(), TensorParallelStyle::kReplicate);
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

  Parameter odd =
      Whole("layers.0.feed_forward.w1.weight", {3, 2}, w.data(), TensorParallelStyle::kColumnwise);
  absl::Status status = TpShards(CpuDevice::Host()).Shard({&odd}, 2, 0);
  EXPECT_NE(status.message().find("has 3 along dim 0, which 2 tensor-parallel ranks"),
            std::string::npos)
      << status;
}

// Experts' weights [experts, out, in] split each expert's matrix: w1 by its rows, w2 by its
// columns; and Unshard puts every box back in its place.
TEST(TpShards, SplitsEachExpertsMatrix) {
  std::vector<float> w1(2 * 4 * 3), w2(2 * 3 * 4);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = static_cast<float>(i);
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>(100 + i);
  const std::vector<float> w1_before = w1, w2_before = w2;
  std::vector<float> w1_other = w1, w2_other = w2;
  const std::vector<int64_t> w1_shape = {2, 4, 3}, w2_shape = {2, 3, 4};
  Parameter up[2], down[2];
  for (int r = 0; r < 2; ++r) {
    up[r] = Whole("moe.experts.w1", w1_shape, r == 0 ? w1_other.data() : w1.data(),
                  TensorParallelStyle::kColumnwise);
    down[r] = Whole("moe.experts.w2", w2_shape, r == 0 ? w2_other.data() : w2.data(),
                    TensorParallelStyle::kRowwise);
  }
  std::vector<TpShards> shards;
  for (int r = 0; r < 2; ++r) shards.emplace_back(CpuDevice::Host());
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(shards[r].Shard({&up[r], &down[r]}, 2, r).ok());
  EXPECT_EQ(up[1].value.shape, (std::vector<int64_t>{2, 2, 3}));
  EXPECT_EQ(up[1].local_offset, (std::vector<int64_t>{0, 2, 0}));
  EXPECT_EQ(up[1].placements[static_cast<int>(MeshDim::kTp)].tensor_dim, 1);
  const float* box = up[1].value.data_as<float>();
  // Rows 2 and 3 of expert 0 (elements 6..11), then of expert 1 (18..23).
  EXPECT_EQ(std::vector<float>(box, box + 12),
            (std::vector<float>{6, 7, 8, 9, 10, 11, 18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(down[1].value.shape, (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(down[1].placements[static_cast<int>(MeshDim::kTp)].tensor_dim, 2);
  box = down[1].value.data_as<float>();
  EXPECT_EQ(std::vector<float>(box, box + 4), (std::vector<float>{102, 103, 106, 107}));

  ThreadGroup group(2);
  std::vector<std::thread> ranks;
  absl::Status statuses[2];
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ThreadComm comm(group, r);
      statuses[r] = shards[r].Unshard(comm);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    EXPECT_EQ(up[r].value.shape, w1_shape);
    const float* whole = up[r].value.data_as<float>();
    EXPECT_EQ(std::vector<float>(whole, whole + w1.size()), w1_before);
    whole = down[r].value.data_as<float>();
    EXPECT_EQ(std::vector<float>(whole, whole + w2.size()), w2_before);
  }
}

// The plan is the declared styles, not the names: parameters of another model family, named as
// it likes, shard by their styles, and one without a style is refused by name.
TEST(TpShards, ShardsAnyFamilyByItsDeclaredStyles) {
  std::vector<float> w(4 * 6), table(6 * 2);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(100 + i);
  Parameter up = Whole("blocks.0.mlp.up_proj", {4, 6}, w.data(), TensorParallelStyle::kColumnwise);
  Parameter embed =
      Whole("wte", {6, 2}, table.data(), TensorParallelStyle::kVocabParallelEmbedding);
  TpShards shards(CpuDevice::Host());
  ASSERT_TRUE(shards.Shard({&up, &embed}, 2, 1).ok());
  EXPECT_EQ(up.value.shape, (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(up.local_offset, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(up.placements[static_cast<int>(MeshDim::kTp)].tensor_dim, 0);
  EXPECT_EQ(up.value.data_as<float>()[0], 12);  // row 2's first element
  EXPECT_EQ(embed.value.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(embed.value.data_as<float>()[0], 106);  // vocabulary row 3

  Parameter bias =
      Whole("blocks.0.mlp.up_proj.bias", {4}, w.data(), TensorParallelStyle::kUndeclared);
  absl::Status status = TpShards(CpuDevice::Host()).Shard({&bias}, 2, 0);
  EXPECT_NE(status.message().find(
                "declares no tensor-parallel style for parameter blocks.0.mlp.up_proj.bias"),
            std::string::npos)
      << status;
}

// The Llama model declares TorchTitan's plan where it creates its parameters.
TEST(TpShards, LlamaDeclaresTorchTitansPlan) {
  LlamaConfig config;
  config.dim = 32, config.n_layers = 1, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = 48, config.multiple_of = 16;
  auto model = DecoderModel::Create(config);
  ASSERT_TRUE(model.ok()) << model.status();
  using Style = TensorParallelStyle;
  const std::map<std::string, Style> want = {
      {"tok_embeddings.weight", Style::kVocabParallelEmbedding},
      {"layers.0.attention_norm.weight", Style::kReplicate},
      {"layers.0.attention.wq.weight", Style::kColumnwise},
      {"layers.0.attention.wk.weight", Style::kColumnwise},
      {"layers.0.attention.wv.weight", Style::kColumnwise},
      {"layers.0.attention.wo.weight", Style::kRowwise},
      {"layers.0.ffn_norm.weight", Style::kReplicate},
      {"layers.0.feed_forward.w1.weight", Style::kColumnwise},
      {"layers.0.feed_forward.w2.weight", Style::kRowwise},
      {"layers.0.feed_forward.w3.weight", Style::kColumnwise},
      {"norm.weight", Style::kReplicate},
      {"output.weight", Style::kColumnwise}};
  std::map<std::string, Style> found;
  for (const Parameter& p : (*model)->Parameters()) found[p.name] = p.tp_style;
  EXPECT_EQ(found, want);
}

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
// With `async`, under the tp plugin's rings (async tensor parallelism), whose times land in
// `overlap_times`.
// With `float8`, every linear layer in Float8 under that recipe.
TrainedRun Train(ThreadComm* comm, const LlamaConfig& config = SmallConfig(), bool async = false,
                 std::vector<OverlapTime>* overlap_times = nullptr,
                 const Float8Plugin* float8 = nullptr) {
  TrainedRun run;
  std::optional<TpRing> ring;                             // outlives the model, which holds it
  auto ac = ParseActivationCheckpoint("selective", "2");  // the recompute path too
  auto model = DecoderModel::Create(config, *ac);
  EXPECT_TRUE(model.ok());
  if (float8 != nullptr) {
    EXPECT_TRUE((*model)->ConvertToFloat8(*float8).ok());
  }
  EXPECT_TRUE((*model)->Initialize(11).ok());
  TpShards shards(CpuDevice::Host());
  std::vector<Parameter*> parameters;
  for (const Parameter& p : (*model)->Parameters())
    parameters.push_back(const_cast<Parameter*>(&p));
  if (comm != nullptr) {
    EXPECT_TRUE(shards.Shard(parameters, comm->size(), comm->rank()).ok());
    if (async) ring.emplace(*comm, CpuDevice::Host());
    EXPECT_TRUE((*model)->SetTensorParallel({comm, true, async ? &*ring : nullptr}).ok());
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
  if (overlap_times != nullptr) *overlap_times = (*model)->TakeTensorParallelOverlap();
  if (ring) {
    EXPECT_TRUE(ring->TakeTimes().empty());  // the model took them after each ring
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

  auto model = DecoderModel::Create(SmallConfig());
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

// Per block: the all-gathers under wq (forward) and w1 (forward), under wo and w2 (the input
// gradients), the reduce-scatters under wo and w2 (forward) and wv and w3 (the input
// gradients); the final norm's gather under output; then what stayed synchronous (the
// embedding's collectives, the final norm's backward reduce-scatter).
std::vector<std::string> RingLayers() {
  return {"layers.0.attention.wo.weight",
          "layers.0.attention.wq.weight",
          "layers.0.attention.wv.weight",
          "layers.0.feed_forward.w1.weight",
          "layers.0.feed_forward.w2.weight",
          "layers.0.feed_forward.w3.weight",
          "layers.1.attention.wo.weight",
          "layers.1.attention.wq.weight",
          "layers.1.attention.wv.weight",
          "layers.1.feed_forward.w1.weight",
          "layers.1.feed_forward.w2.weight",
          "layers.1.feed_forward.w3.weight",
          "layers.2.attention.wo.weight",
          "layers.2.attention.wq.weight",
          "layers.2.attention.wv.weight",
          "layers.2.feed_forward.w1.weight",
          "layers.2.feed_forward.w2.weight",
          "layers.2.feed_forward.w3.weight",
          "output.weight",
          "synchronous"};
}

// Async tensor parallelism gives the synchronous path's losses and gradients at tp 2 and tp 4:
// the all-gather-matmul the same bits, the matmul-reduce-scatter its sums in ring order (within
// 1e-6 relative), over two accumulated microbatches with recompute. Every column- and
// row-parallel layer's ring ran and timed its communication.
TEST(TpRing, AsyncTensorParallelModelMatchesTheSynchronousOne) {
  LlamaConfig config = SmallConfig();
  config.n_kv_heads = 4;  // divisible by 4 ranks
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    ThreadGroup group(ranks);
    std::vector<TrainedRun> sync(ranks), async(ranks);
    std::vector<std::vector<OverlapTime>> times(ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        ThreadComm comm(group, r);
        sync[r] = Train(&comm, config);
        async[r] = Train(&comm, config, /*async=*/true, &times[r]);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) {
      for (size_t m = 0; m < sync[r].losses.size(); ++m) {
        EXPECT_NEAR(async[r].losses[m], sync[r].losses[m], 1e-6 * sync[r].losses[m]);
      }
      ASSERT_EQ(async[r].grads.size(), sync[r].grads.size());
      for (size_t i = 0; i < sync[r].grads.size(); ++i) {
        float scale = 0;
        for (float g : sync[r].grads[i]) scale = std::max(scale, std::abs(g));
        for (size_t k = 0; k < sync[r].grads[i].size(); ++k) {
          ASSERT_NEAR(async[r].grads[i][k], sync[r].grads[i][k], 1e-6 * scale) << i << " " << k;
        }
      }
      std::vector<std::string> layers;
      for (const OverlapTime& t : times[r]) {
        layers.push_back(t.layer);
        EXPECT_GE(t.hidden, 0.0);
        EXPECT_GE(t.exposed, 0.0);
      }
      std::sort(layers.begin(), layers.end());
      EXPECT_EQ(layers, RingLayers());
    }
  }
}

// In Float8 too every projection runs its rings, each chunk quantized by the whole operand's
// scales: the losses agree with the synchronous path's to the float8 layouts' bound (the
// reduce-scatter's ring order moves f32 sums by 1e-7, which can cross a float8 rounding
// boundary in a later layer), measured below 1e-5 here.
TEST(TpRing, AsyncTensorParallelFloat8ModelMatchesTheSynchronousOne) {
  const TensorwiseTestPlugin tensorwise;
  const RowwiseTestPlugin rowwise;
  for (const Float8Plugin* float8 : std::vector<const Float8Plugin*>{&tensorwise, &rowwise}) {
    SCOPED_TRACE(float8 == &tensorwise ? "tensorwise" : "rowwise");
    constexpr int kRanks = 2;
    ThreadGroup group(kRanks);
    std::vector<TrainedRun> sync(kRanks), async(kRanks);
    std::vector<std::vector<OverlapTime>> times(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        ThreadComm comm(group, r);
        sync[r] = Train(&comm, SmallConfig(), false, nullptr, float8);
        async[r] = Train(&comm, SmallConfig(), true, &times[r], float8);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r) {
      for (size_t m = 0; m < sync[r].losses.size(); ++m) {
        EXPECT_NEAR(async[r].losses[m], sync[r].losses[m], 1e-4 * sync[r].losses[m]);
      }
      std::vector<std::string> layers;
      for (const OverlapTime& t : times[r]) layers.push_back(t.layer);
      std::sort(layers.begin(), layers.end());
      EXPECT_EQ(layers, RingLayers());
    }
  }
}

}  // namespace
}  // namespace titan::tp
