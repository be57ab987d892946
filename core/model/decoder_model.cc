#include "core/model/decoder_model.h"

#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/cpu/cpu_compute.h"
#include "core/model/modules/latent_attention.h"
#include "core/runtime/profiled_compute.h"
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

absl::StatusOr<std::unique_ptr<DecoderModel>> DecoderModel::Create(const LlamaConfig& config,
                                                                   const ActivationCheckpoint& ac,
                                                                   const ModelCompute& where,
                                                                   const PipelinePlan& stages,
                                                                   const ModelFamily& family) {
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
  // Another device's kernels are timed on it in profiled steps; the CPU's trace themselves.
  std::unique_ptr<Compute> profiled;
  if (compute->device().type != DeviceType::kCpu) {
    profiled = std::make_unique<ProfiledCompute>(*compute);
    compute = profiled.get();
  }
  std::unique_ptr<DecoderModel> model(
      new DecoderModel(config, ac, *compute, where.device, where.matmul_dtype, family));
  model->profiled_compute_ = std::move(profiled);
  model->stages_ = plan.local;
  model->num_stages_ = plan.num_stages;
  const bool first = model->holds_first_stage(), last = model->holds_last_stage();
  if (config.tie_embeddings && first != last) {
    return absl::InvalidArgumentError(
        "model: tie_embeddings shares the embedding with the output projection, which pipeline "
        "parallelism puts on different ranks; use a flavor without tied embeddings");
  }
  const std::vector<ParameterDecl> owned = InArenaOrder(model->OwnedParameters(1));
  ArenaPlan params_plan;
  for (const ParameterDecl& decl : owned) {
    TITAN_RETURN_IF_ERROR(params_plan.Add(decl.name, decl.shape).status());
  }
  TITAN_ASSIGN_OR_RETURN(model->params_, Arena::Allocate(params_plan, where.device, "parameters"));
  TITAN_ASSIGN_OR_RETURN(model->grads_, Arena::Allocate(params_plan, where.device, "gradients"));
  model->plan_ = std::move(params_plan);
  std::vector<Parameter>& parameters = model->ctx_.parameters;
  for (int i = 0; i < model->params_.size(); ++i) {
    Parameter p;
    p.name = model->params_.name(i);
    p.full_shape = model->params_.at(i).shape();
    p.tp_style = owned[i].tp_style;
    p.expert = owned[i].expert;
    p.value = model->params_.at(i).view();
    p.grad = model->grads_.at(i).view();
    // Under mixed precision a weight that is only ever a matmul operand may be handed over in
    // bf16 by a plugin that gathers it. The norms, and an embedding table the output shares, are
    // read in f32.
    if (owned[i].matmul_weight && where.matmul_dtype == DType::kBF16) {
      p.compute_dtype = DType::kBF16;
    }
    p.weight_decay = !owned[i].buffer;  // with no gradient either, the optimizer leaves it be
    parameters.push_back(std::move(p));
    model->inits_.push_back(owned[i].init);
  }
  model->BuildModules();
  return model;
}

void DecoderModel::BuildModules() {
  const FamilyParameters owned = OwnedParameters(1);
  std::vector<Parameter>& parameters = ctx_.parameters;
  // Arena order: the embedding, each block's parameters, the final norm and the output (those
  // of this model's stages).
  int next = 0;
  if (holds_first_stage()) {
    tok_embeddings_ = next++;
    embedding_ = std::make_unique<TokenEmbedding>(ctx_, tok_embeddings_);
    root_.AddParameter(&parameters[tok_embeddings_]);
  }
  blocks_.resize(config_.n_layers);
  layer_module_.assign(config_.n_layers, nullptr);
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    if (!OwnsLayer(l)) continue;
    auto layer = std::make_unique<ModuleNode>(absl::StrCat("layers.", l));
    std::vector<int> weights;
    for (size_t i = 0; i < owned.blocks[l].size(); ++i) {
      weights.push_back(next);
      layer->AddParameter(&parameters[next++]);
    }
    blocks_[l] = family_.MakeBlock(ctx_, l, weights, ac_.PolicyFor(l));
    root_.AddChild(layer.get());
    layer_module_[l] = layer.get();
    layer_modules_.push_back(std::move(layer));
  }
  if (holds_last_stage()) {
    norm_ = next++;
    output_ = config_.tie_embeddings ? tok_embeddings_ : next++;
    final_norm_ = std::make_unique<RmsNorm>(ctx_, norm_);
    head_ = std::make_unique<OutputHead>(ctx_, output_);
    root_.AddParameter(&parameters[norm_]);
    if (!config_.tie_embeddings) root_.AddParameter(&parameters[output_]);
  }
  root_.set_tensor_parallel_target(this);
  if (config_.moe.enabled()) root_.set_expert_parallel_target(this);
  root_.set_pipeline_stage_target(this);
  root_.set_attention_host(this);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> DecoderModel::WholeParameterShapes()
    const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (ParameterDecl& decl : InArenaOrder(family_.Declare(config_, 1))) {
    shapes.emplace_back(std::move(decl.name), std::move(decl.shape));
  }
  return shapes;
}

