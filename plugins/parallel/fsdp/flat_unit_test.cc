#include "plugins/parallel/fsdp/flat_unit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/cpu/cpu_compute.h"
#include "core/cpu/cpu_device.h"
#include "core/runtime/single_process_comm.h"

namespace titan::fsdp {
namespace {

// Three parameters of 5, 7 and 4 elements (16 in all) holding 0..15 back to back.
struct Model {
  std::vector<float> a = std::vector<float>(5), b = std::vector<float>(7),
                     c = std::vector<float>(4);
  std::vector<Parameter> parameters = std::vector<Parameter>(3);
  Model() {
    std::iota(a.begin(), a.end(), 0.0f);
    std::iota(b.begin(), b.end(), 5.0f);
    std::iota(c.begin(), c.end(), 12.0f);
    std::vector<float>* values[] = {&a, &b, &c};
    for (int i = 0; i < 3; ++i) {
      parameters[i].name = "p" + std::to_string(i);
      parameters[i].full_shape = {static_cast<int64_t>(values[i]->size())};
      parameters[i].value = FlatF32(values[i]->data(), static_cast<int64_t>(values[i]->size()));
      parameters[i].grad = parameters[i].value;
      parameters[i].weight_decay = i != 2;
    }
  }
  std::vector<Parameter*> pointers() { return {&parameters[0], &parameters[1], &parameters[2]}; }
};

TEST(FlatUnit, RanksKeepContiguousRunsCoveringEveryElementOnce) {
  constexpr int kDegree = 3;  // 16 elements -> runs of 6, the last padded by 2
  std::vector<float> all;
  for (int rank = 0; rank < kDegree; ++rank) {
    Model model;
    FlatUnit unit(model.pointers(), kDegree, rank, /*local_offset=*/2, CpuDevice::Host());
    ASSERT_EQ(unit.shard_count(), 6);
    ASSERT_EQ(unit.padded_count(), 18);
    std::vector<float> local(8, -1.0f), grad(8, 0.0f);
    std::vector<ParamSegment> segments;
    ASSERT_TRUE(unit.Shard(local.data(), grad.data(), segments).ok());
    all.insert(all.end(), local.begin() + 2, local.end());
    int64_t covered = 0;
    for (const Parameter& p : model.parameters) {
      EXPECT_EQ(p.value.data, nullptr) << p.name;
      EXPECT_EQ(p.grad.data, nullptr) << p.name;
      EXPECT_EQ(p.placements[static_cast<int>(MeshDim::kDpShard)].kind,
                Placement::Kind::kFlatShard);
      covered += p.shard.numel();
      // The shard holds the parameter's elements from shard_offset on.
      const float first_value = p.name == "p0" ? 0.0f : (p.name == "p1" ? 5.0f : 12.0f);
      for (int64_t i = 0; i < p.shard.numel(); ++i) {
        EXPECT_EQ(p.shard.data_as<float>()[i], first_value + p.shard_offset + i) << p.name;
      }
    }
    EXPECT_EQ(covered, rank < 2 ? 6 : 4);
    int64_t in_segments = 0;
    for (const ParamSegment& s : segments) {
      EXPECT_GE(s.offset, 2);
      EXPECT_EQ(s.weight_decay, local[s.offset] < 12.0f);  // p2 (12..15) has no decay
      in_segments += s.count;
    }
    EXPECT_EQ(in_segments, covered);
  }
  // Ranks 0, 1 and 2 hold 0..5, 6..11 and 12..15; Shard leaves rank 2's two padding elements
  // as they were (-1 here; the plugin's buffers start zeroed).
  std::vector<float> expected(18);
  std::iota(expected.begin(), expected.begin() + 16, 0.0f);
  expected[16] = expected[17] = -1.0f;
  EXPECT_EQ(all, expected);
}

TEST(FlatUnit, PointsParametersIntoAGatheredBuffer) {
  Model model;
  FlatUnit unit(model.pointers(), 2, 0, 0, CpuDevice::Host());
  std::vector<float> local(8), grad(8);
  std::vector<ParamSegment> segments;
  ASSERT_TRUE(unit.Shard(local.data(), grad.data(), segments).ok());
  std::vector<float> full(unit.padded_count());
  unit.PointValues(full.data(), false);
  unit.PointGrads(full.data());
  EXPECT_EQ(model.parameters[0].value.data, full.data());
  EXPECT_EQ(model.parameters[1].value.data, full.data() + 5);
  EXPECT_EQ(model.parameters[2].grad.data, full.data() + 12);
  unit.PointValues(nullptr, false);
  EXPECT_EQ(model.parameters[1].value.data, nullptr);
}

// A rank of `size` whose all-gather writes only its own run into place: gathering every rank in
// turn into one buffer fills it as the real all-gather would.
class OwnRunGather : public SingleProcessCommunicator {
 public:
  OwnRunGather(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status AllGather(const TensorView& input, TensorView output) override {
    std::memcpy(static_cast<char*>(output.data) + input.nbytes() * rank_, input.data,
                input.nbytes());
    return absl::OkStatus();
  }

 private:
  int rank_, size_;
};

// Two weights, [16, 16] and [32, 16], of uneven magnitudes, in a unit gathered in `format`.
struct Weights {
  std::vector<float> a = std::vector<float>(256), b = std::vector<float>(512);
  std::vector<Parameter> parameters = std::vector<Parameter>(2);
  explicit Weights(DType format) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = 0.3f * std::sin(0.37f * static_cast<float>(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = 7.0f * std::cos(0.11f * static_cast<float>(i));
    std::vector<float>* values[] = {&a, &b};
    for (int i = 0; i < 2; ++i) {
      parameters[i].name = "w" + std::to_string(i);
      parameters[i].value =
          TensorView{values[i]->data(), DType::kF32, Device{}, {i == 0 ? 16 : 32, 16}, {}};
      parameters[i].full_shape = parameters[i].value.shape;
      parameters[i].grad = parameters[i].value;
      parameters[i].compute_dtype = format;
    }
  }
  std::vector<Parameter*> pointers() { return {&parameters[0], &parameters[1]}; }
};

// Each of 3 ranks gathers its run of the two weights in `format`; rank 0's parameters then point
// at the whole gathered buffer.
struct GatheredWeights {
  static constexpr int kDegree = 3;
  Weights whole;  // untouched: the reference values
  std::vector<std::unique_ptr<Weights>> ranks;
  std::vector<std::unique_ptr<FlatUnit>> units;
  std::vector<std::vector<float>> locals;
  std::vector<float> amax = std::vector<float>(2, 0.0f), full;

