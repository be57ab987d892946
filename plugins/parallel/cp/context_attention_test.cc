// The model computing through the cp plugin's attentions on 2 and 4 context-parallel ranks
// (threads of this process) gives one rank's losses and, averaged over the ranks as the train
// step averages them, its gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "core/model/decoder_model.h"
#include "plugins/parallel/common/thread_comm.h"
#include "plugins/parallel/cp/allgather_attention.h"
#include "plugins/parallel/cp/ring_attention.h"

namespace titan::cp {
namespace {

LlamaConfig SmallConfig() {
  LlamaConfig config;
  config.dim = 32, config.n_layers = 2, config.n_heads = 4, config.n_kv_heads = 2;
  config.vocab_size = 48, config.multiple_of = 16;
  return config;
}

struct TrainedRun {
  std::vector<float> losses;
  std::vector<std::vector<float>> grads;  // per parameter
  int64_t scored_pairs = 0;
};

constexpr int64_t kBatch = 2, kSeqLen = 16;

enum class Rotate { kNone, kAllGather, kRing };

// Two microbatches accumulated from one initialization, with the recompute path too.
TrainedRun Train(Rotate rotate, ThreadComm* comm) {
  TrainedRun run;
  auto ac = ParseActivationCheckpoint("selective", "2");
  auto model = DecoderModel::Create(SmallConfig(), *ac);
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->Initialize(5).ok());
  std::unique_ptr<ContextAttention> attention;
  if (rotate == Rotate::kAllGather) {
    attention = std::make_unique<AllGatherAttention>(*comm, CpuDevice::Host());
  } else if (rotate == Rotate::kRing) {
    attention = std::make_unique<RingAttention>(*comm, CpuDevice::Host());
  }
  if (attention != nullptr) {
    EXPECT_TRUE((*model)->SetAttention(attention.get()).ok());
  }
  for (int micro = 0; micro < 2; ++micro) {
    std::vector<int32_t> tokens, targets;
    for (int64_t i = 0; i < kBatch * kSeqLen; ++i) {
      tokens.push_back(static_cast<int32_t>((i * 7 + 3 + micro) % 48));
      // No ignored target: each rank's loss is the mean over its tokens, and the ranks' means
      // average to the whole batch's only when every rank counts as many.
      targets.push_back(static_cast<int32_t>((i * 11 + 5 + micro) % 48));
    }
    auto loss = (*model)->Forward(tokens.data(), targets.data(), kBatch, kSeqLen);
    EXPECT_TRUE(loss.ok()) << loss.status();
    run.losses.push_back(loss.ok() ? *loss : NAN);
    EXPECT_TRUE((*model)->Backward().ok());
  }
  for (const Parameter& p : (*model)->Parameters()) {
    const float* g = p.grad.data_as<float>();
    run.grads.emplace_back(g, g + p.grad.numel());
  }
  run.scored_pairs = (*model)->attention_pairs();
  // The model's own attention again, before `attention` goes.
  EXPECT_TRUE((*model)->SetAttention(nullptr).ok());
  return run;
}

void ExpectContextParallelMatchesOneRank(Rotate rotate, int ranks) {
  const TrainedRun reference = Train(Rotate::kNone, nullptr);
  ThreadGroup group(ranks);
  std::vector<TrainedRun> runs(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ThreadComm comm(group, r);
      runs[r] = Train(rotate, &comm);
    });
  }
  for (std::thread& t : threads) t.join();
  // The loss is the whole sequences' on every rank; the gradient is the ranks' mean.
  for (int r = 0; r < ranks; ++r) {
    for (size_t m = 0; m < reference.losses.size(); ++m) {
      EXPECT_NEAR(runs[r].losses[m], reference.losses[m], 1e-5 * reference.losses[m]) << r;
    }
    // Causal load balancing: every rank scores the same pairs, together the whole mask's.
    EXPECT_EQ(runs[r].scored_pairs * ranks, reference.scored_pairs) << r;
  }
  for (size_t i = 0; i < reference.grads.size(); ++i) {
    const std::vector<float>& want = reference.grads[i];
    float scale = 0;
    for (float g : want) scale = std::max(scale, std::abs(g));
    for (size_t k = 0; k < want.size(); ++k) {
      float mean = 0;
      for (const TrainedRun& run : runs) mean += run.grads[i][k];
      mean /= static_cast<float>(ranks);
      ASSERT_NEAR(mean, want[k], 1e-5 * scale + 1e-7) << "parameter " << i << " element " << k;
    }
  }
}

TEST(ContextAttention, AllGatheredKeysMatchOneRank) {
  ExpectContextParallelMatchesOneRank(Rotate::kAllGather, 2);
}

TEST(ContextAttention, RingMatchesOneRank) {
  ExpectContextParallelMatchesOneRank(Rotate::kRing, 2);
}

TEST(ContextAttention, RingOfFourMatchesOneRank) {
  ExpectContextParallelMatchesOneRank(Rotate::kRing, 4);
}

}  // namespace
}  // namespace titan::cp