bool DecoderModel::OwnsLayer(int64_t layer) const {
  for (const PipelineStage& s : stages_) {
    if (layer >= s.first_layer && layer < s.end_layer) return true;
  }
  return false;
}

FamilyParameters DecoderModel::OwnedParameters(int64_t tp) const {
  FamilyParameters owned = family_.Declare(config_, tp);
  if (!holds_first_stage()) owned.embedding.clear();
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    if (!OwnsLayer(l)) owned.blocks[l].clear();
  }
  if (!holds_last_stage()) owned.head.clear();
  return owned;
}

absl::Status DecoderModel::CheckTensorParallelDegree(int degree) const {
  return titan::CheckTensorParallelDegree(config_, degree);
}

absl::Status DecoderModel::SetTensorParallel(const TensorParallelLayout& layout) {
  const TensorParallelGroup tp(layout.group, layout.overlap);
  const int t = tp.size();
  TITAN_RETURN_IF_ERROR(CheckTensorParallelDegree(t));
  const std::vector<ParameterDecl> decls = InArenaOrder(OwnedParameters(t));
  for (size_t i = 0; i < decls.size(); ++i) {
    const Parameter& p = ctx_.parameters[i];
    if (p.value.shape != decls[i].shape || p.grad.shape != decls[i].shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor parallel degree ", t, ": expected parameter ", p.name, " to hold [",
                       absl::StrJoin(decls[i].shape, ", "), "], found [",
                       absl::StrJoin(p.value.shape, ", "), "]"));
    }
  }
  ctx_.tp = tp;
  batch_ = seq_len_ = 0;  // the activations' sizes change with the degree
  tokens_valid_ = false;
  return absl::OkStatus();
}

std::vector<std::string> DecoderModel::DescribeAsyncTensorParallel() const {
  if (ctx_.tp.overlap() == nullptr) return {};
  std::vector<std::string> lines = {
      "[tp] async tensor parallelism: each norm's all-gather runs by chunks under the first "
      "projection reading it, each row-parallel projection's reduce-scatter under its own "
      "matmul; in the backward the residual gradient's all-gather under the row-parallel "
      "projections' input gradients, and the norm's reduce-scatter under the last "
      "column-parallel projection's (wv, w3)"};
  if (ctx_.float8 != nullptr) {
    lines.push_back(
        "[tp] async: the Float8 projections run by chunks too, each chunk quantized by the "
        "scales of the whole operand (amaxes reduced before the ring) and the weight once");
  }
  if (config_.moe.enabled()) {
    lines.push_back(absl::StrCat(
        "[tp] async: layers ", config_.moe.dense_layers, " to ", config_.n_layers - 1,
        ": the routed experts' reduce-scatter stays synchronous (their rows come back through "
        "the combine, not one matmul), and so does the gather before their backward"));
  }
  if (config_.mla.enabled() || config_.moe.enabled()) {
    lines.push_back(
        "[tp] async: in latent attention and mixture-of-experts layers the norm's backward "
        "reduce-scatters the column-parallel projections' input gradients synchronously (their "
        "last projection does not run it by chunks yet); in the other layers wv's and w3's input "
        "gradients run it");
  }
  return lines;
}

