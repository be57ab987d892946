#include "core/model/llama.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/tensor/arena_file.h"
#include "core/tensor/cross_entropy.h"
#include "core/tensor/embedding.h"
#include "core/tensor/matmul.h"
#include "core/tensor/rmsnorm.h"
#include "core/tensor/rope.h"
#include "core/tensor/swiglu.h"

namespace titan {
namespace {

void Zero(float* x, int64_t n) { std::memset(x, 0, n * sizeof(float)); }

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const LlamaConfig& config,
                                                               const ActivationCheckpoint& ac) {
  TITAN_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, ac));
  const int64_t d = config.dim, kv = config.n_kv_heads * config.head_dim(), f = config.hidden_dim();
  ArenaPlan plan;
  TITAN_ASSIGN_OR_RETURN(model->tok_embeddings_,
                         plan.Add("tok_embeddings.weight", {config.vocab_size, d}));
  for (int64_t l = 0; l < config.n_layers; ++l) {
    const std::string prefix = absl::StrCat("layers.", l, ".");
    Block block{{}, ac.PolicyFor(l)};
    const struct {
      Weight weight;
      const char* name;
      std::vector<int64_t> shape;
    } weights[] = {{kAttentionNorm, "attention_norm", {d}}, {kWq, "attention.wq", {d, d}},
                   {kWk, "attention.wk", {kv, d}},          {kWv, "attention.wv", {kv, d}},
                   {kWo, "attention.wo", {d, d}},           {kFfnNorm, "ffn_norm", {d}},
                   {kW1, "feed_forward.w1", {f, d}},        {kW2, "feed_forward.w2", {d, f}},
                   {kW3, "feed_forward.w3", {f, d}}};
    for (const auto& w : weights) {
      TITAN_ASSIGN_OR_RETURN(block.weights[w.weight],
                             plan.Add(absl::StrCat(prefix, w.name, ".weight"), w.shape));
    }
    model->blocks_.push_back(block);
  }
  TITAN_ASSIGN_OR_RETURN(model->norm_, plan.Add("norm.weight", {d}));
  if (config.tie_embeddings) {
    model->output_ = model->tok_embeddings_;
  } else {
    TITAN_ASSIGN_OR_RETURN(model->output_, plan.Add("output.weight", {config.vocab_size, d}));
  }
  TITAN_ASSIGN_OR_RETURN(model->params_, Arena::Allocate(plan));
  TITAN_ASSIGN_OR_RETURN(model->grads_, Arena::Allocate(plan));
  model->plan_ = std::move(plan);
  for (int i = 0; i < model->params_.size(); ++i) {
    Parameter p;
    p.name = model->params_.name(i);
    p.full_shape = model->params_.at(i).shape();
    p.value = model->params_.at(i).view();
    p.grad = model->grads_.at(i).view();
    model->parameters_.push_back(std::move(p));
  }
  // Parameters are added in arena order, so each module's own parameters stay in model order.
  auto& parameters = model->parameters_;
  model->root_.AddParameter(&parameters[model->tok_embeddings_]);
  for (int64_t l = 0; l < config.n_layers; ++l) {
    auto layer = std::make_unique<ModuleNode>(absl::StrCat("layers.", l));
    for (int index : model->blocks_[l].weights) layer->AddParameter(&parameters[index]);
    model->root_.AddChild(layer.get());
    model->layer_modules_.push_back(std::move(layer));
  }
  model->root_.AddParameter(&parameters[model->norm_]);
  if (!config.tie_embeddings) model->root_.AddParameter(&parameters[model->output_]);
  return model;
}

void LlamaModel::ReleaseUnusedStorage() {
  auto points_into = [](const Arena& arena, const TensorView& view) {
    const float* begin = arena.flat_data();
    const float* data = view.data_as<const float>();
    return begin != nullptr && data >= begin && data < begin + arena.flat_size();
  };
  bool values_used = false, grads_used = false;
  for (const Parameter& p : parameters_) {
    values_used = values_used || points_into(params_, p.value);
    grads_used = grads_used || points_into(grads_, p.grad);
  }
  if (!values_used) params_ = Arena();
  if (!grads_used) grads_ = Arena();
}

absl::Status LlamaModel::SaveParameters(const std::string& path) const {
  TITAN_ASSIGN_OR_RETURN(Arena copy, Arena::Allocate(plan_));
  for (int i = 0; i < copy.size(); ++i) {
    if (parameters_[i].value.data == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "saving ", path, ": parameter ", parameters_[i].name, " is sharded; unshard it first"));
    }
    std::memcpy(copy.at(i).data<float>(), parameters_[i].value.data, copy.at(i).nbytes());
  }
  return WriteArena(copy, path);
}