  explicit GatheredWeights(DType format) : whole(format) {
    std::vector<ParamSegment> segments;
    for (int r = 0; r < kDegree; ++r) {
      ranks.push_back(std::make_unique<Weights>(format));
      units.push_back(std::make_unique<FlatUnit>(ranks[r]->pointers(), kDegree, r, 0,
                                                 CpuDevice::Host(), format));
      locals.emplace_back(units[r]->shard_count());
      std::vector<float> grads(units[r]->shard_count());
      EXPECT_TRUE(units[r]->Shard(locals[r].data(), grads.data(), segments).ok());
      // The all-reduce of the amaxes, by hand: the largest of the ranks' runs'.
      std::vector<float> mine(2);
      EXPECT_TRUE(CpuCompute::Get()
                      .AbsMax(units[r]->LocalRuns(locals[r].data()), FlatF32(mine.data(), 2))
                      .ok());
      for (int i = 0; i < 2; ++i) amax[i] = std::max(amax[i], mine[i]);
    }
    full.assign(units[0]->gathered_floats(false), 0.0f);
    for (int r = 0; r < kDegree; ++r) {
      units[r]->set_amax(FlatF32(amax.data(), 2));
      OwnRunGather group(r, kDegree);
      auto started = units[r]->StartGather(group, locals[r].data(), full.data(), false, nullptr);
      EXPECT_TRUE(started.ok() && (*started)->Wait().ok());
    }
    units[0]->PointValues(full.data(), false);
  }
};

// Records the events each started all-gather was told to wait for; gathers as OwnRunGather.
class OrderRecordingGather : public OwnRunGather {
 public:
  using OwnRunGather::OwnRunGather;
  absl::StatusOr<std::unique_ptr<Transfer>> StartAllGather(const TensorView& input,
                                                           TensorView output,
                                                           const StreamOrder& order) override {
    orders.push_back(order.after);
    return Communicator::StartAllGather(input, output, order);
  }
  std::vector<std::vector<EventHandle>> orders;
};

// An f32 gather reads the shard as the caller left it: it waits for the caller's event alone,
// not for the compute queued since. A bf16 gather first converts the run on the compute stream
// and waits for an event after that conversion instead (on the CPU, whose events are null).
TEST(FlatUnit, AStartedGatherWaitsForTheCallersEventOrForItsConversion) {
  const auto written = reinterpret_cast<EventHandle>(uintptr_t{0x1234});
  for (DType format : {DType::kF32, DType::kBF16}) {
    Weights weights(format);
    FlatUnit unit(weights.pointers(), 1, 0, 0, CpuDevice::Host(), format);
    std::vector<float> local(unit.shard_count()), grads(unit.shard_count());
    std::vector<ParamSegment> segments;
    ASSERT_TRUE(unit.Shard(local.data(), grads.data(), segments).ok());
    std::vector<float> full(unit.gathered_floats(false));
    OrderRecordingGather group(0, 1);
    auto started = unit.StartGather(group, local.data(), full.data(), false, written);
    ASSERT_TRUE(started.ok()) << started.status();
    ASSERT_TRUE((*started)->Wait().ok());
    ASSERT_EQ(group.orders.size(), 1u);
    const std::vector<EventHandle> expected = {format == DType::kF32 ? written : nullptr};
    EXPECT_EQ(group.orders[0], expected) << DTypeName(format);
    if (format == DType::kF32) {
      EXPECT_EQ(full[17], Weights(format).a[17]) << "the gather wrote the shard";
    }
  }
}

TEST(FlatUnit, GathersBf16WeightsAsTheWholeWeightsRoundedToBf16InHalfTheBytes) {
  GatheredWeights gathered(DType::kBF16);
  const FlatUnit& unit = *gathered.units[0];
  EXPECT_EQ(unit.gathered_floats(false) * 2, unit.padded_count());
  EXPECT_EQ(unit.gathered_floats(true), unit.padded_count());
  for (int i = 0; i < 2; ++i) {
    const Parameter& p = gathered.ranks[0]->parameters[i];
    EXPECT_EQ(p.value.data, nullptr);
    ASSERT_EQ(p.compute.dtype, DType::kBF16);
    ASSERT_EQ(p.compute.shape, gathered.whole.parameters[i].value.shape);
    std::vector<uint16_t> expected(p.compute.numel());
    TensorView rounded = p.compute;
    rounded.data = expected.data();
    ASSERT_TRUE(CpuCompute::Get().Cast(gathered.whole.parameters[i].value, rounded).ok());
    const auto* codes = p.compute.data_as<const uint16_t>();
    EXPECT_EQ(std::vector<uint16_t>(codes, codes + p.compute.numel()), expected) << p.name;
  }
  unit.PointValues(nullptr, false);
  EXPECT_EQ(gathered.ranks[0]->parameters[0].compute.data, nullptr);
}

// FSDP's float8 all-gather: every rank quantizes its runs by the whole weight's amax, so the
// gathered codes and scale are the whole weight's tensorwise quantization, in a quarter of the
// f32 bytes.
TEST(FlatUnit, GathersFloat8WeightsAsTheWholeWeightsQuantizedInAQuarterOfTheBytes) {
  GatheredWeights gathered(DType::kF8E4M3);
  const FlatUnit& unit = *gathered.units[0];
  EXPECT_EQ(unit.gathered_floats(false) * 4, unit.padded_count());
  for (int i = 0; i < 2; ++i) {
    const Parameter& p = gathered.ranks[0]->parameters[i];
    const TensorView& w = gathered.whole.parameters[i].value;
    ASSERT_EQ(p.compute.dtype, DType::kF8E4M3);
    ASSERT_EQ(p.compute.shape, w.shape);
    std::vector<uint8_t> codes(w.numel());
    float inverse_scale = 0;
    TensorView expected{codes.data(), DType::kF8E4M3, Device{}, w.shape, {}};
    ASSERT_TRUE(CpuCompute::Get()
                    .Float8Quantize(w, {Float8Granularity::kTensor, false, false, {}}, expected,
                                    FlatF32(&inverse_scale, 1))
                    .ok());
    const auto* gathered_codes = p.compute.data_as<const uint8_t>();
    EXPECT_EQ(std::vector<uint8_t>(gathered_codes, gathered_codes + w.numel()), codes) << p.name;
    EXPECT_EQ(p.compute_inverse_scale.data_as<const float>()[0], inverse_scale) << p.name;
  }
  // The two weights' magnitudes differ: so do their scales.
  EXPECT_NE(gathered.ranks[0]->parameters[0].compute_inverse_scale.data_as<const float>()[0],
            gathered.ranks[0]->parameters[1].compute_inverse_scale.data_as<const float>()[0]);
}

TEST(BufferPool, ReusesFreedBuffersAndZeroesThemWhenAsked) {
  BufferPool pool(&CpuDevice::Host());
  DeviceBuffer a = *pool.Take(4, true);
  a.f32()[0] = 3.0f;
  float* first = a.f32();
  pool.Give(std::move(a));
  DeviceBuffer b = *pool.Take(4, true);
  EXPECT_EQ(b.f32(), first);
  EXPECT_EQ(b.f32()[0], 0.0f);
  DeviceBuffer c = *pool.Take(4, true);  // b is in use: a new one
  EXPECT_NE(c.f32(), first);
  EXPECT_EQ(c.f32()[3], 0.0f);
  b.f32()[1] = 5.0f;
  pool.Give(std::move(b));
  DeviceBuffer d = *pool.Take(4, false);
  EXPECT_EQ(d.f32()[1], 5.0f);
}

}  // namespace
}  // namespace titan::fsdp
