// What runs on any machine of cuDNN's attention: the library loads with every function titan
// calls (cuDNN comes with the toolkit the plugin is built against), and the choice between cuDNN
// and the tiled kernels, case by case with its reason. Its runs on a GPU are cuda_compute_test's.
#include <gtest/gtest.h>

#include <string>

#include "attention_route.h"
#include "cudnn_library.h"
#include "cudnn_sdpa.h"

namespace titan::cuda {
namespace {

TEST(CudnnLibrary, LoadsEveryFunctionTitanCalls) {
  absl::StatusOr<const Cudnn*> cudnn = LoadCudnn();
  ASSERT_TRUE(cudnn.ok()) << cudnn.status();
#define TITAN_EXPECT_BOUND(name) EXPECT_NE((*cudnn)->name, nullptr) << #name;
  TITAN_CUDNN_FUNCTIONS(TITAN_EXPECT_BOUND)
#undef TITAN_EXPECT_BOUND
  EXPECT_EQ((*cudnn)->file.front(), '/') << (*cudnn)->file;
  EXPECT_NE((*cudnn)->file.find("libcudnn.so.9"), std::string::npos) << (*cudnn)->file;
  EXPECT_EQ((*cudnn)->version / 10000, static_cast<size_t>(CUDNN_MAJOR));
  // The status names are cuDNN's own, whether or not a message was left.
  const std::string text = CudnnStatusText(**cudnn, CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(text.rfind("CUDNN_STATUS_NOT_SUPPORTED", 0), 0u) << text;
}

TEST(CudnnLibrary, VersionsReadAsMajorMinorPatch) {
  EXPECT_EQ(CudnnVersionText(91002), "9.10.2");
  EXPECT_EQ(CudnnVersionText(90100), "9.1.0");
}

// Every tensor and operation of both graphs finalizes (cuDNN checks their attributes, types and
// shapes against each other without a device), for the shapes the GPU tests run and the 1B
// flavor's, grouped-query and not.
TEST(CudnnSdpaGraph, EveryOperationFinalizesWithoutADevice) {
  absl::StatusOr<const Cudnn*> cudnn = LoadCudnn();
  ASSERT_TRUE(cudnn.ok()) << cudnn.status();
  for (SdpaDirection direction : {SdpaDirection::kForward, SdpaDirection::kBackward}) {
    for (const SdpaShape& shape : {SdpaShape{2, 128, 4, 2, 64}, SdpaShape{2, 512, 4, 4, 128},
                                   SdpaShape{4, 2048, 32, 8, 64}}) {
      absl::Status built = BuildSdpaOperations(**cudnn, direction, shape);
      EXPECT_TRUE(built.ok()) << built;
    }
    absl::Status wrong = BuildSdpaOperations(**cudnn, direction, SdpaShape{2, 128, 3, 2, 64});
    EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument) << wrong;
  }
}

TEST(AttentionMode, ParsesTheKeysValuesAndNamesAWrongOne) {
  EXPECT_EQ(*ParseAttentionMode("auto"), AttentionMode::kAuto);
  EXPECT_EQ(*ParseAttentionMode("cudnn"), AttentionMode::kCudnn);
  EXPECT_EQ(*ParseAttentionMode("tiled"), AttentionMode::kTiled);
  absl::StatusOr<AttentionMode> wrong = ParseAttentionMode("flash");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("\"flash\""), absl::string_view::npos);
  for (AttentionMode mode : {AttentionMode::kAuto, AttentionMode::kCudnn, AttentionMode::kTiled}) {
    EXPECT_EQ(*ParseAttentionMode(AttentionModeName(mode)), mode);
  }
}

// A bf16 run's 1B-flavor attention on an H200: what cuDNN takes.
AttentionCase Eligible() {
  return AttentionCase{.mode = AttentionMode::kAuto,
                       .bf16_run = true,
                       .capability = 90,
                       .cudnn_loaded = true,
                       .seq_len = 2048,
                       .kv_len = 2048,
                       .head_dim = 64,
                       .q_offset = 0,
                       .kv_offset = 0};
}

// The route is the tiled kernels, for a reason holding `because`.
void ExpectTiled(const AttentionCase& c, const std::string& because) {
  const AttentionRoute route = ChooseAttention(c);
  EXPECT_FALSE(route.cudnn) << because;
  EXPECT_NE(route.reason.find(because), std::string::npos) << route.reason;
}

TEST(ChooseAttention, TakesCudnnWhereItCertainlyApplies) {
  for (int64_t head_dim : {8, 64, 96, 128}) {
    for (int capability : {80, 86, 89, 90, 100}) {
      AttentionCase c = Eligible();
      c.head_dim = head_dim;
      c.capability = capability;
      const AttentionRoute route = ChooseAttention(c);
      EXPECT_TRUE(route.cudnn) << head_dim << " " << capability << ": " << route.reason;
      EXPECT_EQ(route.reason, "");
    }
  }
  AttentionCase forced = Eligible();  // "cudnn" takes it in an f32 run too
  forced.mode = AttentionMode::kCudnn;
  forced.bf16_run = false;
  EXPECT_TRUE(ChooseAttention(forced).cudnn);
  AttentionCase offset = Eligible();  // the same offset on both sides: plain causal
  offset.q_offset = offset.kv_offset = 512;
  EXPECT_TRUE(ChooseAttention(offset).cudnn);
}

TEST(ChooseAttention, KeepsTheTiledKernelsElsewhereAndSaysWhy) {
  AttentionCase c = Eligible();
  c.mode = AttentionMode::kTiled;
  ExpectTiled(c, "job.attention = \"tiled\"");
  c = Eligible();
  c.bf16_run = false;  // auto in an f32 run: the f32 parity holds
  ExpectTiled(c, "an f32 run");
  c = Eligible();
  c.capability = 75;
  ExpectTiled(c, "sm_75");
  c = Eligible();
  c.kv_len = 4096;  // a context-parallel chunk against more keys
  ExpectTiled(c, "context parallelism");
  c = Eligible();
  c.q_offset = 2048;  // a later chunk of queries against the first of keys
  ExpectTiled(c, "context parallelism");
  for (int64_t head_dim : {4, 60, 100, 136, 192, 256}) {
    c = Eligible();
    c.head_dim = head_dim;
    ExpectTiled(c, "head_dim " + std::to_string(head_dim));
  }
  c = Eligible();
  c.seq_len = c.kv_len = 0;
  ExpectTiled(c, "no queries");
  c = Eligible();
  c.cudnn_loaded = false;
  ExpectTiled(c, "cuDNN did not load");
  c.mode = AttentionMode::kCudnn;  // forcing it does not make a missing cuDNN run
  ExpectTiled(c, "cuDNN did not load");
}

}  // namespace
}  // namespace titan::cuda