void LlamaModel::ZeroGrad() { Zero(grads_.flat_data(), grads_.flat_size()); }

absl::Status LlamaModel::PlanActivations(int64_t batch, int64_t seq_len) {
  if (batch == batch_ && seq_len == seq_len_) return absl::OkStatus();
  const LlamaConfig& c = config_;
  const int64_t n = batch * seq_len, d = c.dim, f = c.hidden_dim();
  const int64_t qd = c.n_heads * c.head_dim(), kvd = c.n_kv_heads * c.head_dim();
  const int64_t lse = batch * c.n_heads * seq_len;
  // Each block activation belongs to the stage that writes it.
  const struct {
    float* BlockActs::*field;
    const char* name;
    int64_t size;
    BlockStage stage;
  } fields[] = {
      {&BlockActs::ln1, "ln1", n * d, BlockStage::kAttentionNorm},
      {&BlockActs::rstd1, "rstd1", n, BlockStage::kAttentionNorm},
      {&BlockActs::q, "q", n * qd, BlockStage::kQkv},
      {&BlockActs::k, "k", n * kvd, BlockStage::kQkv},
      {&BlockActs::v, "v", n * kvd, BlockStage::kQkv},
      {&BlockActs::att, "att", n * qd, BlockStage::kAttention},
      {&BlockActs::lse, "lse", lse, BlockStage::kAttention},
      {&BlockActs::x_mid, "x_mid", n * d, BlockStage::kAttentionOut},
      {&BlockActs::ln2, "ln2", n * d, BlockStage::kFfnNorm},
      {&BlockActs::rstd2, "rstd2", n, BlockStage::kFfnNorm},
      {&BlockActs::a, "a", n * f, BlockStage::kGateUp},
      {&BlockActs::b, "b", n * f, BlockStage::kGateUp},
      {&BlockActs::h, "h", n * f, BlockStage::kSwiGlu},
  };
  ArenaPlan plan;
  std::vector<std::vector<std::string>> slot_names(c.n_layers);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    for (const auto& field : fields) {
      std::string name = KeepsStage(blocks_[l].policy, field.stage)
                             ? absl::StrCat("layers.", l, ".", field.name)
                             : absl::StrCat("recompute.", field.name);
      if (!plan.Add(name, {field.size}).ok() && name.rfind("recompute.", 0) != 0) {
        return absl::InternalError(absl::StrCat("activation plan: '", name, "' twice"));
      }
      slot_names[l].push_back(std::move(name));
    }
  }
  for (int64_t l = 0; l <= c.n_layers; ++l) {
    TITAN_RETURN_IF_ERROR(plan.Add(absl::StrCat("residual.", l), {n, d}).status());
  }
  const int64_t half = c.head_dim() / 2;
  const struct {
    float** slot;
    const char* name;
    int64_t size;
  } singles[] = {
      {&rope_cos_, "rope_cos", seq_len * half},
      {&rope_sin_, "rope_sin", seq_len * half},
      {&final_norm_, "final_norm", n * d},
      {&final_rstd_, "final_rstd", n},
      {&logits_, "logits", n * c.vocab_size},
      {&loss_lse_, "loss_lse", n},
      {&d_residual_, "d_residual", n * d},
      {&d_norm_out_, "d_norm_out", n * d},
      {&d_att_, "d_att", n * qd},
      {&d_q_, "d_q", n * qd},
      {&d_k_, "d_k", n * kvd},
      {&d_v_, "d_v", n * kvd},
      {&d_h_, "d_h", n * f},
      {&d_a_, "d_a", n * f},
      {&d_b_, "d_b", n * f},
  };
  for (const auto& single : singles)
    TITAN_RETURN_IF_ERROR(plan.Add(single.name, {single.size}).status());
  TITAN_ASSIGN_OR_RETURN(acts_arena_, Arena::Allocate(plan));

  auto pointer = [&](absl::string_view name) { return acts_arena_.Find(name)->data<float>(); };
  acts_.assign(c.n_layers, BlockActs{});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    for (size_t i = 0; i < std::size(fields); ++i)
      acts_[l].*fields[i].field = pointer(slot_names[l][i]);
  }
  residual_.clear();
  for (int64_t l = 0; l <= c.n_layers; ++l)
    residual_.push_back(pointer(absl::StrCat("residual.", l)));
  for (const auto& single : singles) *single.slot = pointer(single.name);
  RopeTable(rope_cos_, rope_sin_, seq_len, c.head_dim(), c.rope);
  attention_shape_ = {batch, seq_len, c.n_heads, c.n_kv_heads, c.head_dim()};
  batch_ = batch;
  seq_len_ = seq_len;
  return absl::OkStatus();
}

