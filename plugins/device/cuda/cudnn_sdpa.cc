#include "cudnn_sdpa.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace titan::cuda {
namespace {

// The unique ids of the tensors the caller binds (the variant pack); virtual ones count from 100.
enum SdpaUid : int64_t { kQ = 1, kK = 2, kV = 3, kO = 4, kStats = 5, kScale = 6, kMaskValue = 7 };

using Dims = std::array<int64_t, 4>;
using Desc = cudnnBackendDescriptor_t;

// Builds one graph's descriptors, keeping each, and names the step of every failure:
// "cuDNN SDPA forward: setting CUDNN_ATTR_TENSOR_STRIDES of tensor q: CUDNN_STATUS_BAD_PARAM: ...".
class GraphBuilder {
 public:
  GraphBuilder(const Cudnn& cudnn, const char* graph) : cudnn_(cudnn), graph_(graph) {}

  absl::Status Check(cudnnStatus_t status, const std::string& step) const {
    if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
    const std::string text =
        absl::StrCat("cuDNN ", graph_, ": ", step, ": ", CudnnStatusText(cudnn_, status));
    // NOT_SUPPORTED: no engine takes the graph (the shape); the caller falls back.
    if (static_cast<int>(status) / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000) {
      return absl::UnimplementedError(text);
    }
    return absl::FailedPreconditionError(text);
  }

  absl::StatusOr<Desc> Create(cudnnBackendDescriptorType_t type, const std::string& name) {
    Desc descriptor = nullptr;
    TITAN_RETURN_IF_ERROR(Check(cudnn_.BackendCreateDescriptor(type, &descriptor),
                                absl::StrCat("creating the descriptor of ", name)));
    descriptors_.emplace_back(&cudnn_, descriptor);
    return descriptor;
  }

  absl::Status Set(Desc descriptor, const std::string& name, cudnnBackendAttributeName_t attribute,
                   const char* attribute_name, cudnnBackendAttributeType_t type, int64_t count,
                   const void* values) {
    return Check(cudnn_.BackendSetAttribute(descriptor, attribute, type, count, values),
                 absl::StrCat("setting ", attribute_name, " of ", name));
  }

  absl::Status Finalize(Desc descriptor, const std::string& name) {
    return Check(cudnn_.BackendFinalize(descriptor), absl::StrCat("finalizing ", name));
  }

  // A tensor of the graph: in memory (bound by uid at execution), virtual (an intermediate
  // cuDNN keeps on chip) or a scalar passed by value from the host.
  enum class Kind { kMemory, kVirtual, kByValue };
  absl::StatusOr<Desc> Tensor(const std::string& label, int64_t uid, cudnnDataType_t type,
                              const Dims& dims, const Dims& strides, Kind kind);

  absl::StatusOr<Desc> Pointwise(const std::string& label, cudnnPointwiseMode_t mode,
                                 cudnnDataType_t math, Desc x, Desc b, Desc y, Desc t = nullptr,
                                 int64_t axis = -1);
  absl::StatusOr<Desc> Reduction(const std::string& label, cudnnReduceTensorOp_t mode, Desc x,
                                 Desc y);
  absl::StatusOr<Desc> Matmul(const std::string& label, Desc a, Desc b, Desc c);

  // The operation graph of every operation added, then the first engine configuration of the
  // heuristic that finalizes into an execution plan.
  absl::Status FinalizePlan(cudnnHandle_t handle, SdpaForwardPlan& plan);

  std::vector<CudnnDescriptor> Release() { return std::move(descriptors_); }

