// The safetensors plugin's DeepSeek-V3 layout against Hugging Face's model
// (hf_deepseek_v3_reference.py: transformers' DeepseekV3ForCausalLM written out in torch), both
// ways, in f32 (hf_reference_fixture.h): titan's export of the debug flavors (low-rank and plain
// queries, YaRN, norm_eps 1e-5 where transformers' latent norms keep 1e-6, a dense first layer,
// grouped sigmoid routing with a bias, shared experts, a route scale) holds exactly the tensors
// transformers' model has and gives titan's logits within 1e-5 relative error; and a model made
// in transformers' layout (DeepSeek's own config.json form, rope_interleave true and false, two
// files and an index) imports into titan, which then gives its logits within 1e-5.
#include <cmath>

#include "tests/reference/hf_reference_fixture.h"

namespace titan {
namespace {

using reference::HfCase;

// The debug flavors; the script makes the model in transformers' layout with rope_interleave
// as each case says.
std::vector<HfCase> Cases() {
  return {{"debugmodel", *DeepSeekV3Family().Flavor("debugmodel"), "hf_made_rope_interleave 0\n"},
          {"debugmodel_plain_q", *DeepSeekV3Family().Flavor("debugmodel_plain_q"),
           "hf_made_rope_interleave 1\n"}};
}

class HfDeepseekV3ReferenceTest : public reference::HfReferenceTest {
 protected:
  HfDeepseekV3ReferenceTest()
      : HfReferenceTest("hf_deepseek_v3_reference.py", DeepSeekV3Family()) {}

  // SmallModel's values, with the router's logits of order 1 (sigmoid scores of far larger ones
  // would all be near 1, too close to choose by); the experts' bias small and positive: it
  // changes the choice, and every chosen expert's score stays positive (transformers masks the
  // groups passed over with 0, titan leaves them out); and the latents before q_norm and kv_norm
  // small, their mean square near norm_eps, so that transformers' latent norms' epsilon of 1e-6
  // would show if the export did not make up for it.
  std::unique_ptr<DecoderModel> Model(const LlamaConfig& config, uint64_t seed) override {
    auto model = HfReferenceTest::Model(config, seed);
    const Arena& params = model->params();
    const int64_t latent = config.mla.kv_lora_rank * config.dim;  // wkv_a's rows before k_pe
    for (int i = 0; i < params.size(); ++i) {
      const std::string& name = params.name(i);
      const bool router = name.find(".router.") != std::string::npos;
      const bool bias = name.find("expert_bias") != std::string::npos;
      const bool q_a = name.find(".wq_a.") != std::string::npos;
      const bool kv_a = name.find(".wkv_a.") != std::string::npos;
      float* w = params.at(i).data<float>();
      for (int64_t j = 0; j < params.at(i).numel(); ++j) {
        if (router) w[j] /= 8.0f;
        if (bias) w[j] = 0.02f * (1.0f + std::sin(3.0f * static_cast<float>(j + i)));
        if (q_a || (kv_a && j < latent)) w[j] *= 0.01f;
      }
    }
    return model;
  }
};

// The experts' bias comes from e_score_correction_bias on import.
TEST_F(HfDeepseekV3ReferenceTest, ExportsAndImportsMatchHuggingFaceLogits) {
  ExpectExportsAndImportsMatch(Cases());
}

// Into DeepseekV3ForCausalLM, from transformers' and DeepSeek's layouts, and back.
TEST_F(HfDeepseekV3ReferenceTest, TransformersItselfLoadsBothWaysAndAgrees) {
  ExpectTransformersAgree(Cases());
}

}  // namespace
}  // namespace titan