absl::Status LlamaModel::CheckTokens(const int32_t* tokens, const int32_t* targets) const {
  const int64_t n = batch_ * seq_len_;
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("model input: expected token ids in [0, ",
                                                     config_.vocab_size, "), found ", tokens[i],
                                                     " at position ", i));
    }
    if (targets[i] != kIgnoreIndex && (targets[i] < 0 || targets[i] >= config_.vocab_size)) {
      return absl::InvalidArgumentError(absl::StrCat("model targets: expected ids in [0, ",
                                                     config_.vocab_size, ") or ", kIgnoreIndex,
                                                     ", found ", targets[i], " at position ", i));
    }
  }
  return absl::OkStatus();
}

void LlamaModel::BlockForward(int64_t layer, bool recompute) {
  const LlamaConfig& c = config_;
  const Block& block = blocks_[layer];
  const BlockActs& x = acts_[layer];
  const int64_t n = batch_ * seq_len_, d = c.dim, f = c.hidden_dim();
  const int64_t qd = c.n_heads * c.head_dim(), kvd = c.n_kv_heads * c.head_dim();
  auto run = [&](BlockStage stage) { return !recompute || !KeepsStage(block.policy, stage); };
  auto w = [&](Weight weight) { return Param(block.weights[weight]); };
  const float* in = residual_[layer];
  if (run(BlockStage::kAttentionNorm)) {
    RmsNormForward(x.ln1, x.rstd1, in, w(kAttentionNorm), n, d, c.norm_eps);
  }
  if (run(BlockStage::kQkv)) {
    MatmulForward(x.q, x.ln1, w(kWq), n, d, qd);
    MatmulForward(x.k, x.ln1, w(kWk), n, d, kvd);
    MatmulForward(x.v, x.ln1, w(kWv), n, d, kvd);
    RopeForward(x.q, rope_cos_, rope_sin_, batch_, seq_len_, c.n_heads, c.head_dim());
    RopeForward(x.k, rope_cos_, rope_sin_, batch_, seq_len_, c.n_kv_heads, c.head_dim());
  }
  if (run(BlockStage::kAttention)) AttentionForward(x.att, x.lse, x.q, x.k, x.v, attention_shape_);
  if (run(BlockStage::kAttentionOut)) {
    std::memcpy(x.x_mid, in, n * d * sizeof(float));
    MatmulForward(x.x_mid, x.att, w(kWo), n, qd, d, /*accumulate=*/true);
  }
  if (run(BlockStage::kFfnNorm))
    RmsNormForward(x.ln2, x.rstd2, x.x_mid, w(kFfnNorm), n, d, c.norm_eps);
  if (run(BlockStage::kGateUp)) {
    MatmulForward(x.a, x.ln2, w(kW1), n, d, f);
    MatmulForward(x.b, x.ln2, w(kW3), n, d, f);
  }
  if (run(BlockStage::kSwiGlu)) SwiGluForward(x.h, x.a, x.b, n * f);
  if (!recompute) {
    std::memcpy(residual_[layer + 1], x.x_mid, n * d * sizeof(float));
    MatmulForward(residual_[layer + 1], x.h, w(kW2), n, f, d, /*accumulate=*/true);
  }
}

absl::StatusOr<float> LlamaModel::Forward(const int32_t* tokens, const int32_t* targets,
                                          int64_t batch, int64_t seq_len) {
  if (batch <= 0 || seq_len <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("model input: expected a positive batch and ",
                                                   "seq_len, found ", batch, " x ", seq_len));
  }
  TITAN_RETURN_IF_ERROR(PlanActivations(batch, seq_len));
  TITAN_RETURN_IF_ERROR(CheckTokens(tokens, targets));
  const int64_t n = batch * seq_len, d = config_.dim;
  tokens_.assign(tokens, tokens + n);
  tokens_valid_ = true;
  targets_.assign(targets, targets + n);
  TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  EmbeddingForward(residual_[0], tokens, Param(tok_embeddings_), n, d);
  TITAN_RETURN_IF_ERROR(ForwardLayers());
  RmsNormForward(final_norm_, final_rstd_, residual_.back(), Param(norm_), n, d, config_.norm_eps);
  MatmulForward(logits_, final_norm_, Param(output_), n, d, config_.vocab_size);
  const float loss = CrossEntropyForward(loss_lse_, logits_, targets, n, config_.vocab_size);
  TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return loss;
}