std::vector<OverlapTime> DecoderModel::TakeTensorParallelOverlap() {
  std::vector<OverlapTime> times = std::exchange(ctx_.overlap_times, {});
  const double synchronous = ctx_.tp.TakeSynchronousSeconds();
  if (synchronous > 0) times.push_back({"synchronous", 0, synchronous});
  return times;
}

absl::Status DecoderModel::CheckExpertParallelDegree(int degree) const {
  const MoeConfig& moe = config_.moe;
  if (!moe.enabled()) {
    return absl::InvalidArgumentError(absl::StrCat("expert parallel degree ", degree,
                                                   ": the model has no routed experts to split"));
  }
  if (degree < 1 || moe.experts % degree != 0) {
    return absl::InvalidArgumentError(absl::StrCat("expert parallel degree ", degree,
                                                   " does not divide the model's ", moe.experts,
                                                   " routed experts"));
  }
  return absl::OkStatus();
}

absl::Status DecoderModel::SetExpertParallel(const ExpertParallelLayout& layout) {
  const int degree = layout.group != nullptr ? layout.group->size() : 1;
  TITAN_RETURN_IF_ERROR(CheckExpertParallelDegree(degree));
  const int64_t local = config_.moe.experts / degree;
  const int64_t first = layout.group != nullptr ? layout.group->rank() * local : 0;
  for (const Parameter& p : ctx_.parameters) {
    if (!p.expert) continue;
    const int64_t offset = p.local_offset.empty() ? 0 : p.local_offset[0];
    if (p.value.shape.empty() || p.value.shape[0] != local || offset != first) {
      return absl::InvalidArgumentError(
          absl::StrCat("expert parallel degree ", degree, ": expected parameter ", p.name,
                       " to hold experts ", first, " to ", first + local - 1, ", found ",
                       p.value.shape.empty() ? 0 : p.value.shape[0], " from ", offset));
    }
  }
  ctx_.ep = degree > 1 ? layout.group : nullptr;
  batch_ = seq_len_ = 0;  // the experts' rows change with the degree
  tokens_valid_ = false;
  return absl::OkStatus();
}

void DecoderModel::ReleaseUnusedStorage() {
  bool values_used = false, grads_used = false;
  for (const Parameter& p : ctx_.parameters) {
    values_used = values_used || params_.Contains(p.value.data);
    grads_used = grads_used || grads_.Contains(p.grad.data);
  }
  if (!values_used) params_ = Arena();
  if (!grads_used) grads_ = Arena();
}

absl::Status DecoderModel::SaveParameters(const std::string& path) const {
  TITAN_ASSIGN_OR_RETURN(Arena copy, Arena::Allocate(plan_));
  for (int i = 0; i < copy.size(); ++i) {
    const Parameter& p = ctx_.parameters[i];
    if (p.value.data == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("saving ", path, ": parameter ", p.name, " is sharded; unshard it first"));
    }
    TITAN_RETURN_IF_ERROR(ctx_.compute.CopyToHost(p.value, copy.at(i).data<float>()));
  }
  return WriteArena(copy, path);
}

void DecoderModel::ZeroGrad() {
  if (grads_.flat_size() == 0) return;
  const TensorView all = ctx_.F32(grads_.flat_data(), {static_cast<int64_t>(grads_.flat_size())});
  ctx_.compute.Fill(all, 0.0f).IgnoreError();  // the arena's own memory: cannot fail
}

absl::StatusOr<std::vector<Float8LinearChoice>> DecoderModel::ConvertToFloat8(
    const Float8Plugin& plugin, bool gather_float8) {
  std::vector<Parameter>& parameters = ctx_.parameters;
  std::vector<Float8LinearChoice> linears;
  auto add = [&](int weight, std::string fqn, bool grouped = false) {
    linears.push_back({weight, std::move(fqn), parameters[weight].full_shape,
                       Float8LinearChoice::kFloat8, grouped});
  };
  ctx_.row_parallel.assign(parameters.size(), false);
  for (const std::unique_ptr<DecoderBlock>& block : blocks_) {
    if (block == nullptr) continue;  // a layer of another pipeline stage
    for (const int w : block->linear_weights()) {
      const std::string& name = parameters[w].name;
      add(w, name.substr(0, name.size() - std::string(".weight").size()));
      ctx_.row_parallel[w] = parameters[w].tp_style == TensorParallelStyle::kRowwise;
    }
    for (const int w : block->expert_weights()) add(w, parameters[w].name, /*grouped=*/true);
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
      // A tied output weight is also the embedding table, which is read in f32; grouped experts
      // scale rowwise, never with the gather's one scale (the recipe check above refuses them).
      if (c.outcome == Float8LinearChoice::kFloat8 && c.weight != tok_embeddings_ && !c.grouped) {
        parameters[c.weight].compute_dtype = DType::kF8E4M3;
      }
    }
  }
  float8_ = std::make_unique<Float8Linears>(recipe, ctx_.compute, ctx_.device, linears);
  ctx_.float8 = float8_.get();
  return linears;
}

