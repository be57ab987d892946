#include "core/model/llama.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  ArenaPlan plan;
  std::vector<int> indices;
  for (const auto& [name, shape] : ParameterShapes(config, 1)) {
    TITAN_ASSIGN_OR_RETURN(int index, plan.Add(name, shape));
    indices.push_back(index);
  }
  // Arena order: tok_embeddings, each block's weights in Weight order, norm, output.
  auto next = indices.begin();
  model->tok_embeddings_ = *next++;
  for (int64_t l = 0; l < config.n_layers; ++l) {
    Block block{{}, ac.PolicyFor(l)};
    for (int& index : block.weights) index = *next++;
    model->blocks_.push_back(block);
  }
  model->norm_ = *next++;
  model->output_ = config.tie_embeddings ? model->tok_embeddings_ : *next++;
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
  model->root_.set_tensor_parallel_target(model.get());
  return model;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> LlamaModel::ParameterShapes(
    const LlamaConfig& c, int64_t tp) {
  const int64_t d = c.dim, hd = c.head_dim(), f = c.hidden_dim() / tp, v = c.vocab_size / tp;
  const int64_t qd = c.n_heads / tp * hd, kvd = c.n_kv_heads / tp * hd;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"tok_embeddings.weight", {v, d}}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string prefix = absl::StrCat("layers.", l, ".");
    // In Weight order.
    const std::pair<const char*, std::vector<int64_t>> weights[] = {
        {"attention_norm", {d}},     {"attention.wq", {qd, d}},   {"attention.wk", {kvd, d}},
        {"attention.wv", {kvd, d}},  {"attention.wo", {d, qd}},   {"ffn_norm", {d}},
        {"feed_forward.w1", {f, d}}, {"feed_forward.w2", {d, f}}, {"feed_forward.w3", {f, d}}};
    for (const auto& [name, shape] : weights)
      shapes.emplace_back(absl::StrCat(prefix, name, ".weight"), shape);
  }
  shapes.push_back({"norm.weight", {d}});
  if (!c.tie_embeddings) shapes.push_back({"output.weight", {v, d}});
  return shapes;
}

LlamaModel::LocalSizes LlamaModel::local() const {
  const int64_t t = tp_.size(), vocab = config_.vocab_size / t;
  return {config_.n_heads / t, config_.n_kv_heads / t, config_.hidden_dim() / t, vocab,
          vocab * tp_.rank()};
}

absl::Status LlamaModel::CheckTensorParallelDegree(int degree) const {
  return titan::CheckTensorParallelDegree(config_, degree);
}

