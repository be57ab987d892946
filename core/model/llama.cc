#include "core/model/llama.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/cpu/cpu_compute.h"
#include "core/runtime/profiler.h"
#include "core/tensor/arena_file.h"
#include "core/tensor/cross_entropy.h"

namespace titan {

namespace {

// The plan's stages are consecutive runs of blocks, ascending, within the model.
absl::Status CheckPlan(const PipelinePlan& plan, int64_t n_layers) {
  const auto error = [](const PipelineStage& s, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("pipeline plan: stage ", s.stage, " (layers ",
                                                   s.first_layer, "..", s.end_layer, "): ", what));
  };
  for (size_t i = 0; i < plan.local.size(); ++i) {
    const PipelineStage& s = plan.local[i];
    if (s.stage < 0 || s.stage >= plan.num_stages) return error(s, "no such stage");
    if (i > 0 && s.stage <= plan.local[i - 1].stage) return error(s, "stages out of order");
    if (s.first_layer < 0 || s.first_layer > s.end_layer || s.end_layer > n_layers) {
      return error(s, absl::StrCat("expected layers within 0..", n_layers));
    }
    if (s.stage == 0 && s.first_layer != 0) return error(s, "stage 0 must start at layer 0");
    if (s.stage == plan.num_stages - 1 && s.end_layer != n_layers) {
      return error(s, absl::StrCat("the last stage must end at layer ", n_layers));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Create(const LlamaConfig& config,
                                                               const ActivationCheckpoint& ac,
                                                               const ModelCompute& where,
                                                               const PipelinePlan& stages) {
  TITAN_RETURN_IF_ERROR(config.Validate());
  if (where.matmul_dtype != DType::kF32 && where.matmul_dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: matmuls compute in f32 or bf16, not ", DTypeName(where.matmul_dtype)));
  }
  PipelinePlan plan = stages;
  if (plan.local.empty()) plan = {1, {{0, 0, static_cast<int>(config.n_layers)}}};
  TITAN_RETURN_IF_ERROR(CheckPlan(plan, config.n_layers));
  Compute* compute = &CpuCompute::Get();
  if (where.device != nullptr) {
    compute = where.device->compute();
    if (compute == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("model: the ", where.device->type() == DeviceType::kCuda ? "cuda" : "cpu",
                       " device plugin allocates and copies but implements no compute kernels "
                       "(titan/compute.h), so nothing can train on it yet"));
    }
  }
  std::unique_ptr<LlamaModel> model(
      new LlamaModel(config, ac, *compute, where.device, where.matmul_dtype));
  model->stages_ = plan.local;
  model->num_stages_ = plan.num_stages;
  const bool first = model->holds_first_stage(), last = model->holds_last_stage();
  if (config.tie_embeddings && first != last) {
    return absl::InvalidArgumentError(
        "model: tie_embeddings shares the embedding with the output projection, which pipeline "
        "parallelism puts on different ranks; use a flavor without tied embeddings");
  }
  ArenaPlan params_plan;
  std::vector<int> indices;
  std::vector<TensorParallelStyle> styles;  // per arena index
  for (const ParameterDecl& decl : model->OwnedParameters(1)) {
    TITAN_ASSIGN_OR_RETURN(int index, params_plan.Add(decl.name, decl.shape));
    indices.push_back(index);
    styles.resize(std::max<size_t>(styles.size(), index + 1));
    styles[index] = decl.tp_style;
  }
  // Arena order: tok_embeddings, each block's weights in Weight order, norm, output (those of
  // this model's stages).
  auto next = indices.begin();
  if (first) model->tok_embeddings_ = *next++;
  for (int64_t l = 0; l < config.n_layers; ++l) {
    Block block{{}, ac.PolicyFor(l)};
    block.weights.fill(-1);
    if (model->OwnsLayer(l)) {
      for (int& index : block.weights) index = *next++;
    }
    model->blocks_.push_back(block);
  }
  if (last) {
    model->norm_ = *next++;
    model->output_ = config.tie_embeddings ? model->tok_embeddings_ : *next++;
  }
  TITAN_ASSIGN_OR_RETURN(model->params_, Arena::Allocate(params_plan, where.device, "parameters"));
  TITAN_ASSIGN_OR_RETURN(model->grads_, Arena::Allocate(params_plan, where.device, "gradients"));
  model->plan_ = std::move(params_plan);
  for (int i = 0; i < model->params_.size(); ++i) {
    Parameter p;
    p.name = model->params_.name(i);
    p.full_shape = model->params_.at(i).shape();
    p.tp_style = styles[i];
    p.value = model->params_.at(i).view();
    p.grad = model->grads_.at(i).view();
    model->parameters_.push_back(std::move(p));
  }
  // Parameters are added in arena order, so each module's own parameters stay in model order.
  auto& parameters = model->parameters_;
  if (first) model->root_.AddParameter(&parameters[model->tok_embeddings_]);
  model->layer_module_.assign(config.n_layers, nullptr);
  for (int64_t l = 0; l < config.n_layers; ++l) {
    if (!model->OwnsLayer(l)) continue;
    auto layer = std::make_unique<ModuleNode>(absl::StrCat("layers.", l));
    for (int index : model->blocks_[l].weights) layer->AddParameter(&parameters[index]);
    model->root_.AddChild(layer.get());
    model->layer_module_[l] = layer.get();
    model->layer_modules_.push_back(std::move(layer));
  }
  if (last) {
    model->root_.AddParameter(&parameters[model->norm_]);
    if (!config.tie_embeddings) model->root_.AddParameter(&parameters[model->output_]);
  }
  // Under mixed precision the projections' weights are only ever matmul operands: a plugin that
  // gathers them may hand them over in bf16. The norms, and an embedding table the output
  // shares, are read in f32.
  if (where.matmul_dtype == DType::kBF16) {
    for (const Block& block : model->blocks_) {
      for (const int w : {kWq, kWk, kWv, kWo, kW1, kW2, kW3}) {
        if (block.weights[w] >= 0) parameters[block.weights[w]].compute_dtype = DType::kBF16;
      }
    }
    if (last && !config.tie_embeddings) parameters[model->output_].compute_dtype = DType::kBF16;
  }
  model->root_.set_tensor_parallel_target(model.get());
  model->root_.set_pipeline_stage_target(model.get());
  model->root_.set_attention_host(model.get());
  return model;
}

bool LlamaModel::OwnsLayer(int64_t layer) const {
  for (const PipelineStage& s : stages_) {
    if (layer >= s.first_layer && layer < s.end_layer) return true;
  }
  return false;
}

std::vector<LlamaModel::ParameterDecl> LlamaModel::OwnedParameters(int64_t tp) const {
  std::vector<ParameterDecl> owned;
  for (ParameterDecl& decl : DeclaredParameters(config_, tp)) {
    const std::string& name = decl.name;
    bool keep = false;
    if (absl::StartsWith(name, "tok_embeddings.")) {
      keep = holds_first_stage();
    } else if (absl::StartsWith(name, "layers.")) {
      int64_t layer = 0;
      const absl::string_view rest = absl::string_view(name).substr(7);
      keep = absl::SimpleAtoi(rest.substr(0, rest.find('.')), &layer) && OwnsLayer(layer);
    } else {
      keep = holds_last_stage();  // norm, output
    }
    if (keep) owned.push_back(std::move(decl));
  }
  return owned;
}

std::vector<LlamaModel::ParameterDecl> LlamaModel::DeclaredParameters(const LlamaConfig& c,
                                                                      int64_t tp) {
  const int64_t d = c.dim, hd = c.head_dim(), f = c.hidden_dim() / tp, v = c.vocab_size / tp;
  const int64_t qd = c.n_heads / tp * hd, kvd = c.n_kv_heads / tp * hd;
  // TorchTitan's tensor-parallel plan for Llama: the projections into heads and hidden features
  // column-wise, the ones back into the residual stream row-wise, the norms replicated (sequence
  // parallel), the embedding vocabulary-parallel and the output column-wise over the vocabulary
  // (the loss then runs on the shards; a tied output is the embedding table, split the same way).
  using Style = TensorParallelStyle;
  std::vector<ParameterDecl> decls = {
      {"tok_embeddings.weight", {v, d}, Style::kVocabParallelEmbedding}};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string prefix = absl::StrCat("layers.", l, ".");
    // In Weight order.
    const ParameterDecl weights[] = {{"attention_norm", {d}, Style::kReplicate},
                                     {"attention.wq", {qd, d}, Style::kColumnwise},
                                     {"attention.wk", {kvd, d}, Style::kColumnwise},
                                     {"attention.wv", {kvd, d}, Style::kColumnwise},
                                     {"attention.wo", {d, qd}, Style::kRowwise},
                                     {"ffn_norm", {d}, Style::kReplicate},
                                     {"feed_forward.w1", {f, d}, Style::kColumnwise},
                                     {"feed_forward.w2", {d, f}, Style::kRowwise},
                                     {"feed_forward.w3", {f, d}, Style::kColumnwise}};
    for (const ParameterDecl& w : weights) {
      decls.push_back({absl::StrCat(prefix, w.name, ".weight"), w.shape, w.tp_style});
    }
  }
  decls.push_back({"norm.weight", {d}, Style::kReplicate});
  if (!c.tie_embeddings) decls.push_back({"output.weight", {v, d}, Style::kColumnwise});
  return decls;
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
  const TensorParallelGroup tp(layout.group, compute_->device());
  const int t = tp.size();
  TITAN_RETURN_IF_ERROR(CheckTensorParallelDegree(t));
  const std::vector<ParameterDecl> decls = OwnedParameters(t);
  for (size_t i = 0; i < decls.size(); ++i) {
    const Parameter& p = parameters_[i];
    if (p.value.shape != decls[i].shape || p.grad.shape != decls[i].shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor parallel degree ", t, ": expected parameter ", p.name, " to hold [",
                       absl::StrJoin(decls[i].shape, ", "), "], found [",
                       absl::StrJoin(p.value.shape, ", "), "]"));
    }
  }
  tp_ = tp;
  batch_ = seq_len_ = 0;  // the activations' sizes change with the degree
  tokens_valid_ = false;
  return absl::OkStatus();
}

void LlamaModel::ReleaseUnusedStorage() {
  bool values_used = false, grads_used = false;
  for (const Parameter& p : parameters_) {
    values_used = values_used || params_.Contains(p.value.data);
    grads_used = grads_used || grads_.Contains(p.grad.data);
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
    TITAN_RETURN_IF_ERROR(compute_->CopyToHost(parameters_[i].value, copy.at(i).data<float>()));
  }
  return WriteArena(copy, path);
}

void LlamaModel::ZeroGrad() {
  if (grads_.flat_size() == 0) return;
  const TensorView all = View(grads_.flat_data(), {static_cast<int64_t>(grads_.flat_size())});
  compute_->Fill(all, 0.0f).IgnoreError();  // the arena's own memory: cannot fail
}

TensorView LlamaModel::View(const float* data, std::vector<int64_t> shape) const {
  return TensorView{
      const_cast<float*>(data), DType::kF32, compute_->device(), std::move(shape), {}};
}

TensorView LlamaModel::Tokens(const int32_t* data) const {
  return TensorView{
      const_cast<int32_t*>(data), DType::kI32, compute_->device(), {batch_ * seq_len_}, {}};
}

absl::Status LlamaModel::Zero(float* x, int64_t n) const { return compute_->Fill(View(x, {n}), 0); }

absl::Status LlamaModel::CopyF32(const float* src, float* dst, int64_t n) const {
  return compute_->Copy(View(src, {n}), View(dst, {n}));
}

absl::StatusOr<TensorView> LlamaModel::Operand(const TensorView& x, Scratch scratch) {
  if (x.dtype == matmul_dtype_) return x;
  TensorView rounded = x;
  rounded.dtype = matmul_dtype_;
  rounded.data = bf16_scratch_[scratch];
  TITAN_RETURN_IF_ERROR(compute_->Cast(x, rounded));
  return rounded;
}

absl::StatusOr<TensorView> LlamaModel::WeightOperand(int weight) {
  const Parameter& p = parameters_[weight];
  if (p.compute.data != nullptr && p.compute.dtype == matmul_dtype_) return p.compute;
  if (p.value.data == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: parameter ", p.name, " has no values in ", DTypeName(matmul_dtype_),
                     " (a plugin gathered it as ", DTypeName(p.compute.dtype), ")"));
  }
  return Operand(p.value, kWeightScratch);
}

