// The safetensors plugin's Qwen3 and Qwen3-MoE layouts against Hugging Face's models
// (hf_qwen3_reference.py: transformers' Qwen3ForCausalLM and Qwen3MoeForCausalLM written out in
// torch), both ways, in f32 (hf_reference_fixture.h): titan's export holds exactly the tensors
// transformers' model has and gives titan's logits within 1e-5 relative error; and a model made
// in transformers' layout (its config.json, two files and an index) imports into titan, which then
// gives its logits within 1e-5. Tied and untied, QK-norm with heads apart from dim / n_heads,
// experts with a dense first layer. With bench/torch-venv made, transformers itself checks both
// folders too.
#include "tests/reference/hf_reference_fixture.h"

namespace titan {
namespace {

using checkpoint_testing::SmallQwen3Config;
using reference::HfCase;

std::vector<HfCase> Cases() {
  LlamaConfig tied = SmallQwen3Config();
  tied.tie_embeddings = true;
  return {{"qwen3", SmallQwen3Config(), ""},
          {"qwen3_tied", tied, ""},
          {"qwen3_moe", SmallQwen3Config(/*experts=*/true, /*dense_layers=*/1), ""}};
}

class HfQwen3ReferenceTest : public reference::HfReferenceTest {
 protected:
  HfQwen3ReferenceTest() : HfReferenceTest("hf_qwen3_reference.py", Qwen3Family()) {}
};

TEST_F(HfQwen3ReferenceTest, ExportsAndImportsMatchHuggingFaceLogits) {
  ExpectExportsAndImportsMatch(Cases());
}

// Into Qwen3ForCausalLM and Qwen3MoeForCausalLM, and transformers 5's config keys back.
TEST_F(HfQwen3ReferenceTest, TransformersItselfLoadsBothWaysAndAgrees) {
  ExpectTransformersAgree(Cases());
}

}  // namespace
}  // namespace titan