absl::Status LlamaModel::SetTensorParallel(const TensorParallelLayout& layout) {
  const TensorParallelGroup tp(layout.group);
  const int t = tp.size();
  const LlamaConfig& c = config_;
  TITAN_RETURN_IF_ERROR(CheckTensorParallelDegree(t));
  const auto shapes = ParameterShapes(c, t);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Parameter& p = parameters_[i];
    if (p.value.shape != shapes[i].second || p.grad.shape != shapes[i].second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor parallel degree ", t, ": expected parameter ", p.name, " to hold [",
                       absl::StrJoin(shapes[i].second, ", "), "], found [",
                       absl::StrJoin(p.value.shape, ", "), "]"));
    }
  }
  tp_ = tp;
  batch_ = seq_len_ = 0;  // the activations' sizes change with the degree
  tokens_valid_ = false;
  return absl::OkStatus();
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
  const int64_t t = tp_.size();
  if (seq_len % t != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input: sequence parallel over ", t, " tensor-parallel ranks expected ",
                     "seq_len divisible by ", t, ", found ", seq_len));
  }
  const LocalSizes local = this->local();
  // n: every token of the batch, as the column-parallel projections see them; nl: this rank's.
  const int64_t n = batch * seq_len, nl = n / t, d = c.dim, f = local.hidden;
  const int64_t qd = local.heads * c.head_dim(), kvd = local.kv_heads * c.head_dim();
  const int64_t lse = batch * local.heads * seq_len;
  // Each block activation belongs to the stage that writes it.
  const struct {
    float* BlockActs::*field;
    const char* name;
    int64_t size;
    BlockStage stage;
  } fields[] = {
      {&BlockActs::ln1, "ln1", n * d, BlockStage::kAttentionNorm},
      {&BlockActs::rstd1, "rstd1", nl, BlockStage::kAttentionNorm},
      {&BlockActs::q, "q", n * qd, BlockStage::kQkv},
      {&BlockActs::k, "k", n * kvd, BlockStage::kQkv},
      {&BlockActs::v, "v", n * kvd, BlockStage::kQkv},
      {&BlockActs::att, "att", n * qd, BlockStage::kAttention},
      {&BlockActs::lse, "lse", lse, BlockStage::kAttention},
      {&BlockActs::x_mid, "x_mid", nl * d, BlockStage::kAttentionOut},
      {&BlockActs::ln2, "ln2", n * d, BlockStage::kFfnNorm},
      {&BlockActs::rstd2, "rstd2", nl, BlockStage::kFfnNorm},
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
    TITAN_RETURN_IF_ERROR(plan.Add(absl::StrCat("residual.", l), {nl, d}).status());
  }
  const int64_t half = c.head_dim() / 2;
  struct Single {
    float** slot;
    const char* name;
    int64_t size;
  };
  std::vector<Single> singles = {
      {&rope_cos_, "rope_cos", seq_len * half},
      {&rope_sin_, "rope_sin", seq_len * half},
      {&final_norm_, "final_norm", n * d},
      {&final_rstd_, "final_rstd", nl},
      {&logits_, "logits", n * local.vocab},
      {&loss_lse_, "loss_lse", n},
      {&loss_max_, "loss_max", n},
      {&loss_target_, "loss_target", n},
      {&d_residual_, "d_residual", nl * d},
      {&d_norm_out_, "d_norm_out", n * d},
      {&d_att_, "d_att", n * qd},
      {&d_q_, "d_q", n * qd},
      {&d_k_, "d_k", n * kvd},
      {&d_v_, "d_v", n * kvd},
      {&d_h_, "d_h", n * f},
      {&d_a_, "d_a", n * f},
      {&d_b_, "d_b", n * f},
  };
  tokens_local_ = tokens_full_ = norm_grad_ = nullptr;
  if (t > 1) {
    singles.push_back({&tokens_local_, "tokens_local", nl * d});
    singles.push_back({&tokens_full_, "tokens_full", n * d});
    singles.push_back({&norm_grad_, "norm_grad", d});
  }
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
  attention_shape_ = {batch, seq_len, local.heads, local.kv_heads, c.head_dim()};
  batch_ = batch;
  seq_len_ = seq_len;
  n_local_ = nl;
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

absl::Status LlamaModel::NormAndGather(float* out, float* rstd, const float* inp, int weight) {
  const int64_t d = config_.dim;
  float* local = tp_.size() > 1 ? tokens_local_ : out;
  RmsNormForward(local, rstd, inp, Param(weight), n_local_, d, config_.norm_eps);
  return tp_.GatherTokens(local, out, n_local_, d).status();
}

absl::Status LlamaModel::AddRowParallel(float* out, const float* in, const float* weight,
                                        int64_t k) {
  const int64_t n = batch_ * seq_len_, d = config_.dim;
  if (tp_.size() == 1) {
    MatmulForward(out, in, weight, n, k, d, /*accumulate=*/true);
    return absl::OkStatus();
  }
  MatmulForward(tokens_full_, in, weight, n, k, d);
  TITAN_ASSIGN_OR_RETURN(const float* reduced,
                         tp_.ReduceScatterTokens(tokens_full_, tokens_local_, n_local_, d));
  for (int64_t i = 0; i < n_local_ * d; ++i) out[i] += reduced[i];
  return absl::OkStatus();
}