absl::StatusOr<Float8Operand> LlamaModel::Float8WeightOperand(int weight) {
  const Parameter& p = parameters_[weight];
  if (p.compute.data != nullptr && p.compute.dtype == DType::kF8E4M3) {
    return Float8Operand{{}, p.compute, p.compute_inverse_scale};
  }
  TITAN_ASSIGN_OR_RETURN(TensorView high, WeightOperand(weight));
  return Float8Operand{high, {}, {}};
}

Float8Split LlamaModel::Float8SplitOf(int weight) const {
  const bool row_parallel =
      weight < static_cast<int>(row_parallel_.size()) && row_parallel_[weight];
  return {row_parallel, tp_.communicator(), attention_->sequence_group()};
}

absl::Status LlamaModel::Project(const TensorView& in, int weight, float* out, bool accumulate) {
  const Parameter& p = parameters_[weight];
  const TensorView out_view = View(out, {in.shape[0], p.value.shape[0]});
  if (Float8(weight)) {
    TITAN_ASSIGN_OR_RETURN(Float8Operand w, Float8WeightOperand(weight));
    return float8_->Forward(in, w, out_view, accumulate, Float8SplitOf(weight));
  }
  TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand(weight));
  return compute_->Gemm(in, false, w, true, 1.0f, accumulate ? 1.0f : 0.0f, out_view);
}