absl::Status LlamaModel::ForwardLayers() {
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->BeforeForward());
    BlockForward(l, /*recompute=*/false);
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->AfterForward());
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::BackwardLayers() {
  for (int64_t l = config_.n_layers - 1; l >= 0; --l) {
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->BeforeBackward());
    BlockBackward(l);
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->AfterBackward());
  }
  return absl::OkStatus();
}

// The gradient of the residual stream flows through d_residual_, which each block updates in
// place: the skip connections pass it through unchanged and the branches add to it.
void LlamaModel::BlockBackward(int64_t layer) {
  const LlamaConfig& c = config_;
  const Block& block = blocks_[layer];
  const BlockActs& x = acts_[layer];
  const int64_t n = batch_ * seq_len_, d = c.dim, f = c.hidden_dim();
  const int64_t qd = c.n_heads * c.head_dim(), kvd = c.n_kv_heads * c.head_dim();
  auto w = [&](Weight weight) { return Param(block.weights[weight]); };
  auto dw = [&](Weight weight) { return Grad(block.weights[weight]); };
  if (block.policy != BlockPolicy::kKeepAll) BlockForward(layer, /*recompute=*/true);

  Zero(d_h_, n * f);
  MatmulBackward(d_h_, dw(kW2), d_residual_, x.h, w(kW2), n, f, d);
  Zero(d_a_, n * f);
  Zero(d_b_, n * f);
  SwiGluBackward(d_a_, d_b_, d_h_, x.a, x.b, n * f);
  Zero(d_norm_out_, n * d);
  MatmulBackward(d_norm_out_, dw(kW1), d_a_, x.ln2, w(kW1), n, d, f);
  MatmulBackward(d_norm_out_, dw(kW3), d_b_, x.ln2, w(kW3), n, d, f);
  RmsNormBackward(d_residual_, dw(kFfnNorm), d_norm_out_, x.x_mid, w(kFfnNorm), x.rstd2, n, d);

  Zero(d_att_, n * qd);
  MatmulBackward(d_att_, dw(kWo), d_residual_, x.att, w(kWo), n, qd, d);
  Zero(d_q_, n * qd);
  Zero(d_k_, n * kvd);
  Zero(d_v_, n * kvd);
  AttentionBackward(d_q_, d_k_, d_v_, d_att_, x.q, x.k, x.v, x.att, x.lse, attention_shape_);
  RopeBackward(d_q_, rope_cos_, rope_sin_, batch_, seq_len_, c.n_heads, c.head_dim());
  RopeBackward(d_k_, rope_cos_, rope_sin_, batch_, seq_len_, c.n_kv_heads, c.head_dim());
  Zero(d_norm_out_, n * d);
  MatmulBackward(d_norm_out_, dw(kWq), d_q_, x.ln1, w(kWq), n, d, qd);
  MatmulBackward(d_norm_out_, dw(kWk), d_k_, x.ln1, w(kWk), n, d, kvd);
  MatmulBackward(d_norm_out_, dw(kWv), d_v_, x.ln1, w(kWv), n, d, kvd);
  RmsNormBackward(d_residual_, dw(kAttentionNorm), d_norm_out_, residual_[layer], w(kAttentionNorm),
                  x.rstd1, n, d);
}

absl::Status LlamaModel::Backward() {
  if (!tokens_valid_) {
    return absl::FailedPreconditionError("model: Backward needs a Forward first");
  }
  const int64_t n = batch_ * seq_len_, d = config_.dim, v = config_.vocab_size;
  float* d_logits = logits_;  // the logits are spent: their gradient takes their place
  tokens_valid_ = false;
  TITAN_RETURN_IF_ERROR(root_.BeforeBackward());
  CrossEntropyBackward(d_logits, logits_, loss_lse_, targets_.data(), n, v, 1.0f);
  Zero(d_norm_out_, n * d);
  MatmulBackward(d_norm_out_, Grad(output_), d_logits, final_norm_, Param(output_), n, d, v);
  Zero(d_residual_, n * d);
  RmsNormBackward(d_residual_, Grad(norm_), d_norm_out_, residual_.back(), Param(norm_),
                  final_rstd_, n, d);
  TITAN_RETURN_IF_ERROR(BackwardLayers());
  EmbeddingBackward(Grad(tok_embeddings_), d_residual_, tokens_.data(), n, d);
  return root_.AfterBackward();
}

}  // namespace titan
