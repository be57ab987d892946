#include "plugins/parallel/tp/tp_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cpu/cpu_device.h"
#include "plugins/parallel/common/thread_comm.h"

namespace titan::tp {
namespace {

TensorView Floats(std::vector<float>& v) {
  return TensorView{v.data(), DType::kF32, Device{}, {static_cast<int64_t>(v.size())}, {}};
}

// Runs `body(rank, comm)` on `size` ranks made of threads.
template <typename Body>
void OnRanks(int size, Body body) {
  ThreadGroup group(size);
  std::vector<std::thread> ranks;
  for (int r = 0; r < size; ++r) {
    ranks.emplace_back([&, r] {
      ThreadComm comm(group, r);
      body(r, comm);
    });
  }
  for (std::thread& t : ranks) t.join();
}

float Value(int rank, int chunk, int i) { return 1000.0f * rank + 10.0f * chunk + i * 0.25f; }

TEST(TpRing, AllGatherMatmulHandsEachChunkOverOnceItIsHere) {
  constexpr int64_t kChunk = 5;
  for (int size : {2, 3, 4}) {
    OnRanks(size, [&](int r, Communicator& comm) {
      TpRing ring(comm, CpuDevice::Host());
      std::vector<float> local(kChunk), full(kChunk * size, -1.0f);
      for (int i = 0; i < kChunk; ++i) local[i] = Value(r, 0, i);
      std::vector<int> order;
      const absl::Status done =
          ring.AllGatherMatmul("layers.0.wq", Floats(local), Floats(full), [&](int c) {
            for (int i = 0; i < kChunk; ++i) EXPECT_EQ(full[c * kChunk + i], Value(c, 0, i));
            order.push_back(c);
            return absl::OkStatus();
          });
      ASSERT_TRUE(done.ok()) << done;
      for (int c = 0; c < size; ++c) {
        for (int i = 0; i < kChunk; ++i) EXPECT_EQ(full[c * kChunk + i], Value(c, 0, i));
      }
      // This rank's chunk first, then the ring's: r - 1, r - 2, ...
      ASSERT_EQ(order.size(), static_cast<size_t>(size));
      for (int s = 0; s < size; ++s) EXPECT_EQ(order[s], ((r - s) % size + size) % size);
      const std::vector<OverlapTime> times = ring.TakeTimes();
      ASSERT_EQ(times.size(), 1u);
      EXPECT_EQ(times[0].layer, "layers.0.wq");
      EXPECT_GE(times[0].hidden, 0.0);
      EXPECT_GE(times[0].exposed, 0.0);
      EXPECT_TRUE(ring.TakeTimes().empty());
    });
  }
}

TEST(TpRing, MatmulReduceScatterSumsEveryRanksPartOfThisRanksChunk) {
  constexpr int64_t kChunk = 7;
  for (int size : {2, 3, 4}) {
    OnRanks(size, [&](int r, Communicator& comm) {
      TpRing ring(comm, CpuDevice::Host());
      std::vector<float> local(kChunk, -1.0f);
      std::vector<int> produced;
      const absl::Status done = ring.MatmulReduceScatter(
          "layers.0.wo",
          [&](int c, const TensorView& partial) {
            EXPECT_EQ(partial.numel(), kChunk);
            for (int i = 0; i < kChunk; ++i) partial.data_as<float>()[i] = Value(r, c, i);
            produced.push_back(c);
            return absl::OkStatus();
          },
          Floats(local));
      ASSERT_TRUE(done.ok()) << done;
      for (int i = 0; i < kChunk; ++i) {
        float expected = 0;
        for (int q = 0; q < size; ++q) expected += Value(q, r, i);
        EXPECT_NEAR(local[i], expected, 1e-6 * std::fabs(expected)) << "rank " << r << " i " << i;
      }
      // Every chunk once, this rank's last (its sum complete).
      ASSERT_EQ(produced.size(), static_cast<size_t>(size));
      EXPECT_EQ(produced.back(), r);
      std::sort(produced.begin(), produced.end());
      for (int c = 0; c < size; ++c) EXPECT_EQ(produced[c], c);
    });
  }
}

// What makes the async path bit-identical: the matmul of the gathered rows chunk by chunk, as
// the model runs it under the ring, equals the synchronous path's, which multiplies the gathered
// rows by the same chunks (core/model/modules/linear.h, GatheredChunkRows); and it is the matmul
// of all rows at once within f32 rounding (a BLAS may round a row differently in a GEMM of
// another row count: OpenBLAS's Haswell kernels do).
TEST(TpRing, AllGatherMatmulByChunksEqualsTheSynchronousPathBitForBit) {
  constexpr int64_t kRows = 24, kIn = 40, kOut = 36;
  for (int size : {2, 4}) {
    const int64_t rows = kRows / size;
    std::vector<float> weight(kOut * kIn);
    for (size_t i = 0; i < weight.size(); ++i) weight[i] = std::sin(0.37f * i) * 0.1f;
    std::vector<std::vector<float>> chunked(size), synchronous(size), whole(size);
    OnRanks(size, [&](int r, Communicator& comm) {
      Compute& compute = *CpuDevice::Host().compute();
      TpRing ring(comm, CpuDevice::Host());
      std::vector<float> local(rows * kIn), full(kRows * kIn), out(kRows * kOut);
      for (int64_t i = 0; i < rows * kIn; ++i) local[i] = std::cos(0.11f * (i + 977 * r));
      TensorView w = Floats(weight);
      w.shape = {kOut, kIn};
      auto matrix = [](std::vector<float>& v, int64_t first, int64_t count, int64_t width) {
        return TensorView{v.data() + first * width, DType::kF32, Device{}, {count, width}, {}};
      };
      ASSERT_TRUE(ring.AllGatherMatmul("wq", Floats(local), Floats(full),
                                       [&](int c) {
                                         return compute.Gemm(matrix(full, c * rows, rows, kIn),
                                                             false, w, true, 1.0f, 0.0f,
                                                             matrix(out, c * rows, rows, kOut));
                                       })
                      .ok());
      chunked[r] = out;
      std::vector<float> by_chunks(kRows * kOut), at_once(kRows * kOut);
      for (int c = 0; c < size; ++c) {  // the synchronous path, after a plain gather
        ASSERT_TRUE(compute
                        .Gemm(matrix(full, c * rows, rows, kIn), false, w, true, 1.0f, 0.0f,
                              matrix(by_chunks, c * rows, rows, kOut))
                        .ok());
      }
      ASSERT_TRUE(compute
                      .Gemm(matrix(full, 0, kRows, kIn), false, w, true, 1.0f, 0.0f,
                            matrix(at_once, 0, kRows, kOut))
                      .ok());
      synchronous[r] = by_chunks;
      whole[r] = at_once;
    });
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(std::memcmp(chunked[r].data(), synchronous[r].data(),
                            synchronous[r].size() * sizeof(float)),
                0)
          << "tp " << size << " rank " << r;
      for (size_t i = 0; i < whole[r].size(); ++i) {
        ASSERT_NEAR(chunked[r][i], whole[r][i], 1e-6f * (1.0f + std::fabs(whole[r][i])))
            << "tp " << size << " rank " << r << " element " << i;
      }
    }
  }
}

// A communicator whose point-to-point runs in issue order (as NCCL's): Exchange is refused, so
// the ring must start each step's exchange (StartExchange), and a started exchange's receives
// land only when it is waited for, as a deferred device wait would make them visible.
class OrderedComm : public ThreadComm {
 public:
  using ThreadComm::ThreadComm;
  bool ordered_point_to_point() const override { return true; }
  absl::StatusOr<std::unique_ptr<Transfer>> Exchange(std::span<const PeerMessage>) override {
    return absl::FailedPreconditionError("the ring must not hold up the compute stream");
  }
  absl::StatusOr<std::unique_ptr<Transfer>> StartExchange(std::span<const PeerMessage> messages,
                                                          const StreamOrder& order) override {
    EXPECT_TRUE(order.after.empty());  // the whole stream so far: the chunk just sent included
    ++started;
    std::vector<std::unique_ptr<Transfer>> all;
    for (const PeerMessage& m : messages) {
      const bool send = m.kind == PeerMessage::Kind::kSend;
      auto one = send ? StartSend(m.buffer, m.peer, m.tag) : StartRecv(m.buffer, m.peer, m.tag);
      if (!one.ok()) return one.status();
      all.push_back(std::move(*one));
    }
    return std::unique_ptr<Transfer>(new Transfers(std::move(all)));
  }
  int started = 0;
};

TEST(TpRing, WhereSendsAndReceivesRunInIssueOrderEachStepIsOneStartedExchange) {
  constexpr int64_t kChunk = 4;
  for (int size : {2, 3}) {
    ThreadGroup group(size);
    std::vector<std::thread> ranks;
    for (int r = 0; r < size; ++r) {
      ranks.emplace_back([&, r] {
        OrderedComm comm(group, r);
        TpRing ring(comm, CpuDevice::Host());
        std::vector<float> local(kChunk), full(kChunk * size, -1.0f), reduced(kChunk, -1.0f);
        for (int i = 0; i < kChunk; ++i) local[i] = Value(r, 0, i);
        ASSERT_TRUE(ring.AllGatherMatmul("layers.0.w1", Floats(local), Floats(full),
                                         [&](int c) {
                                           for (int i = 0; i < kChunk; ++i) {
                                             EXPECT_EQ(full[c * kChunk + i], Value(c, 0, i));
                                           }
                                           return absl::OkStatus();
                                         })
                        .ok());
        ASSERT_TRUE(ring.MatmulReduceScatter(
                            "layers.0.w2",
                            [&](int c, const TensorView& partial) {
                              for (int i = 0; i < kChunk; ++i) {
                                partial.data_as<float>()[i] = Value(r, c, i);
                              }
                              return absl::OkStatus();
                            },
                            Floats(reduced))
                        .ok());
        for (int i = 0; i < kChunk; ++i) {
          float want = 0;
          for (int from = 0; from < size; ++from) want += Value(from, r, i);
          EXPECT_NEAR(reduced[i], want, 1e-6 * std::fabs(want));
        }
        EXPECT_EQ(comm.started, 2 * (size - 1));  // one per step that moves a chunk
      });
    }
    for (std::thread& t : ranks) t.join();
  }
}

TEST(TpRing, AnErrorOfTheChunkWorkComesBackAfterTheTransfers) {
  OnRanks(2, [&](int r, Communicator& comm) {
    TpRing ring(comm, CpuDevice::Host());
    std::vector<float> local(3, 1.0f), full(6);
    const absl::Status done = ring.AllGatherMatmul(
        "layers.1.w1", Floats(local), Floats(full),
        [&](int c) { return c == r ? absl::InternalError("chunk failed") : absl::OkStatus(); });
    EXPECT_EQ(done.message(), "chunk failed");
    std::vector<float> wrong(5);
    EXPECT_NE(ring.AllGatherMatmul("layers.1.w1", Floats(local), Floats(wrong),
                                   [](int) { return absl::OkStatus(); })
                  .message()
                  .find("async all-gather of layers.1.w1"),
              std::string::npos);
  });
}

}  // namespace
}  // namespace titan::tp