absl::Status LlamaModel::ProjectBackward(const float* dout, const TensorView& in, int weight,
                                         float* dinp) {
  const Parameter& p = parameters_[weight];
  const int64_t rows = in.shape[0], out_features = p.value.shape[0], in_features = p.value.shape[1];
  const TensorView dout_view = View(dout, {rows, out_features});
  TITAN_ASSIGN_OR_RETURN(TensorView g, Operand(dout_view, kGradScratch));
  if (dinp != nullptr) {
    const TensorView dinp_view = View(dinp, {rows, in_features});
    if (Float8(weight)) {
      TITAN_ASSIGN_OR_RETURN(Float8Operand w, Float8WeightOperand(weight));
      TITAN_RETURN_IF_ERROR(float8_->InputGrad(g, w, dinp_view, Float8SplitOf(weight)));
    } else {
      TITAN_ASSIGN_OR_RETURN(TensorView w, WeightOperand(weight));
      TITAN_RETURN_IF_ERROR(compute_->Gemm(g, false, w, false, 1.0f, 1.0f, dinp_view));
    }
  }
  if (deferring_ != nullptr) {
    TITAN_ASSIGN_OR_RETURN(TensorView saved, KeepForWeightPass(dout_view, weight, false));
    TITAN_ASSIGN_OR_RETURN(TensorView kept_in, KeepForWeightPass(in, weight, true));
    deferring_->deferred[deferring_stage_].push_back(
        {DeferredGrad::kProjection, deferring_layer_, weight, rows, saved, kept_in});
    return absl::OkStatus();
  }
  TITAN_ASSIGN_OR_RETURN(TensorView x, Operand(in, kInputScratch));
  const TensorView dw = View(Grad(weight), p.grad.shape);
  if (Float8(weight)) return float8_->WeightGrad(g, x, dw, Float8SplitOf(weight));
  return compute_->Gemm(g, true, x, false, 1.0f, 1.0f, dw);
}

absl::StatusOr<std::vector<Float8LinearChoice>> LlamaModel::ConvertToFloat8(
    const Float8Plugin& plugin, bool gather_float8) {
  std::vector<Float8LinearChoice> linears;
  auto add = [&](int weight, std::string fqn) {
    linears.push_back({weight, std::move(fqn), parameters_[weight].full_shape});
  };
  row_parallel_.assign(parameters_.size(), false);
  for (const Block& block : blocks_) {
    for (const int w : {kWq, kWk, kWv, kWo, kW1, kW2, kW3}) {
      if (block.weights[w] < 0) continue;  // a layer of another pipeline stage
      const std::string& name = parameters_[block.weights[w]].name;
      add(block.weights[w], name.substr(0, name.size() - std::string(".weight").size()));
      row_parallel_[block.weights[w]] =
          parameters_[block.weights[w]].tp_style == TensorParallelStyle::kRowwise;
    }
  }
  if (output_ >= 0) add(output_, "output");  // tied or not, the output projection's name
  linears = ChooseFloat8Linears(std::move(linears), plugin);
  const Float8Recipe recipe = plugin.Recipe();
  if (gather_float8) {
    // The weight is gathered once, quantized with one e4m3 scale, for both of its GEMMs.
    for (const Float8GemmRecipe* gemm : {&recipe.output, &recipe.grad_input}) {
      if (gemm->high_precision || gemm->b.dtype != DType::kF8E4M3 ||
          gemm->b.granularity != Float8Granularity::kTensor || recipe.power_of_two_scales) {
        return absl::InvalidArgumentError(
            "float8.enable_fsdp_float8_all_gather: the weights are gathered with one e4m3 scale "
            "each, which only the tensorwise recipe uses; this recipe scales them otherwise");
      }
    }
    for (const Float8LinearChoice& c : linears) {
      // A tied output weight is also the embedding table, which is read in f32.
      if (c.outcome == Float8LinearChoice::kFloat8 && c.weight != tok_embeddings_) {
        parameters_[c.weight].compute_dtype = DType::kF8E4M3;
      }
    }
  }
  float8_ = std::make_unique<Float8Linears>(recipe, *compute_, device_, linears);
  return linears;
}