 private:
  const Cudnn& cudnn_;
  const char* graph_;
  std::vector<CudnnDescriptor> descriptors_;
  std::vector<Desc> operations_;
  int64_t next_virtual_uid_ = 100;
};

#define TITAN_CUDNN_SET(descriptor, name, attribute, type, count, values) \
  Set(descriptor, name, attribute, #attribute, type, count, values)

absl::StatusOr<Desc> GraphBuilder::Tensor(const std::string& label, int64_t uid,
                                          cudnnDataType_t type, const Dims& dims,
                                          const Dims& strides, Kind kind) {
  const std::string name = absl::StrCat("tensor ", label);
  if (kind == Kind::kVirtual) uid = next_virtual_uid_++;
  TITAN_ASSIGN_OR_RETURN(Desc t, Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, name));
  const int64_t alignment = 16;
  const bool is_virtual = kind == Kind::kVirtual, by_value = kind == Kind::kByValue;
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(t, name, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(t, name, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data()));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(t, name, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data()));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(t, name, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(t, name, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(t, name, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
  if (by_value) {
    TITAN_RETURN_IF_ERROR(
        TITAN_CUDNN_SET(t, name, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
  }
  TITAN_RETURN_IF_ERROR(Finalize(t, name));
  return t;
}

absl::StatusOr<Desc> GraphBuilder::Pointwise(const std::string& label, cudnnPointwiseMode_t mode,
                                             cudnnDataType_t math, Desc x, Desc b, Desc y, Desc t,
                                             int64_t axis) {
  const std::string name = absl::StrCat("pointwise descriptor ", label);
  TITAN_ASSIGN_OR_RETURN(Desc pw, Create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, name));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(pw, name, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(pw, name, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math));
  if (mode == CUDNN_POINTWISE_GEN_INDEX) {
    TITAN_RETURN_IF_ERROR(
        TITAN_CUDNN_SET(pw, name, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
  }
  TITAN_RETURN_IF_ERROR(Finalize(pw, name));

  const std::string op_name = absl::StrCat("pointwise operation ", label);
  TITAN_ASSIGN_OR_RETURN(Desc op, Create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op_name));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  if (b != nullptr) {
    TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
  }
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  if (t != nullptr) {
    TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t));
  }
  TITAN_RETURN_IF_ERROR(Finalize(op, op_name));
  operations_.push_back(op);
  return op;
}

absl::StatusOr<Desc> GraphBuilder::Reduction(const std::string& label, cudnnReduceTensorOp_t mode,
                                             Desc x, Desc y) {
  const std::string name = absl::StrCat("reduction descriptor ", label);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  TITAN_ASSIGN_OR_RETURN(Desc reduction, Create(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, name));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(reduction, name, CUDNN_ATTR_REDUCTION_OPERATOR,
                                        CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(reduction, name, CUDNN_ATTR_REDUCTION_COMP_TYPE,
                                        CUDNN_TYPE_DATA_TYPE, 1, &math));
  TITAN_RETURN_IF_ERROR(Finalize(reduction, name));

  const std::string op_name = absl::StrCat("reduction operation ", label);
  TITAN_ASSIGN_OR_RETURN(Desc op, Create(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op_name));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &reduction));
  TITAN_RETURN_IF_ERROR(Finalize(op, op_name));
  operations_.push_back(op);
  return op;
}

absl::StatusOr<Desc> GraphBuilder::Matmul(const std::string& label, Desc a, Desc b, Desc c) {
  const std::string name = absl::StrCat("matmul descriptor ", label);
  const cudnnDataType_t math = CUDNN_DATA_FLOAT;
  TITAN_ASSIGN_OR_RETURN(Desc matmul, Create(CUDNN_BACKEND_MATMUL_DESCRIPTOR, name));
  TITAN_RETURN_IF_ERROR(
      TITAN_CUDNN_SET(matmul, name, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &math));
  TITAN_RETURN_IF_ERROR(Finalize(matmul, name));

  const std::string op_name = absl::StrCat("matmul operation ", label);
  TITAN_ASSIGN_OR_RETURN(Desc op, Create(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op_name));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_MATMUL_ADESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_MATMUL_BDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_MATMUL_CDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_MATMUL_DESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &matmul));
  TITAN_RETURN_IF_ERROR(Finalize(op, op_name));
  operations_.push_back(op);
  return op;
}