absl::Status LlamaModel::NormBackward(float* d_residual, float* d_out_full, const float* inp,
                                      const float* rstd, int weight) {
  const int64_t d = config_.dim;
  TITAN_ASSIGN_OR_RETURN(const float* d_out,
                         tp_.ReduceScatterTokens(d_out_full, tokens_local_, n_local_, d));
  if (tp_.size() == 1) {
    RmsNormBackward(d_residual, Grad(weight), d_out, inp, Param(weight), rstd, n_local_, d);
    return absl::OkStatus();
  }
  // Accumulated apart and summed over the ranks first: the gradient may already hold earlier
  // microbatches' sums, which must not be summed again.
  Zero(norm_grad_, d);
  RmsNormBackward(d_residual, norm_grad_, d_out, inp, Param(weight), rstd, n_local_, d);
  TITAN_RETURN_IF_ERROR(tp_.AllReduceSum(norm_grad_, d));
  float* grad = Grad(weight);
  for (int64_t i = 0; i < d; ++i) grad[i] += norm_grad_[i];
  return absl::OkStatus();
}

absl::Status LlamaModel::BlockForward(int64_t layer, bool recompute) {
  const LlamaConfig& c = config_;
  const LocalSizes local = this->local();
  const Block& block = blocks_[layer];
  const BlockActs& x = acts_[layer];
  const int64_t n = batch_ * seq_len_, nl = n_local_, d = c.dim, f = local.hidden;
  const int64_t qd = local.heads * c.head_dim(), kvd = local.kv_heads * c.head_dim();
  auto run = [&](BlockStage stage) { return !recompute || !KeepsStage(block.policy, stage); };
  auto w = [&](Weight weight) { return Param(block.weights[weight]); };
  const float* in = residual_[layer];
  if (run(BlockStage::kAttentionNorm)) {
    TITAN_RETURN_IF_ERROR(NormAndGather(x.ln1, x.rstd1, in, block.weights[kAttentionNorm]));
  }
  if (run(BlockStage::kQkv)) {
    MatmulForward(x.q, x.ln1, w(kWq), n, d, qd);
    MatmulForward(x.k, x.ln1, w(kWk), n, d, kvd);
    MatmulForward(x.v, x.ln1, w(kWv), n, d, kvd);
    RopeForward(x.q, rope_cos_, rope_sin_, batch_, seq_len_, local.heads, c.head_dim());
    RopeForward(x.k, rope_cos_, rope_sin_, batch_, seq_len_, local.kv_heads, c.head_dim());
  }
  if (run(BlockStage::kAttention)) AttentionForward(x.att, x.lse, x.q, x.k, x.v, attention_shape_);
  if (run(BlockStage::kAttentionOut)) {
    std::memcpy(x.x_mid, in, nl * d * sizeof(float));
    TITAN_RETURN_IF_ERROR(AddRowParallel(x.x_mid, x.att, w(kWo), qd));
  }
  if (run(BlockStage::kFfnNorm)) {
    TITAN_RETURN_IF_ERROR(NormAndGather(x.ln2, x.rstd2, x.x_mid, block.weights[kFfnNorm]));
  }
  if (run(BlockStage::kGateUp)) {
    MatmulForward(x.a, x.ln2, w(kW1), n, d, f);
    MatmulForward(x.b, x.ln2, w(kW3), n, d, f);
  }
  if (run(BlockStage::kSwiGlu)) SwiGluForward(x.h, x.a, x.b, n * f);
  if (!recompute) {
    std::memcpy(residual_[layer + 1], x.x_mid, nl * d * sizeof(float));
    TITAN_RETURN_IF_ERROR(AddRowParallel(residual_[layer + 1], x.h, w(kW2), f));
  }
  return absl::OkStatus();
}