absl::StatusOr<TensorView> LlamaModel::KeepForWeightPass(const TensorView& values, int weight,
                                                         bool input) {
  MicrobatchActs& set = *deferring_;
  if (values.data != nullptr && set.arena.Contains(values.data)) return values;
  const int entry = (input ? deferred_input_entry_ : deferred_grad_entry_)[weight];
  if (entry < 0 || entry >= set.deferred_arena.size()) {
    return absl::InternalError(absl::StrCat("model: no memory planned to keep the ",
                                            input ? "input" : "output gradient", " of ",
                                            parameters_[weight].name, " for its weight pass"));
  }
  const TensorView kept = set.deferred_arena.at(entry).view();
  // wq, wk and wv (w1 and w3) read one input, copied once.
  const std::vector<DeferredGrad>& work = set.deferred[deferring_stage_];
  if (input && !work.empty() && work.back().in.data == kept.data) return kept;
  if (values.data != nullptr) TITAN_RETURN_IF_ERROR(compute_->Copy(values, kept));
  return kept;
}

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
  // Each block activation belongs to the stage that writes it. The matmul inputs take the matmul
  // dtype; the others stay f32 for the f32 kernels that read them.
  const struct {
    float* BlockActs::*f32;
    TensorView BlockActs::*input;
    const char* name;
    std::vector<int64_t> shape;
    BlockStage stage;
  } fields[] = {
      {nullptr, &BlockActs::ln1, "ln1", {n, d}, BlockStage::kAttentionNorm},
      {&BlockActs::rstd1, nullptr, "rstd1", {nl}, BlockStage::kAttentionNorm},
      {&BlockActs::q, nullptr, "q", {n * qd}, BlockStage::kQkv},
      {&BlockActs::k, nullptr, "k", {n * kvd}, BlockStage::kQkv},
      {&BlockActs::v, nullptr, "v", {n * kvd}, BlockStage::kQkv},
      {&BlockActs::att, nullptr, "att", {n * qd}, BlockStage::kAttention},
      {&BlockActs::lse, nullptr, "lse", {lse}, BlockStage::kAttention},
      {&BlockActs::x_mid, nullptr, "x_mid", {nl * d}, BlockStage::kAttentionOut},
      {nullptr, &BlockActs::ln2, "ln2", {n, d}, BlockStage::kFfnNorm},
      {&BlockActs::rstd2, nullptr, "rstd2", {nl}, BlockStage::kFfnNorm},
      {&BlockActs::a, nullptr, "a", {n * f}, BlockStage::kGateUp},
      {&BlockActs::b, nullptr, "b", {n * f}, BlockStage::kGateUp},
      {nullptr, &BlockActs::h, "h", {n, f}, BlockStage::kSwiGlu},
  };
  // Two plans: what each microbatch keeps from its forward to its backward (a set), and the
  // scratch all microbatches share (recomputed activations, gradients in flight, tables).
  ArenaPlan set_plan, shared_plan;
  set_slots_.assign(c.n_layers, {});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (!OwnsLayer(l)) continue;
    for (const auto& field : fields) {
      const bool kept = KeepsStage(blocks_[l].policy, field.stage);
      std::string name = kept ? absl::StrCat("layers.", l, ".", field.name)
                              : absl::StrCat("recompute.", field.name);
      const DType dtype = field.input != nullptr ? matmul_dtype_ : DType::kF32;
      if (kept) {
        TITAN_RETURN_IF_ERROR(set_plan.Add(name, field.shape, dtype).status());
      } else {
        shared_plan.Add(name, field.shape, dtype).IgnoreError();  // one slot for every layer
      }
      set_slots_[l].push_back({field.f32, field.input, std::move(name)});
    }
  }
  for (const PipelineStage& stage : stages_) {
    for (int64_t l = stage.first_layer; l <= stage.end_layer; ++l) {
      set_plan.Add(absl::StrCat("residual.", l), {nl, d}).IgnoreError();  // shared boundaries
    }
    if (num_stages_ > 1) {
      for (int64_t l : {stage.first_layer, stage.end_layer}) {
        set_plan.Add(absl::StrCat("d_boundary.", l), {nl, d}).IgnoreError();
      }
    }
  }
  if (holds_last_stage()) {
    TITAN_RETURN_IF_ERROR(set_plan.Add("final_norm", {n, d}, matmul_dtype_).status());
    const std::pair<const char*, int64_t> head[] = {{"final_rstd", nl}, {"logits", n * local.vocab},
                                                    {"loss_lse", n},    {"loss_max", n},
                                                    {"loss_target", n}, {"loss", 1}};
    for (const auto& [name, size] : head)
      TITAN_RETURN_IF_ERROR(set_plan.Add(name, {size}).status());
  }
  TITAN_RETURN_IF_ERROR(set_plan.Add("tokens", {n}, DType::kI32).status());
  TITAN_RETURN_IF_ERROR(set_plan.Add("targets", {n}, DType::kI32).status());
  TITAN_ASSIGN_OR_RETURN(ArenaPlan deferred_plan, PlanDeferredGrads(n, qd, kvd, f));

  const int64_t half = c.head_dim() / 2;
  struct Single {
    float** slot;
    const char* name;
    int64_t size;
  };
  std::vector<Single> singles = {
      {&rope_cos_, "rope_cos", seq_len * half},
      {&rope_sin_, "rope_sin", seq_len * half},
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
    TITAN_RETURN_IF_ERROR(shared_plan.Add(single.name, {single.size}).status());
  // Mixed precision: the bf16 roundings of one matmul's f32 input (the attention's output),
  // output gradient and weight.
  const std::array<int64_t, kScratches> scratch_sizes = {
      n * qd, n * std::max({d, qd, f, local.vocab}), [&] {
        int64_t largest = 0;
        for (const ParameterDecl& decl : OwnedParameters(t)) {
          int64_t numel = 1;
          for (int64_t extent : decl.shape) numel *= extent;
          largest = std::max(largest, numel);
        }
        return largest;
      }()};
  const bool bf16 = matmul_dtype_ == DType::kBF16;
  for (int i = 0; i < kScratches && bf16; ++i) {
    TITAN_RETURN_IF_ERROR(
        shared_plan.Add(absl::StrCat("bf16_scratch.", i), {scratch_sizes[i]}, DType::kBF16)
            .status());
  }
  sets_.clear();
  free_sets_.clear();
  set_of_.assign(set_of_.size(), -1);
  TITAN_ASSIGN_OR_RETURN(shared_arena_, Arena::Allocate(shared_plan, device_, "activations"));
  set_plan_ = std::move(set_plan);
  deferred_plan_ = std::move(deferred_plan);
  for (const auto& single : singles) *single.slot = shared_arena_.Find(single.name)->data<float>();
  for (int i = 0; i < kScratches; ++i) {
    bf16_scratch_[i] =
        bf16 ? shared_arena_.Find(absl::StrCat("bf16_scratch.", i))->data<uint16_t>() : nullptr;
  }
  const RopeConfig& r = c.rope;
  const RopeSpec rope{c.head_dim(),      r.theta,           r.scaled,
                      r.scale_factor,    r.low_freq_factor, r.high_freq_factor,
                      r.original_context};
  attention_shape_ = {batch, seq_len, local.heads, local.kv_heads, c.head_dim()};
  batch_ = batch;
  seq_len_ = seq_len;
  // The local tokens sit where the attention's layout puts them in the whole sequences (under
  // context parallelism: chunks at their global positions).
  for (const TokenRun& run : attention_->Positions(seq_len)) {
    TITAN_RETURN_IF_ERROR(compute_->RopeTable(
        rope, run.global_start, View(rope_cos_ + run.local_start * half, {run.length, half}),
        View(rope_sin_ + run.local_start * half, {run.length, half})));
  }
  n_local_ = nl;
  // Set 0 serves the plain Forward and Backward, and is the pipeline's first free set.
  TITAN_ASSIGN_OR_RETURN(MicrobatchActs * first, NewActivationSet());
  free_sets_ = {0};
  Use(*first);
  return absl::OkStatus();
}