absl::Status DecoderModel::PlanActivations(int64_t batch, int64_t seq_len) {
  if (batch == batch_ && seq_len == seq_len_) return absl::OkStatus();
  const LlamaConfig& c = config_;
  const int64_t t = ctx_.tp.size();
  if (seq_len % t != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model input: sequence parallel over ", t, " tensor-parallel ranks expected ",
                     "seq_len divisible by ", t, ", found ", seq_len));
  }
  batch_ = seq_len_ = 0;  // set again once planned
  const LocalSizes local = ctx_.local();
  // n: every token of the batch, as the column-parallel projections see them; nl: this rank's.
  const int64_t n = batch * seq_len, nl = n / t, d = c.dim, f = local.hidden;
  const int64_t qd = local.heads * c.head_dim(), kvd = local.kv_heads * c.head_dim();
  // The widest dense feed-forward: the block's own, or a mixture of experts' shared experts.
  const int64_t ffn = std::max(f, local.shared_hidden);
  ctx_.batch = batch, ctx_.seq_len = seq_len, ctx_.n = n, ctx_.n_local = nl;
  // Two plans: what each microbatch keeps from its forward to its backward (a set), and the
  // scratch all microbatches share (recomputed activations, gradients in flight, tables). Each
  // block activation belongs to the stage that writes it, kept in the set or recomputed into
  // one shared slot for every layer as the block's policy says.
  ArenaPlan set_plan, shared_plan;
  set_slots_.assign(c.n_layers, {});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (blocks_[l] == nullptr) continue;
    BlockActs unused;
    for (const ActivationSlot& slot : blocks_[l]->Activations(unused)) {
      const bool kept = KeepsStage(blocks_[l]->policy(), *slot.stage);
      std::string name =
          kept ? absl::StrCat("layers.", l, ".", slot.name) : absl::StrCat("recompute.", slot.name);
      if (kept) {
        TITAN_RETURN_IF_ERROR(set_plan.Add(name, slot.shape, slot.dtype).status());
      } else {
        shared_plan.Add(name, slot.shape, slot.dtype).IgnoreError();  // one slot for every layer
      }
      set_slots_[l].push_back(std::move(name));
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
  if (head_ != nullptr) {
    TITAN_RETURN_IF_ERROR(set_plan.Add("final_norm", {n, d}, ctx_.matmul_dtype).status());
    TITAN_RETURN_IF_ERROR(set_plan.Add("final_rstd", {nl}).status());
    OutputActs unused;
    std::vector<ActivationSlot> head;
    head_->ListActivations(unused, head);
    for (const ActivationSlot& slot : head) {
      TITAN_RETURN_IF_ERROR(set_plan.Add(slot.name, slot.shape, slot.dtype).status());
    }
  }
  TITAN_RETURN_IF_ERROR(set_plan.Add("tokens", {n}, DType::kI32).status());
  TITAN_RETURN_IF_ERROR(set_plan.Add("targets", {n}, DType::kI32).status());
  TITAN_ASSIGN_OR_RETURN(ArenaPlan deferred_plan, PlanDeferredGrads());

  const int64_t half = c.head_dim() / 2;
  SharedScratch& s = ctx_.scratch;
  s = SharedScratch{};
  struct Single {
    TensorView* view;
    const char* name;
    int64_t size;
  };
  std::vector<Single> singles = {
      {&s.rope_cos, "rope_cos", seq_len * half},
      {&s.rope_sin, "rope_sin", seq_len * half},
      {&s.d_residual, "d_residual", nl * d},
      {&s.d_norm_out, "d_norm_out", n * d},
      {&s.d_att, "d_att", n * qd},
      {&s.d_q, "d_q", n * qd},
      {&s.d_k, "d_k", n * kvd},
      {&s.d_v, "d_v", n * kvd},
      {&s.d_h, "d_h", n * ffn},
      {&s.d_a, "d_a", n * ffn},
      {&s.d_b, "d_b", n * ffn},
  };
  if (c.moe.enabled()) {
    // The experts' rows: m assignments, or under expert parallelism all the ep ranks' at most.
    const int64_t m = n * c.moe.top_k, rows = ctx_.expert_rows(), hm = local.expert_hidden;
    singles.insert(singles.end(), {{&s.moe_d_y, "moe_d_y", m * d},
                                   {&s.moe_d_h, "moe_d_h", rows * hm},
                                   {&s.moe_d_a, "moe_d_a", rows * hm},
                                   {&s.moe_d_b, "moe_d_b", rows * hm},
                                   {&s.moe_d_x, "moe_d_x", m * d},
                                   {&s.moe_d_logits, "moe_d_logits", n * c.moe.experts},
                                   {&s.moe_d_weights, "moe_d_weights", n * c.moe.top_k}});
    if (ctx_.ep_size() > 1) {
      singles.insert(singles.end(), {{&s.moe_recv_d_y, "moe_recv_d_y", rows * d},
                                     {&s.moe_recv_d_x, "moe_recv_d_x", rows * d}});
    }
    if (t > 1) singles.push_back({&s.moe_router_grad, "moe_router_grad", c.moe.experts * d});
    if (c.moe.aux_loss_alpha > 0) {
      // Also the per-sequence sums context parallelism reduces, [batch, 2 x experts].
      singles.push_back(
          {&s.moe_aux_d_logits, "moe_aux_d_logits", std::max(n, 2 * batch) * c.moe.experts});
    }
  }
  if (c.mla.enabled()) {
    const int64_t width = LatentAttention::ScratchWidth(c);
    singles.insert(singles.end(), {{&s.latent_a, "latent_a", n * width},
                                   {&s.latent_b, "latent_b", n * width},
                                   {&s.latent_c, "latent_c", n * width},
                                   {&s.latent_ones, "latent_ones", c.n_heads}});
  }
  if (t > 1) {
    singles.push_back({&s.tokens_local, "tokens_local", nl * d});
    singles.push_back({&s.tokens_full, "tokens_full", n * d});
    singles.push_back({&s.norm_grad, "norm_grad", std::max(d, c.head_dim())});
  }
  for (const Single& single : singles) {
    TITAN_RETURN_IF_ERROR(shared_plan.Add(single.name, {single.size}).status());
  }
  // Mixed precision: the bf16 roundings of one matmul's f32 input (the attention's output),
  // output gradient and weight.
  int64_t largest_weight = 0;
  for (const ParameterDecl& decl : InArenaOrder(OwnedParameters(t))) {
    int64_t numel = 1;
    for (int64_t extent : decl.shape) numel *= extent;
    largest_weight = std::max(largest_weight, numel);
  }
  // A mixture of experts rounds the gradients of its m assignments' outputs and hidden features
  // and of the router's logits.
  const int64_t moe_grads =
      c.moe.enabled()
          ? std::max(ctx_.expert_rows() * std::max(d, local.expert_hidden), n * c.moe.experts)
          : 0;
  // Latent attention rounds inputs and output gradients of its own widths (ScratchWidth's).
  const int64_t latent = c.mla.enabled() ? LatentAttention::ScratchWidth(c) : 0;
  const std::array<int64_t, kOperandScratches> scratch_sizes = {
      n * std::max(qd, latent),
      std::max(n * std::max({d, qd, ffn, local.vocab, latent}), moe_grads), largest_weight};
  const bool bf16 = ctx_.matmul_dtype == DType::kBF16;
  for (int i = 0; i < kOperandScratches && bf16; ++i) {
    TITAN_RETURN_IF_ERROR(
        shared_plan.Add(absl::StrCat("bf16_scratch.", i), {scratch_sizes[i]}, DType::kBF16)
            .status());
  }
  sets_.clear();
  free_sets_.clear();
  current_ = nullptr;
  set_of_.assign(set_of_.size(), -1);
  TITAN_ASSIGN_OR_RETURN(shared_arena_, Arena::Allocate(shared_plan, ctx_.device, "activations"));
  set_plan_ = std::move(set_plan);
  deferred_plan_ = std::move(deferred_plan);
  for (const Single& single : singles) *single.view = shared_arena_.Find(single.name)->view();
  for (int i = 0; i < kOperandScratches && bf16; ++i) {
    s.bf16[i] = shared_arena_.Find(absl::StrCat("bf16_scratch.", i))->view();
  }
  s.rope_cos = ModuleContext::Reshaped(s.rope_cos, {seq_len, half});
  s.rope_sin = ModuleContext::Reshaped(s.rope_sin, {seq_len, half});
  const RopeConfig& r = c.rope;
  const RopeSpec rope{c.head_dim(),      r.theta,           r.scaled,
                      r.scale_factor,    r.low_freq_factor, r.high_freq_factor,
                      r.original_context};
  // The local tokens sit where the attention's layout puts them in the whole sequences (under
  // context parallelism: chunks at their global positions).
  for (const TokenRun& run : ctx_.attention->Positions(seq_len)) {
    auto rows = [&](const TensorView& table) {
      return ctx_.F32(table.data_as<float>() + run.local_start * half, {run.length, half});
    };
    if (c.mla.enabled()) {
      TITAN_RETURN_IF_ERROR(LatentAttention::RopeTable(c, ctx_.compute, run.global_start,
                                                       rows(s.rope_cos), rows(s.rope_sin)));
    } else {
      TITAN_RETURN_IF_ERROR(
          ctx_.compute.RopeTable(rope, run.global_start, rows(s.rope_cos), rows(s.rope_sin)));
    }
  }
  batch_ = batch;
  seq_len_ = seq_len;
  // Set 0 serves the plain Forward and Backward, and is the pipeline's first free set.
  TITAN_ASSIGN_OR_RETURN(MicrobatchActs * first, NewActivationSet());
  free_sets_ = {0};
  Use(*first);
  return absl::OkStatus();
}

