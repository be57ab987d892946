#include "tools/checkpoint/checkpoint_tool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace titan {
namespace {

using ::testing::HasSubstr;

TEST(CheckpointTool, HumanBytes) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1024), "1.0 KiB");
  EXPECT_EQ(HumanBytes(1536 * 1024), "1.5 MiB");
  EXPECT_EQ(HumanBytes(int64_t{16} << 30), "16.0 GiB");
  EXPECT_EQ(HumanBytes(int64_t{3} << 40), "3.0 TiB");
}

// Layers in numeric order, a column per field, totals in bytes; a checkpoint without
// train.step says so.
TEST(CheckpointTool, ListingOrdersLayersByNumber) {
  CheckpointContents contents;
  for (const char* name : {"model/tok_embeddings.weight", "model/layers.10.ffn_norm.weight",
                           "model/layers.2.ffn_norm.weight", "optimizer/exp_avg/norm.weight"}) {
    contents.tensors.push_back({name, {3, 4}, DType::kBF16});
  }
  contents.metadata = {{"model.dim", "4"}};
  EXPECT_EQ(FormatListing("/ckpt", "dcp", contents),
            "/ckpt: dcp checkpoint, no step recorded\n"
            "tensor                           shape   dtype  size\n"
            "model/layers.2.ffn_norm.weight   [3, 4]  bf16   24 B\n"
            "model/layers.10.ffn_norm.weight  [3, 4]  bf16   24 B\n"
            "model/tok_embeddings.weight      [3, 4]  bf16   24 B\n"
            "optimizer/exp_avg/norm.weight    [3, 4]  bf16   24 B\n"
            "4 tensors, 48 values, 96 B (96 bytes)\n"
            "metadata:\n"
            "  model.dim = 4\n");
  contents.metadata["train.step"] = "7";
  EXPECT_THAT(FormatListing("/ckpt", "dcp", contents), HasSubstr("dcp checkpoint, step 7\n"));
}

}  // namespace
}  // namespace titan