absl::StatusOr<ArenaPlan> LlamaModel::PlanDeferredGrads(int64_t n, int64_t qd, int64_t kvd,
                                                        int64_t f) {
  const int64_t d = config_.dim;
  // Each projection's output gradient [n, out] and its input [n, in], which the set keeps unless
  // the block's policy recomputes it into shared scratch (only the attention's output is f32).
  const struct {
    Weight weight;
    int64_t out, in;
    const char* input;
    BlockStage stage;
  } projections[] = {
      {kWq, qd, d, "ln1", BlockStage::kAttentionNorm},
      {kWk, kvd, d, "ln1", BlockStage::kAttentionNorm},
      {kWv, kvd, d, "ln1", BlockStage::kAttentionNorm},
      {kWo, d, qd, "att", BlockStage::kAttention},
      {kW1, f, d, "ln2", BlockStage::kFfnNorm},
      {kW3, f, d, "ln2", BlockStage::kFfnNorm},
      {kW2, d, f, "h", BlockStage::kSwiGlu},
  };
  ArenaPlan plan;
  deferred_grad_entry_.assign(parameters_.size(), -1);
  deferred_input_entry_.assign(parameters_.size(), -1);
  auto add_grad = [&](int weight, std::vector<int64_t> shape) -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(deferred_grad_entry_[weight],
                           plan.Add(parameters_[weight].name, std::move(shape)));
    return absl::OkStatus();
  };
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    if (!OwnsLayer(l)) continue;
    const Block& block = blocks_[l];
    absl::flat_hash_map<std::string, int> inputs;
    for (const auto& p : projections) {
      const int w = block.weights[p.weight];
      TITAN_RETURN_IF_ERROR(add_grad(w, {n, p.out}));
      if (KeepsStage(block.policy, p.stage)) continue;
      const std::string name = absl::StrCat("layers.", l, ".", p.input);
      if (!inputs.contains(name)) {
        const DType dtype = p.weight == kWo ? DType::kF32 : matmul_dtype_;
        TITAN_ASSIGN_OR_RETURN(inputs[name], plan.Add(name, {n, p.in}, dtype));
      }
      deferred_input_entry_[w] = inputs[name];
    }
    for (const Weight norm : {kAttentionNorm, kFfnNorm}) {
      TITAN_RETURN_IF_ERROR(add_grad(block.weights[norm], {d}));
    }
  }
  // The output's gradient is the logits' memory, in the set already.
  if (holds_last_stage()) TITAN_RETURN_IF_ERROR(add_grad(norm_, {d}));
  if (holds_first_stage()) TITAN_RETURN_IF_ERROR(add_grad(tok_embeddings_, {n * d}));
  return plan;
}

absl::StatusOr<LlamaModel::MicrobatchActs*> LlamaModel::NewActivationSet() {
  auto set = std::make_unique<MicrobatchActs>();
  TITAN_ASSIGN_OR_RETURN(set->arena, Arena::Allocate(set_plan_, device_, "activations"));
  // A slot of the set, or of the shared recompute scratch; empty when this rank has none.
  auto view = [&](const std::string& name) -> TensorView {
    const Arena& arena = absl::StartsWith(name, "recompute.") ? shared_arena_ : set->arena;
    absl::StatusOr<Tensor> found = arena.Find(name);
    return found.ok() ? found->view() : TensorView{};
  };
  auto pointer = [&](const std::string& name) { return static_cast<float*>(view(name).data); };
  const int64_t layers = config_.n_layers;
  set->blocks.assign(layers, BlockActs{});
  for (int64_t l = 0; l < layers; ++l) {
    for (const ActSlot& slot : set_slots_[l]) {
      BlockActs& acts = set->blocks[l];
      if (slot.input != nullptr) {
        acts.*slot.input = view(slot.name);
      } else {
        acts.*slot.f32 = pointer(slot.name);
      }
    }
  }
  for (int64_t l = 0; l <= layers; ++l) {
    set->residual.push_back(pointer(absl::StrCat("residual.", l)));
    set->d_boundary.push_back(pointer(absl::StrCat("d_boundary.", l)));
  }
  set->final_norm = view("final_norm");
  set->final_rstd = pointer("final_rstd");
  set->logits = pointer("logits");
  set->loss_lse = pointer("loss_lse");
  set->loss_max = pointer("loss_max");
  set->loss_target = pointer("loss_target");
  set->loss = pointer("loss");
  set->tokens = static_cast<int32_t*>(view("tokens").data);
  set->targets = static_cast<int32_t*>(view("targets").data);
  set->deferred.assign(stages_.size(), {});
  sets_.push_back(std::move(set));
  return sets_.back().get();
}

void LlamaModel::Use(MicrobatchActs& set) {
  acts_ = set.blocks;
  residual_ = set.residual;
  final_norm_ = set.final_norm, final_rstd_ = set.final_rstd, logits_ = set.logits;
  loss_lse_ = set.loss_lse, loss_max_ = set.loss_max, loss_target_ = set.loss_target;
  loss_ = set.loss;
  tokens_device_ = set.tokens, targets_device_ = set.targets;
}

size_t LlamaModel::activation_bytes() const {
  size_t floats = shared_arena_.flat_size();
  for (const auto& set : sets_) floats += set->arena.flat_size() + set->deferred_arena.flat_size();
  return floats * sizeof(float) + attention_->workspace_bytes();
}

absl::Status LlamaModel::SetAttention(CausalAttention* attention) {
  attention_ = attention != nullptr ? attention : &local_attention_;
  batch_ = seq_len_ = 0;  // the activations' sizes change with the local sequence
  tokens_valid_ = false;
  return absl::OkStatus();
}

absl::Status LlamaModel::Attend(const BlockActs& x) {
  const AttentionSpec spec = attention_spec();
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, hd = spec.head_dim;
  const int64_t qd = h * hd, kvd = spec.kv_heads * hd;
  return attention_->Forward(spec, View(x.q, {b * tl * qd}), View(x.k, {b * tl * kvd}),
                             View(x.v, {b * tl * kvd}), View(x.att, {b * tl * qd}),
                             View(x.lse, {b * h * tl}));
}