absl::StatusOr<ArenaPlan> DecoderModel::PlanDeferredGrads() {
  const int64_t n = ctx_.n, d = config_.dim;
  ArenaPlan plan;
  deferred_grad_entry_.assign(ctx_.parameters.size(), -1);
  deferred_input_entry_.assign(ctx_.parameters.size(), -1);
  auto add_grad = [&](int weight, std::vector<int64_t> shape) -> absl::Status {
    TITAN_ASSIGN_OR_RETURN(deferred_grad_entry_[weight],
                           plan.Add(ctx_.parameters[weight].name, std::move(shape)));
    return absl::OkStatus();
  };
  // Each projection's output gradient [n, out] and its input [n, in], which the set keeps unless
  // the block's policy recomputes it into shared scratch.
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    if (blocks_[l] == nullptr) continue;
    const DecoderBlock& block = *blocks_[l];
    absl::flat_hash_map<std::string, int> inputs;
    for (const ProjectionInput& p : block.Projections()) {
      TITAN_RETURN_IF_ERROR(add_grad(p.weight, {n, p.out}));
      if (KeepsStage(block.policy(), p.stage)) continue;
      const std::string name = absl::StrCat("layers.", l, ".", p.input);
      if (!inputs.contains(name)) {
        TITAN_ASSIGN_OR_RETURN(inputs[name], plan.Add(name, {n, p.in}, p.dtype));
      }
      deferred_input_entry_[p.weight] = inputs[name];
    }
    for (const int norm : block.norm_weights()) {
      TITAN_RETURN_IF_ERROR(add_grad(norm, {ctx_.parameters[norm].value.numel()}));
    }
  }
  // The output's gradient is the logits' memory, in the set already.
  if (holds_last_stage()) TITAN_RETURN_IF_ERROR(add_grad(norm_, {d}));
  if (holds_first_stage()) TITAN_RETURN_IF_ERROR(add_grad(tok_embeddings_, {n * d}));
  return plan;
}