absl::StatusOr<float> LlamaModel::Forward(const int32_t* tokens, const int32_t* targets,
                                          int64_t batch, int64_t seq_len) {
  if (batch <= 0 || seq_len <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("model input: expected a positive batch and ",
                                                   "seq_len, found ", batch, " x ", seq_len));
  }
  TITAN_RETURN_IF_ERROR(PlanActivations(batch, seq_len));
  TITAN_RETURN_IF_ERROR(CheckTokens(tokens, targets));
  const LocalSizes local = this->local();
  const int64_t n = batch * seq_len, d = config_.dim;
  tokens_.assign(tokens, tokens + n);
  tokens_valid_ = true;
  targets_.assign(targets, targets + n);
  TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  // Vocabulary-parallel embedding: each rank looks up the tokens its rows hold (zeros for the
  // others) and the reduce-scatter both sums the ranks' rows and splits the sequence.
  float* embedded = tp_.size() > 1 ? tokens_full_ : residual_[0];
  EmbeddingForward(embedded, tokens, Param(tok_embeddings_), n, d, local.first_vocab, local.vocab);
  TITAN_RETURN_IF_ERROR(tp_.ReduceScatterTokens(embedded, residual_[0], n_local_, d).status());
  TITAN_RETURN_IF_ERROR(ForwardLayers());
  TITAN_RETURN_IF_ERROR(NormAndGather(final_norm_, final_rstd_, residual_.back(), norm_));
  MatmulForward(logits_, final_norm_, Param(output_), n, d, local.vocab);
  // Loss parallel: the ranks share each row's max, sum of exponentials and target logit, never
  // the logits themselves.
  CrossEntropyRowMax(loss_max_, logits_, n, local.vocab);
  TITAN_RETURN_IF_ERROR(tp_.AllReduceMax(loss_max_, n));
  CrossEntropySumExp(loss_lse_, logits_, loss_max_, n, local.vocab);
  CrossEntropyTargetLogit(loss_target_, logits_, targets, n, local.vocab, local.first_vocab);
  TITAN_RETURN_IF_ERROR(tp_.AllReduceSum(loss_lse_, n));
  TITAN_RETURN_IF_ERROR(tp_.AllReduceSum(loss_target_, n));
  const float loss = CrossEntropyFinish(loss_lse_, loss_max_, loss_target_, targets, n);
  TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return loss;
}

absl::Status LlamaModel::ForwardLayers() {
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->BeforeForward());
    TITAN_RETURN_IF_ERROR(BlockForward(l, /*recompute=*/false));
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->AfterForward());
  }
  return absl::OkStatus();
}

absl::Status LlamaModel::BackwardLayers() {
  for (int64_t l = config_.n_layers - 1; l >= 0; --l) {
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->BeforeBackward());
    TITAN_RETURN_IF_ERROR(BlockBackward(l));
    TITAN_RETURN_IF_ERROR(layer_modules_[l]->AfterBackward());
  }
  return absl::OkStatus();
}