absl::Status LlamaModel::AttendBackward(const BlockActs& x) {
  const AttentionSpec spec = attention_spec();
  const int64_t b = spec.batch, tl = spec.seq_len, h = spec.heads, hd = spec.head_dim;
  const int64_t qd = h * hd, kvd = spec.kv_heads * hd;
  return attention_->Backward(
      spec, View(d_att_, {b * tl * qd}), View(x.q, {b * tl * qd}), View(x.k, {b * tl * kvd}),
      View(x.v, {b * tl * kvd}), View(x.att, {b * tl * qd}), View(x.lse, {b * h * tl}),
      View(d_q_, {b * tl * qd}), View(d_k_, {b * tl * kvd}), View(d_v_, {b * tl * kvd}));
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

absl::Status LlamaModel::NormAndGather(const TensorView& out, float* rstd, const float* inp,
                                       int weight) {
  const int64_t d = config_.dim;
  // A bf16 output is normed and gathered in f32 (in the idle d_norm_out_), then rounded once.
  const bool f32 = out.dtype == DType::kF32;
  float* full = f32 ? out.data_as<float>() : d_norm_out_;
  float* local = tp_.size() > 1 ? tokens_local_ : full;
  TITAN_RETURN_IF_ERROR(compute_->RmsNormForward(
      View(inp, {n_local_, d}), parameters_[weight].value, config_.norm_eps,
      View(local, {n_local_, d}), View(rstd, {n_local_})));
  TITAN_RETURN_IF_ERROR(tp_.GatherTokens(local, full, n_local_, d).status());
  return f32 ? absl::OkStatus() : compute_->Cast(View(full, out.shape), out);
}

absl::Status LlamaModel::AddRowParallel(float* out, const TensorView& in, int weight) {
  const int64_t d = config_.dim;
  if (tp_.size() == 1) return Project(in, weight, out, /*accumulate=*/true);
  TITAN_RETURN_IF_ERROR(Project(in, weight, tokens_full_));
  TITAN_ASSIGN_OR_RETURN(const float* reduced,
                         tp_.ReduceScatterTokens(tokens_full_, tokens_local_, n_local_, d));
  return compute_->Accumulate(View(reduced, {n_local_ * d}), View(out, {n_local_ * d}));
}

absl::Status LlamaModel::NormBackward(float* d_residual, float* d_out_full, const float* inp,
                                      const float* rstd, int weight) {
  const int64_t d = config_.dim;
  TITAN_ASSIGN_OR_RETURN(const float* d_out,
                         tp_.ReduceScatterTokens(d_out_full, tokens_local_, n_local_, d));
  const Parameter& p = parameters_[weight];
  const TensorView dout = View(d_out, {n_local_, d}), x = View(inp, {n_local_, d});
  const TensorView r = View(rstd, {n_local_}), dx = View(d_residual, {n_local_, d});
  if (tp_.size() == 1 && deferring_ == nullptr) {
    return compute_->RmsNormBackward(dout, x, p.value, r, dx, p.grad);
  }
  // Accumulated apart (and summed over the tensor-parallel ranks) first: the gradient may
  // already hold earlier microbatches' sums, which must not be summed again. The zero-bubble
  // split keeps it for BackwardWeight.
  TensorView part;
  float* sum = norm_grad_;
  if (deferring_ != nullptr) {
    TITAN_ASSIGN_OR_RETURN(part, KeepForWeightPass(View(nullptr, {d}), weight, false));
    sum = part.data_as<float>();
  }
  TITAN_RETURN_IF_ERROR(Zero(sum, d));
  const TensorView grad = View(sum, {d});
  TITAN_RETURN_IF_ERROR(compute_->RmsNormBackward(dout, x, p.value, r, dx, grad));
  TITAN_RETURN_IF_ERROR(tp_.AllReduceSum(sum, d));
  if (deferring_ != nullptr) {
    deferring_->deferred[deferring_stage_].push_back(
        {DeferredGrad::kNorm, deferring_layer_, weight, 1, part, TensorView{}});
    return absl::OkStatus();
  }
  return compute_->Accumulate(grad, p.grad);
}

absl::Status LlamaModel::BlockForward(int64_t layer, bool recompute) {
  const LlamaConfig& c = config_;
  const LocalSizes local = this->local();
  const Block& block = blocks_[layer];
  const BlockActs& x = acts_[layer];
  const int64_t n = batch_ * seq_len_, nl = n_local_, d = c.dim, f = local.hidden;
  const int64_t hd = c.head_dim(), qd = local.heads * hd;
  auto run = [&](BlockStage stage) { return !recompute || !KeepsStage(block.policy, stage); };
  const float* in = residual_[layer];
  if (run(BlockStage::kAttentionNorm)) {
    TITAN_RETURN_IF_ERROR(NormAndGather(x.ln1, x.rstd1, in, block.weights[kAttentionNorm]));
  }
  if (run(BlockStage::kQkv)) {
    TITAN_RETURN_IF_ERROR(Project(x.ln1, block.weights[kWq], x.q));
    TITAN_RETURN_IF_ERROR(Project(x.ln1, block.weights[kWk], x.k));
    TITAN_RETURN_IF_ERROR(Project(x.ln1, block.weights[kWv], x.v));
    const TensorView cos = View(rope_cos_, {seq_len_, hd / 2});
    const TensorView sin = View(rope_sin_, {seq_len_, hd / 2});
    TITAN_RETURN_IF_ERROR(
        compute_->RopeForward(cos, sin, View(x.q, {batch_, seq_len_, local.heads, hd})));
    TITAN_RETURN_IF_ERROR(
        compute_->RopeForward(cos, sin, View(x.k, {batch_, seq_len_, local.kv_heads, hd})));
  }
  if (run(BlockStage::kAttention)) TITAN_RETURN_IF_ERROR(Attend(x));
  if (run(BlockStage::kAttentionOut)) {
    TITAN_RETURN_IF_ERROR(CopyF32(in, x.x_mid, nl * d));
    TITAN_ASSIGN_OR_RETURN(TensorView att, Operand(View(x.att, {n, qd}), kInputScratch));
    TITAN_RETURN_IF_ERROR(AddRowParallel(x.x_mid, att, block.weights[kWo]));
  }
  if (run(BlockStage::kFfnNorm)) {
    TITAN_RETURN_IF_ERROR(NormAndGather(x.ln2, x.rstd2, x.x_mid, block.weights[kFfnNorm]));
  }
  if (run(BlockStage::kGateUp)) {
    TITAN_RETURN_IF_ERROR(Project(x.ln2, block.weights[kW1], x.a));
    TITAN_RETURN_IF_ERROR(Project(x.ln2, block.weights[kW3], x.b));
  }
  if (run(BlockStage::kSwiGlu)) {
    // A bf16 h is computed in f32 (in the idle d_h_), then rounded once.
    const bool f32 = x.h.dtype == DType::kF32;
    const TensorView out = f32 ? x.h : View(d_h_, {n, f});
    TITAN_RETURN_IF_ERROR(compute_->SwiGluForward(View(x.a, {n * f}), View(x.b, {n * f}), out));
    if (!f32) TITAN_RETURN_IF_ERROR(compute_->Cast(out, x.h));
  }
  if (!recompute) {
    TITAN_RETURN_IF_ERROR(CopyF32(x.x_mid, residual_[layer + 1], nl * d));
    TITAN_RETURN_IF_ERROR(AddRowParallel(residual_[layer + 1], x.h, block.weights[kW2]));
  }
  return absl::OkStatus();
}

AttentionSpec LlamaModel::attention_spec() const {
  const AttentionShape& s = attention_shape_;
  AttentionSpec spec;
  spec.batch = s.batch, spec.seq_len = s.seq_len, spec.kv_len = s.seq_len;
  spec.heads = s.heads, spec.kv_heads = s.kv_heads, spec.head_dim = s.head_dim;
  return spec;
}

absl::StatusOr<float> LlamaModel::Forward(const int32_t* tokens, const int32_t* targets,
                                          int64_t batch, int64_t seq_len) {
  ScopedSpan span("module", "model", ".forward");
  if (batch <= 0 || seq_len <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("model input: expected a positive batch and ",
                                                   "seq_len, found ", batch, " x ", seq_len));
  }
  if (num_stages_ > 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: this rank holds pipeline stage(s) of ", num_stages_,
                     ", which run through the pp plugin's schedule, not a whole forward"));
  }
  // This rank's tokens of the whole sequences, as the attention lays them out.
  TITAN_ASSIGN_OR_RETURN(const int64_t local_seq_len, attention_->LocalSeqLen(seq_len));
  TITAN_ASSIGN_OR_RETURN(std::vector<int32_t> local_tokens,
                         attention_->LocalTokens(tokens, batch, seq_len));
  TITAN_ASSIGN_OR_RETURN(std::vector<int32_t> local_targets,
                         attention_->LocalTokens(targets, batch, seq_len));
  tokens = local_tokens.data(), targets = local_targets.data();
  TITAN_RETURN_IF_ERROR(PlanActivations(batch, local_seq_len));
  TITAN_RETURN_IF_ERROR(CheckTokens(tokens, targets));
  Use(*sets_[0]);
  TITAN_RETURN_IF_ERROR(compute_->CopyFromHost(tokens, Tokens(tokens_device_)));
  TITAN_RETURN_IF_ERROR(compute_->CopyFromHost(targets, Tokens(targets_device_)));
  tokens_valid_ = true;
  TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  TITAN_RETURN_IF_ERROR(EmbedTokens(/*root_hooks=*/false));
  TITAN_RETURN_IF_ERROR(ForwardLayers(0, config_.n_layers));
  TITAN_ASSIGN_OR_RETURN(float loss, HeadForward(/*root_hooks=*/false));
  TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return attention_->AverageLoss(loss);
}