absl::StatusOr<DecoderModel::MicrobatchActs*> DecoderModel::NewActivationSet() {
  auto set = std::make_unique<MicrobatchActs>();
  TITAN_ASSIGN_OR_RETURN(set->arena, Arena::Allocate(set_plan_, ctx_.device, "activations"));
  // A slot of the set, or of the shared recompute scratch; empty when this rank has none.
  auto view = [&](const std::string& name) -> TensorView {
    const Arena& arena = absl::StartsWith(name, "recompute.") ? shared_arena_ : set->arena;
    absl::StatusOr<Tensor> found = arena.Find(name);
    return found.ok() ? found->view() : TensorView{};
  };
  const int64_t layers = config_.n_layers;
  set->blocks.assign(layers, BlockActs{});
  for (int64_t l = 0; l < layers; ++l) {
    if (blocks_[l] == nullptr) continue;
    const std::vector<ActivationSlot> slots = blocks_[l]->Activations(set->blocks[l]);
    for (size_t i = 0; i < slots.size(); ++i) *slots[i].view = view(set_slots_[l][i]);
  }
  for (int64_t l = 0; l <= layers; ++l) {
    set->residual.push_back(view(absl::StrCat("residual.", l)));
    set->d_boundary.push_back(view(absl::StrCat("d_boundary.", l)));
  }
  set->final_norm = view("final_norm");
  set->final_rstd = view("final_rstd");
  if (head_ != nullptr) {
    std::vector<ActivationSlot> head;
    head_->ListActivations(set->head, head);
    for (const ActivationSlot& slot : head) *slot.view = view(slot.name);
  }
  set->tokens = view("tokens");
  set->targets = view("targets");
  set->deferred.assign(stages_.size(), {});
  sets_.push_back(std::move(set));
  return sets_.back().get();
}

