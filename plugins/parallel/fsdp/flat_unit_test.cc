#include "plugins/parallel/fsdp/flat_unit.h"

#include <gtest/gtest.h>

#include <numeric>

#include "core/runtime/cpu_device.h"

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
  unit.PointValues(full.data());
  unit.PointGrads(full.data());
  EXPECT_EQ(model.parameters[0].value.data, full.data());
  EXPECT_EQ(model.parameters[1].value.data, full.data() + 5);
  EXPECT_EQ(model.parameters[2].grad.data, full.data() + 12);
  unit.PointValues(nullptr);
  EXPECT_EQ(model.parameters[1].value.data, nullptr);
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