absl::Status LlamaModel::EmbedTokens(bool root_hooks) {
  const int64_t n = batch_ * seq_len_, d = config_.dim;
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  // Vocabulary-parallel embedding: each rank looks up the tokens its rows hold (zeros for the
  // others) and the reduce-scatter both sums the ranks' rows and splits the sequence.
  float* embedded = tp_.size() > 1 ? tokens_full_ : residual_[0];
  TITAN_RETURN_IF_ERROR(compute_->EmbeddingForward(Tokens(tokens_device_),
                                                   parameters_[tok_embeddings_].value,
                                                   local().first_vocab, View(embedded, {n * d})));
  TITAN_RETURN_IF_ERROR(tp_.ReduceScatterTokens(embedded, residual_[0], n_local_, d).status());
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return absl::OkStatus();
}

absl::StatusOr<float> LlamaModel::HeadForward(bool root_hooks) {
  const LocalSizes local = this->local();
  const int64_t n = batch_ * seq_len_;
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  TITAN_RETURN_IF_ERROR(NormAndGather(final_norm_, final_rstd_, residual_.back(), norm_));
  TITAN_RETURN_IF_ERROR(Project(final_norm_, output_, logits_));
  // Loss parallel: the ranks share each row's max, sum of exponentials and target logit, never
  // the logits themselves.
  const TensorView logits = View(logits_, {n, local.vocab});
  const TensorView max = View(loss_max_, {n}), sum = View(loss_lse_, {n});
  const TensorView target = View(loss_target_, {n});
  TITAN_RETURN_IF_ERROR(compute_->CrossEntropyRowMax(logits, max));
  TITAN_RETURN_IF_ERROR(tp_.AllReduceMax(loss_max_, n));
  TITAN_RETURN_IF_ERROR(compute_->CrossEntropySumExp(logits, max, sum));
  TITAN_RETURN_IF_ERROR(compute_->CrossEntropyTargetLogit(logits, Tokens(targets_device_),
                                                          local.first_vocab, target));
  TITAN_RETURN_IF_ERROR(tp_.AllReduceSum(loss_lse_, n));
  TITAN_RETURN_IF_ERROR(tp_.AllReduceSum(loss_target_, n));
  TITAN_RETURN_IF_ERROR(
      compute_->CrossEntropyFinish(max, target, Tokens(targets_device_), sum, View(loss_, {1})));
  float loss = 0;
  TITAN_RETURN_IF_ERROR(compute_->CopyToHost(View(loss_, {1}), &loss));
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return loss;
}

absl::Status LlamaModel::ForwardLayers(int64_t first, int64_t end) {
  for (int64_t l = first; l < end; ++l) {
    ScopedSpan span("module", layer_module_[l]->name(), ".forward");
    TITAN_RETURN_IF_ERROR(layer_module_[l]->BeforeForward());
    TITAN_RETURN_IF_ERROR(BlockForward(l, /*recompute=*/false));
    TITAN_RETURN_IF_ERROR(layer_module_[l]->AfterForward());
  }
  return absl::OkStatus();
}