void DecoderModel::Use(MicrobatchActs& set) {
  current_ = &set;
  ctx_.token_ids = set.tokens;
  ctx_.target_ids = set.targets;
}

TensorView DecoderModel::logits() const {
  if (current_ == nullptr || head_ == nullptr) return {};
  return ModuleContext::Reshaped(current_->head.logits, {ctx_.n, ctx_.local().vocab});
}

size_t DecoderModel::activation_bytes() const {
  size_t floats = shared_arena_.flat_size();
  for (const auto& set : sets_) floats += set->arena.flat_size() + set->deferred_arena.flat_size();
  return floats * sizeof(float) + ctx_.attention->workspace_bytes();
}

absl::Status DecoderModel::SetAttention(CausalAttention* attention) {
  ctx_.attention = attention != nullptr ? attention : &local_attention_;
  batch_ = seq_len_ = 0;  // the activations' sizes change with the local sequence
  tokens_valid_ = false;
  return absl::OkStatus();
}

absl::Status DecoderModel::CheckTokens(const int32_t* tokens, const int32_t* targets) const {
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

absl::StatusOr<float> DecoderModel::Forward(const int32_t* tokens, const int32_t* targets,
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
  CausalAttention& attention = *ctx_.attention;
  TITAN_ASSIGN_OR_RETURN(const int64_t local_seq_len, attention.LocalSeqLen(seq_len));
  TITAN_ASSIGN_OR_RETURN(std::vector<int32_t> local_tokens,
                         attention.LocalTokens(tokens, batch, seq_len));
  TITAN_ASSIGN_OR_RETURN(std::vector<int32_t> local_targets,
                         attention.LocalTokens(targets, batch, seq_len));
  tokens = local_tokens.data(), targets = local_targets.data();
  TITAN_RETURN_IF_ERROR(PlanActivations(batch, local_seq_len));
  TITAN_RETURN_IF_ERROR(CheckTokens(tokens, targets));
  Use(*sets_[0]);
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyFromHost(tokens, ctx_.token_ids));
  TITAN_RETURN_IF_ERROR(ctx_.compute.CopyFromHost(targets, ctx_.target_ids));
  tokens_valid_ = true;
  TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  TITAN_RETURN_IF_ERROR(EmbedTokens(/*root_hooks=*/false));
  TITAN_RETURN_IF_ERROR(ForwardLayers(0, config_.n_layers));
  TITAN_ASSIGN_OR_RETURN(float loss, HeadForward(/*root_hooks=*/false));
  TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return attention.AverageLoss(loss);
}