// The gradient of the residual stream flows through d_residual_ (this rank's tokens), which each
// block updates in place: the skip connections pass it through unchanged and the branches add to
// it. The row-parallel projections need it for every token (gathered); the column-parallel ones
// give partial sums for every token (reduce-scattered in NormBackward).
absl::Status LlamaModel::BlockBackward(int64_t layer) {
  const LlamaConfig& c = config_;
  const LocalSizes local = this->local();
  const Block& block = blocks_[layer];
  const BlockActs& x = acts_[layer];
  const int64_t n = batch_ * seq_len_, nl = n_local_, d = c.dim, f = local.hidden;
  const int64_t qd = local.heads * c.head_dim(), kvd = local.kv_heads * c.head_dim();
  auto w = [&](Weight weight) { return Param(block.weights[weight]); };
  auto dw = [&](Weight weight) { return Grad(block.weights[weight]); };
  if (block.policy != BlockPolicy::kKeepAll) {
    TITAN_RETURN_IF_ERROR(BlockForward(layer, /*recompute=*/true));
  }

  TITAN_ASSIGN_OR_RETURN(const float* d_out, tp_.GatherTokens(d_residual_, tokens_full_, nl, d));
  Zero(d_h_, n * f);
  MatmulBackward(d_h_, dw(kW2), d_out, x.h, w(kW2), n, f, d);
  Zero(d_a_, n * f);
  Zero(d_b_, n * f);
  SwiGluBackward(d_a_, d_b_, d_h_, x.a, x.b, n * f);
  Zero(d_norm_out_, n * d);
  MatmulBackward(d_norm_out_, dw(kW1), d_a_, x.ln2, w(kW1), n, d, f);
  MatmulBackward(d_norm_out_, dw(kW3), d_b_, x.ln2, w(kW3), n, d, f);
  TITAN_RETURN_IF_ERROR(
      NormBackward(d_residual_, d_norm_out_, x.x_mid, x.rstd2, block.weights[kFfnNorm]));

  TITAN_ASSIGN_OR_RETURN(d_out, tp_.GatherTokens(d_residual_, tokens_full_, nl, d));
  Zero(d_att_, n * qd);
  MatmulBackward(d_att_, dw(kWo), d_out, x.att, w(kWo), n, qd, d);
  Zero(d_q_, n * qd);
  Zero(d_k_, n * kvd);
  Zero(d_v_, n * kvd);
  AttentionBackward(d_q_, d_k_, d_v_, d_att_, x.q, x.k, x.v, x.att, x.lse, attention_shape_);
  RopeBackward(d_q_, rope_cos_, rope_sin_, batch_, seq_len_, local.heads, c.head_dim());
  RopeBackward(d_k_, rope_cos_, rope_sin_, batch_, seq_len_, local.kv_heads, c.head_dim());
  Zero(d_norm_out_, n * d);
  MatmulBackward(d_norm_out_, dw(kWq), d_q_, x.ln1, w(kWq), n, d, qd);
  MatmulBackward(d_norm_out_, dw(kWk), d_k_, x.ln1, w(kWk), n, d, kvd);
  MatmulBackward(d_norm_out_, dw(kWv), d_v_, x.ln1, w(kWv), n, d, kvd);
  return NormBackward(d_residual_, d_norm_out_, residual_[layer], x.rstd1,
                      block.weights[kAttentionNorm]);
}

absl::Status LlamaModel::Backward() {
  if (!tokens_valid_) {
    return absl::FailedPreconditionError("model: Backward needs a Forward first");
  }
  const LocalSizes local = this->local();
  const int64_t n = batch_ * seq_len_, d = config_.dim, v = local.vocab;
  float* d_logits = logits_;  // the logits are spent: their gradient takes their place
  tokens_valid_ = false;
  TITAN_RETURN_IF_ERROR(root_.BeforeBackward());
  CrossEntropyBackward(d_logits, logits_, loss_lse_, targets_.data(), n, v, 1.0f,
                       local.first_vocab);
  Zero(d_norm_out_, n * d);
  MatmulBackward(d_norm_out_, Grad(output_), d_logits, final_norm_, Param(output_), n, d, v);
  Zero(d_residual_, n_local_ * d);
  TITAN_RETURN_IF_ERROR(
      NormBackward(d_residual_, d_norm_out_, residual_.back(), final_rstd_, norm_));
  TITAN_RETURN_IF_ERROR(BackwardLayers());
  TITAN_ASSIGN_OR_RETURN(const float* d_embedded,
                         tp_.GatherTokens(d_residual_, tokens_full_, n_local_, d));
  EmbeddingBackward(Grad(tok_embeddings_), d_embedded, tokens_.data(), n, d, local.first_vocab,
                    local.vocab);
  return root_.AfterBackward();
}

}  // namespace titan