// Under the zero-bubble split the weights' gradients wait for BackwardWeight, which runs the
// backward hooks; the input gradient needs only the weights, gathered as for a forward.
absl::Status LlamaModel::BackwardLayers(int64_t first, int64_t end) {
  for (int64_t l = end - 1; l >= first; --l) {
    ModuleNode& module = *layer_module_[l];
    ScopedSpan span("module", module.name(), deferring_ ? ".backward_input" : ".backward");
    deferring_layer_ = static_cast<int>(l);
    TITAN_RETURN_IF_ERROR(deferring_ ? module.BeforeForward() : module.BeforeBackward());
    TITAN_RETURN_IF_ERROR(BlockBackward(l));
    TITAN_RETURN_IF_ERROR(deferring_ ? module.AfterForward() : module.AfterBackward());
  }
  deferring_layer_ = -1;
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
  const int64_t hd = c.head_dim(), qd = local.heads * hd, kvd = local.kv_heads * hd;
  if (block.policy != BlockPolicy::kKeepAll) {
    TITAN_RETURN_IF_ERROR(BlockForward(layer, /*recompute=*/true));
  }

  // Feed-forward: d_h = d_out . w2, then SwiGLU, then w1 and w3 back into the norm's output.
  TITAN_ASSIGN_OR_RETURN(const float* d_out, tp_.GatherTokens(d_residual_, tokens_full_, nl, d));
  TITAN_RETURN_IF_ERROR(Zero(d_h_, n * f));
  TITAN_RETURN_IF_ERROR(ProjectBackward(d_out, x.h, block.weights[kW2], d_h_));
  TITAN_RETURN_IF_ERROR(Zero(d_a_, n * f));
  TITAN_RETURN_IF_ERROR(Zero(d_b_, n * f));
  TITAN_RETURN_IF_ERROR(compute_->SwiGluBackward(View(d_h_, {n * f}), View(x.a, {n * f}),
                                                 View(x.b, {n * f}), View(d_a_, {n * f}),
                                                 View(d_b_, {n * f})));
  TITAN_RETURN_IF_ERROR(Zero(d_norm_out_, n * d));
  TITAN_RETURN_IF_ERROR(ProjectBackward(d_a_, x.ln2, block.weights[kW1], d_norm_out_));
  TITAN_RETURN_IF_ERROR(ProjectBackward(d_b_, x.ln2, block.weights[kW3], d_norm_out_));
  TITAN_RETURN_IF_ERROR(
      NormBackward(d_residual_, d_norm_out_, x.x_mid, x.rstd2, block.weights[kFfnNorm]));

  // Attention: d_att = d_out . wo, the attention's backward, RoPE back, then wq, wk and wv.
  TITAN_ASSIGN_OR_RETURN(d_out, tp_.GatherTokens(d_residual_, tokens_full_, nl, d));
  TITAN_RETURN_IF_ERROR(Zero(d_att_, n * qd));
  TITAN_RETURN_IF_ERROR(ProjectBackward(d_out, View(x.att, {n, qd}), block.weights[kWo], d_att_));
  TITAN_RETURN_IF_ERROR(Zero(d_q_, n * qd));
  TITAN_RETURN_IF_ERROR(Zero(d_k_, n * kvd));
  TITAN_RETURN_IF_ERROR(Zero(d_v_, n * kvd));
  TITAN_RETURN_IF_ERROR(AttendBackward(x));
  const TensorView cos = View(rope_cos_, {seq_len_, hd / 2});
  const TensorView sin = View(rope_sin_, {seq_len_, hd / 2});
  TITAN_RETURN_IF_ERROR(
      compute_->RopeBackward(cos, sin, View(d_q_, {batch_, seq_len_, local.heads, hd})));
  TITAN_RETURN_IF_ERROR(
      compute_->RopeBackward(cos, sin, View(d_k_, {batch_, seq_len_, local.kv_heads, hd})));
  TITAN_RETURN_IF_ERROR(Zero(d_norm_out_, n * d));
  const std::pair<const float*, Weight> projections[] = {{d_q_, kWq}, {d_k_, kWk}, {d_v_, kWv}};
  for (const auto& [grad, weight] : projections) {
    TITAN_RETURN_IF_ERROR(ProjectBackward(grad, x.ln1, block.weights[weight], d_norm_out_));
  }
  return NormBackward(d_residual_, d_norm_out_, residual_[layer], x.rstd1,
                      block.weights[kAttentionNorm]);
}

absl::Status LlamaModel::Backward() {
  ScopedSpan span("module", "model", ".backward");
  if (!tokens_valid_) {
    return absl::FailedPreconditionError("model: Backward needs a Forward first");
  }
  tokens_valid_ = false;
  TITAN_RETURN_IF_ERROR(root_.BeforeBackward());
  TITAN_RETURN_IF_ERROR(HeadBackward(/*root_hooks=*/false));
  TITAN_RETURN_IF_ERROR(BackwardLayers(0, config_.n_layers));
  TITAN_RETURN_IF_ERROR(EmbeddingBackward(/*root_hooks=*/false));
  return root_.AfterBackward();
}

// Leaves the gradient of the last block's output in d_residual_.
absl::Status LlamaModel::HeadBackward(bool root_hooks) {
  const LocalSizes local = this->local();
  const int64_t n = batch_ * seq_len_, d = config_.dim, v = local.vocab;
  float* d_logits = logits_;  // the logits are spent: their gradient takes their place
  if (root_hooks) {
    TITAN_RETURN_IF_ERROR(deferring_ ? root_.BeforeForward() : root_.BeforeBackward());
  }
  TITAN_RETURN_IF_ERROR(compute_->CrossEntropyBackward(View(logits_, {n, v}), View(loss_lse_, {n}),
                                                       Tokens(targets_device_), local.first_vocab,
                                                       1.0f, View(d_logits, {n, v})));
  TITAN_RETURN_IF_ERROR(Zero(d_norm_out_, n * d));
  TITAN_RETURN_IF_ERROR(ProjectBackward(d_logits, final_norm_, output_, d_norm_out_));
  TITAN_RETURN_IF_ERROR(Zero(d_residual_, n_local_ * d));
  TITAN_RETURN_IF_ERROR(
      NormBackward(d_residual_, d_norm_out_, residual_.back(), final_rstd_, norm_));
  if (root_hooks) {
    TITAN_RETURN_IF_ERROR(deferring_ ? root_.AfterForward() : root_.AfterBackward());
  }
  return absl::OkStatus();
}

// From the gradient of the first block's input in d_residual_.
absl::Status LlamaModel::EmbeddingBackward(bool root_hooks) {
  const int64_t n = batch_ * seq_len_, d = config_.dim;
  TITAN_ASSIGN_OR_RETURN(const float* d_embedded,
                         tp_.GatherTokens(d_residual_, tokens_full_, n_local_, d));
  if (deferring_ != nullptr) {
    TITAN_ASSIGN_OR_RETURN(TensorView saved,
                           KeepForWeightPass(View(d_embedded, {n * d}), tok_embeddings_, false));
    deferring_->deferred[deferring_stage_].push_back(
        {DeferredGrad::kEmbedding, -1, tok_embeddings_, n, saved, TensorView{}});
    return absl::OkStatus();
  }
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.BeforeBackward());
  TITAN_RETURN_IF_ERROR(compute_->EmbeddingBackward(Tokens(tokens_device_),
                                                    View(d_embedded, {n * d}), local().first_vocab,
                                                    parameters_[tok_embeddings_].grad));
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.AfterBackward());
  return absl::OkStatus();
}

}  // namespace titan