absl::Status DecoderModel::EmbedTokens(bool root_hooks) {
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  TITAN_RETURN_IF_ERROR(embedding_->Forward(current_->residual[0]));
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return absl::OkStatus();
}

absl::StatusOr<float> DecoderModel::HeadForward(bool root_hooks) {
  MicrobatchActs& set = *current_;
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.BeforeForward());
  TITAN_RETURN_IF_ERROR(final_norm_->Forward(set.residual.back(), set.final_norm, set.final_rstd,
                                             /*leave_gather=*/true));
  absl::StatusOr<float> loss = head_->Forward(set.final_norm, set.head);
  TITAN_RETURN_IF_ERROR(ctx_.FinishGather());
  if (!loss.ok()) return loss.status();
  if (root_hooks) TITAN_RETURN_IF_ERROR(root_.AfterForward());
  return loss;
}

absl::Status DecoderModel::ForwardLayers(int64_t first, int64_t end) {
  MicrobatchActs& set = *current_;
  for (int64_t l = first; l < end; ++l) {
    ScopedSpan span("module", layer_module_[l]->name(), ".forward");
    TITAN_RETURN_IF_ERROR(layer_module_[l]->BeforeForward());
    TITAN_RETURN_IF_ERROR(
        blocks_[l]->Forward(set.blocks[l], set.residual[l], set.residual[l + 1], false));
    TITAN_RETURN_IF_ERROR(layer_module_[l]->AfterForward());
  }
  return absl::OkStatus();
}

// Under the zero-bubble split the weights' gradients wait for BackwardWeight, which runs the
// backward hooks; the input gradient needs only the weights, gathered as for a forward.
absl::Status DecoderModel::BackwardLayers(int64_t first, int64_t end) {
  MicrobatchActs& set = *current_;
  WeightPass* deferring = ctx_.deferring;
  for (int64_t l = end - 1; l >= first; --l) {
    ModuleNode& module = *layer_module_[l];
    ScopedSpan span("module", module.name(), deferring ? ".backward_input" : ".backward");
    if (deferring != nullptr) deferring->set_layer(static_cast<int>(l));
    TITAN_RETURN_IF_ERROR(deferring ? module.BeforeForward() : module.BeforeBackward());
    TITAN_RETURN_IF_ERROR(blocks_[l]->Backward(set.blocks[l], set.residual[l]));
    TITAN_RETURN_IF_ERROR(deferring ? module.AfterForward() : module.AfterBackward());
  }
  if (deferring != nullptr) deferring->set_layer(-1);
  return absl::OkStatus();
}

absl::Status DecoderModel::Backward() {
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

// Leaves the gradient of the last block's output in the d_residual scratch.
absl::Status DecoderModel::HeadBackward(bool root_hooks) {
  MicrobatchActs& set = *current_;
  const bool deferring = ctx_.deferring != nullptr;
  if (root_hooks) {
    TITAN_RETURN_IF_ERROR(deferring ? root_.BeforeForward() : root_.BeforeBackward());
  }
  const TensorView d_normed =
      ModuleContext::Reshaped(ctx_.scratch.d_norm_out, {ctx_.n, config_.dim});
  TITAN_RETURN_IF_ERROR(head_->Backward(set.final_norm, set.head, d_normed));
  TITAN_RETURN_IF_ERROR(ctx_.Zero(d_residual()));
  TITAN_RETURN_IF_ERROR(
      final_norm_->Backward(d_normed, set.residual.back(), set.final_rstd, d_residual()));
  if (root_hooks) {
    TITAN_RETURN_IF_ERROR(deferring ? root_.AfterForward() : root_.AfterBackward());
  }
  return absl::OkStatus();
}

// From the gradient of the first block's input in the d_residual scratch.
absl::Status DecoderModel::EmbeddingBackward(bool root_hooks) {
  return embedding_->Backward(d_residual(), root_hooks ? &root_ : nullptr);
}

}  // namespace titan