absl::Status GraphBuilder::FinalizePlan(cudnnHandle_t handle, SdpaForwardPlan& plan) {
  const std::string graph_name = "the operation graph";
  TITAN_ASSIGN_OR_RETURN(Desc graph, Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph_name));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(graph, graph_name, CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
                                        CUDNN_TYPE_HANDLE, 1, &handle));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(
      graph, graph_name, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<int64_t>(operations_.size()), operations_.data()));
  TITAN_RETURN_IF_ERROR(Finalize(graph, graph_name));

  const std::string heuristic_name = "the engine heuristic (mode A)";
  const cudnnBackendHeurMode_t heuristic_mode = CUDNN_HEUR_MODE_A;
  TITAN_ASSIGN_OR_RETURN(Desc heuristic,
                         Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, heuristic_name));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(heuristic, heuristic_name,
                                        CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(heuristic, heuristic_name, CUDNN_ATTR_ENGINEHEUR_MODE,
                                        CUDNN_TYPE_HEUR_MODE, 1, &heuristic_mode));
  TITAN_RETURN_IF_ERROR(Finalize(heuristic, heuristic_name));
  int64_t count = 0;
  TITAN_RETURN_IF_ERROR(
      Check(cudnn_.BackendGetAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
            "counting the heuristic's engine configurations"));
  if (count <= 0) {
    return absl::UnimplementedError(absl::StrCat(
        "cuDNN ", graph_, ": the heuristic offers no engine configuration for the graph"));
  }
  std::vector<Desc> configs;
  for (int64_t i = 0; i < count; ++i) {
    TITAN_ASSIGN_OR_RETURN(Desc config, Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                               absl::StrCat("engine configuration ", i)));
    configs.push_back(config);
  }
  int64_t returned = 0;
  TITAN_RETURN_IF_ERROR(Check(
      cudnn_.BackendGetAttribute(heuristic, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, configs.data()),
      "reading the heuristic's engine configurations"));
  // The first configuration that finalizes into a plan, as the frontend's build_plans does;
  // every refusal is kept for the error.
  std::string refusals;
  for (int64_t i = 0; i < std::min(returned, count); ++i) {
    const std::string name = absl::StrCat("the execution plan of engine configuration ", i);
    TITAN_ASSIGN_OR_RETURN(Desc candidate, Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, name));
    absl::Status built = TITAN_CUDNN_SET(candidate, name, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                         CUDNN_TYPE_HANDLE, 1, &handle);
    if (built.ok()) {
      built = TITAN_CUDNN_SET(candidate, name, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[i]);
    }
    if (built.ok()) built = Finalize(candidate, name);
    if (built.ok()) {
      int64_t workspace = 0, got = 0;
      TITAN_RETURN_IF_ERROR(
          Check(cudnn_.BackendGetAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                           CUDNN_TYPE_INT64, 1, &got, &workspace),
                absl::StrCat("reading CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE of ", name)));
      plan.plan = candidate;
      plan.workspace_bytes = workspace;
      plan.engine = i;
      return absl::OkStatus();
    }
    absl::StrAppend(&refusals, refusals.empty() ? "" : "; ", built.message());
  }
  return absl::UnimplementedError(absl::StrCat("cuDNN ", graph_, ": none of the heuristic's ",
                                               returned,
                                               " engine configurations finalizes: ", refusals));
}

// The graph of cuDNN frontend's scaled_dot_product_flash_attention with a causal mask and
// generate_stats, as it lowers for cuDNN 9: S = q k^T; S *= scale; the causal mask as
// GEN_INDEX rows and columns, CMP_GE and BINARY_SELECT; the softmax as max, sub, exp, sum, and
// stats = max + log(sum); P = exp / sum in bf16; out = P v. K is read transposed through its
// strides, so no copy is made.
absl::Status AddForwardGraph(GraphBuilder& g, const SdpaShape& shape) {
  const int64_t b = shape.batch, s = shape.seq_len, h = shape.heads, hk = shape.kv_heads,
                d = shape.head_dim;
  if (b <= 0 || s <= 0 || h <= 0 || hk <= 0 || d <= 0 || h % hk != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuDNN SDPA forward: batch ", b, ", seq_len ", s, ", heads ", h, ", kv_heads ", hk,
        ", head_dim ", d, " is no attention shape (all positive, heads a multiple of kv_heads)"));
  }
  using K = GraphBuilder::Kind;
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
  const Dims scores{b, h, s, s}, scores_strides{h * s * s, s * s, s, 1};
  const Dims rows{b, h, s, 1}, rows_strides{h * s, s, 1, 1};
  const Dims one{1, 1, 1, 1};

  TITAN_ASSIGN_OR_RETURN(
      Desc q, g.Tensor("q", kQ, bf16, {b, h, s, d}, {s * h * d, d, h * d, 1}, K::kMemory));
  TITAN_ASSIGN_OR_RETURN(Desc kt, g.Tensor("k (transposed)", kK, bf16, {b, hk, d, s},
                                           {s * hk * d, d, 1, hk * d}, K::kMemory));
  TITAN_ASSIGN_OR_RETURN(
      Desc v, g.Tensor("v", kV, bf16, {b, hk, s, d}, {s * hk * d, d, hk * d, 1}, K::kMemory));
  TITAN_ASSIGN_OR_RETURN(
      Desc o, g.Tensor("out", kO, bf16, {b, h, s, d}, {s * h * d, d, h * d, 1}, K::kMemory));
  TITAN_ASSIGN_OR_RETURN(Desc stats,
                         g.Tensor("stats", kStats, f32, rows, rows_strides, K::kMemory));
  TITAN_ASSIGN_OR_RETURN(Desc scale, g.Tensor("scale", kScale, f32, one, one, K::kByValue));
  TITAN_ASSIGN_OR_RETURN(Desc mask_value,
                         g.Tensor("mask value", kMaskValue, f32, one, one, K::kByValue));

  TITAN_ASSIGN_OR_RETURN(Desc s0, g.Tensor("S", 0, f32, scores, scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Matmul("q k^T", q, kt, s0).status());
  TITAN_ASSIGN_OR_RETURN(Desc s1,
                         g.Tensor("S scaled", 0, f32, scores, scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Pointwise("scale", CUDNN_POINTWISE_MUL, f32, s0, scale, s1).status());
  TITAN_ASSIGN_OR_RETURN(
      Desc row, g.Tensor("row index", 0, CUDNN_DATA_INT32, scores, scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Pointwise("row index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s1,
                                    nullptr, row, nullptr, 2)
                            .status());
  TITAN_ASSIGN_OR_RETURN(Desc column, g.Tensor("column index", 0, CUDNN_DATA_INT32, scores,
                                               scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Pointwise("column index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, s1,
                                    nullptr, column, nullptr, 3)
                            .status());
  TITAN_ASSIGN_OR_RETURN(Desc keep, g.Tensor("causal mask", 0, CUDNN_DATA_BOOLEAN, scores,
                                             scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("row >= column", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, column, keep)
          .status());
  TITAN_ASSIGN_OR_RETURN(Desc s2,
                         g.Tensor("S masked", 0, f32, scores, scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("causal select", CUDNN_POINTWISE_BINARY_SELECT, f32, s1, mask_value, s2, keep)
          .status());
  TITAN_ASSIGN_OR_RETURN(Desc max, g.Tensor("row max", 0, f32, rows, rows_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Reduction("row max", CUDNN_REDUCE_TENSOR_MAX, s2, max).status());
  TITAN_ASSIGN_OR_RETURN(Desc centered,
                         g.Tensor("S - max", 0, f32, scores, scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("S - max", CUDNN_POINTWISE_SUB, f32, s2, max, centered).status());
  TITAN_ASSIGN_OR_RETURN(Desc e, g.Tensor("exp", 0, f32, scores, scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("exp", CUDNN_POINTWISE_EXP, f32, centered, nullptr, e).status());
  TITAN_ASSIGN_OR_RETURN(Desc sum, g.Tensor("row sum", 0, f32, rows, rows_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Reduction("row sum", CUDNN_REDUCE_TENSOR_ADD, e, sum).status());
  TITAN_ASSIGN_OR_RETURN(Desc log_sum,
                         g.Tensor("log row sum", 0, f32, rows, rows_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("log", CUDNN_POINTWISE_LOG, f32, sum, nullptr, log_sum).status());
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("stats = max + log", CUDNN_POINTWISE_ADD, f32, max, log_sum, stats).status());
  TITAN_ASSIGN_OR_RETURN(Desc p, g.Tensor("P", 0, bf16, scores, scores_strides, K::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Pointwise("exp / sum", CUDNN_POINTWISE_DIV, f32, e, sum, p).status());
  TITAN_RETURN_IF_ERROR(g.Matmul("P v", p, v, o).status());

  return absl::OkStatus();
}

}  // namespace

CudnnDescriptor::CudnnDescriptor(CudnnDescriptor&& other) noexcept
    : cudnn_(other.cudnn_), descriptor_(std::exchange(other.descriptor_, nullptr)) {}

CudnnDescriptor::~CudnnDescriptor() {
  if (descriptor_ != nullptr) cudnn_->BackendDestroyDescriptor(descriptor_);
}

absl::StatusOr<SdpaForwardPlan> BuildSdpaForwardPlan(const Cudnn& cudnn, cudnnHandle_t handle,
                                                     const SdpaShape& shape) {
  GraphBuilder g(cudnn, "SDPA forward");
  TITAN_RETURN_IF_ERROR(AddForwardGraph(g, shape));
  SdpaForwardPlan plan;
  plan.shape = shape;
  TITAN_RETURN_IF_ERROR(g.FinalizePlan(handle, plan));
  plan.descriptors = g.Release();
  return plan;
}

absl::Status BuildSdpaForwardOperations(const Cudnn& cudnn, const SdpaShape& shape) {
  GraphBuilder g(cudnn, "SDPA forward");
  return AddForwardGraph(g, shape);
}

absl::Status ExecuteSdpaForward(const Cudnn& cudnn, cudnnHandle_t handle,
                                const SdpaForwardPlan& plan, const SdpaForwardOperands& operands) {
  // The scalars are read from the host when the work is enqueued.
  float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(plan.shape.head_dim)));
  // cuDNN before 9.10 wants the lowest finite value as the mask, later ones -infinity (the
  // frontend's get_negative_inf_value).
  float mask_value = cudnn.version < 91000 ? std::numeric_limits<float>::lowest()
                                           : -std::numeric_limits<float>::infinity();
  const std::array<int64_t, 7> uids{kQ, kK, kV, kO, kStats, kScale, kMaskValue};
  const std::array<void*, 7> pointers{const_cast<void*>(operands.q),
                                      const_cast<void*>(operands.k),
                                      const_cast<void*>(operands.v),
                                      operands.out,
                                      operands.stats,
                                      &scale,
                                      &mask_value};
  GraphBuilder g(cudnn, "SDPA forward execution");
  const std::string name = "the variant pack";
  void* workspace = operands.workspace;
  TITAN_ASSIGN_OR_RETURN(Desc pack, g.Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, name));
  TITAN_RETURN_IF_ERROR(g.TITAN_CUDNN_SET(pack, name, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                          CUDNN_TYPE_INT64, 7, uids.data()));
  TITAN_RETURN_IF_ERROR(g.TITAN_CUDNN_SET(pack, name, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                          CUDNN_TYPE_VOID_PTR, 7, pointers.data()));
  TITAN_RETURN_IF_ERROR(g.TITAN_CUDNN_SET(pack, name, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                          CUDNN_TYPE_VOID_PTR, 1, &workspace));
  TITAN_RETURN_IF_ERROR(g.Finalize(pack, name));
  absl::Status executed =
      g.Check(cudnn.BackendExecute(handle, plan.plan, pack), "cudnnBackendExecute");
  // Every execution error is the caller's to return: none means "fall back" here.
  if (!executed.ok()) return absl::FailedPreconditionError(executed.message());
  return absl::OkStatus();
}

#undef TITAN_CUDNN_SET

}  // namespace titan::cuda
