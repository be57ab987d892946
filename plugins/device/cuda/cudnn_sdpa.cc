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
enum SdpaUid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kMaskValue,
  kDout,
  kDq,
  kDk,
  kDv,
  kSoftmaxSum,
  kDqAccumulator,
  kOne,
};

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
  absl::StatusOr<Desc> Reshape(const std::string& label, Desc x, Desc y);

  // The operation graph of every operation added, then the first engine configuration of the
  // heuristic that finalizes into an execution plan.
  absl::Status FinalizePlan(cudnnHandle_t handle, SdpaPlan& plan);

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

absl::StatusOr<Desc> GraphBuilder::Reshape(const std::string& label, Desc x, Desc y) {
  const std::string op_name = absl::StrCat("reshape operation ", label);
  TITAN_ASSIGN_OR_RETURN(Desc op, Create(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, op_name));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_RESHAPE_XDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  TITAN_RETURN_IF_ERROR(TITAN_CUDNN_SET(op, op_name, CUDNN_ATTR_OPERATION_RESHAPE_YDESC,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  TITAN_RETURN_IF_ERROR(Finalize(op, op_name));
  operations_.push_back(op);
  return op;
}

absl::Status GraphBuilder::FinalizePlan(cudnnHandle_t handle, SdpaPlan& plan) {
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

// A tensor's type, dimensions and strides.
struct Layout {
  cudnnDataType_t type;
  Dims dims, strides;
};

// Operations into a new virtual tensor of layout `y`, returned.
absl::StatusOr<Desc> PointwiseTo(GraphBuilder& g, const std::string& label,
                                 cudnnPointwiseMode_t mode, cudnnDataType_t math, Desc x, Desc b,
                                 const Layout& y, Desc t = nullptr, int64_t axis = -1) {
  TITAN_ASSIGN_OR_RETURN(
      Desc out, g.Tensor(label, 0, y.type, y.dims, y.strides, GraphBuilder::Kind::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Pointwise(label, mode, math, x, b, out, t, axis).status());
  return out;
}
absl::StatusOr<Desc> ReduceTo(GraphBuilder& g, const std::string& label, cudnnReduceTensorOp_t mode,
                              Desc x, const Layout& y) {
  TITAN_ASSIGN_OR_RETURN(
      Desc out, g.Tensor(label, 0, y.type, y.dims, y.strides, GraphBuilder::Kind::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Reduction(label, mode, x, out).status());
  return out;
}
absl::StatusOr<Desc> MatmulTo(GraphBuilder& g, const std::string& label, Desc a, Desc b,
                              const Layout& y) {
  TITAN_ASSIGN_OR_RETURN(
      Desc out, g.Tensor(label, 0, y.type, y.dims, y.strides, GraphBuilder::Kind::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Matmul(label, a, b, out).status());
  return out;
}
absl::StatusOr<Desc> ReshapeTo(GraphBuilder& g, const std::string& label, Desc x, const Layout& y) {
  TITAN_ASSIGN_OR_RETURN(
      Desc out, g.Tensor(label, 0, y.type, y.dims, y.strides, GraphBuilder::Kind::kVirtual));
  TITAN_RETURN_IF_ERROR(g.Reshape(label, x, out).status());
  return out;
}

// The layouts of one shape. Titan's q, out and their gradients are [b, s, h, d] and k, v and
// theirs [b, s, hk, d]: cuDNN's [b, h, s, d] views of them through strides, k and v also read
// transposed ([b, hk, d, s]). Scores are [b, h, s, s] and row statistics [b, h, s, 1].
struct Layouts {
  explicit Layouts(const SdpaShape& shape) {
    const int64_t b = shape.batch, s = shape.seq_len, h = shape.heads, hk = shape.kv_heads,
                  d = shape.head_dim;
    q = {CUDNN_DATA_BFLOAT16, {b, h, s, d}, {s * h * d, d, h * d, 1}};
    kv = {CUDNN_DATA_BFLOAT16, {b, hk, s, d}, {s * hk * d, d, hk * d, 1}};
    kv_transposed = {CUDNN_DATA_BFLOAT16, {b, hk, d, s}, {s * hk * d, d, 1, hk * d}};
    scores = {CUDNN_DATA_FLOAT, {b, h, s, s}, {h * s * s, s * s, s, 1}};
    scores_transposed = {CUDNN_DATA_BFLOAT16, {b, h, s, s}, {h * s * s, s * s, 1, s}};
    rows = {CUDNN_DATA_FLOAT, {b, h, s, 1}, {h * s, s, 1, 1}};
    per_query_head = {CUDNN_DATA_BFLOAT16, {b, h, s, d}, {h * s * d, s * d, d, 1}};
    dq_accumulator = {CUDNN_DATA_FLOAT, {b, h, s, d}, {h * s * d, s * d, d, 1}};
    scalar = {CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}};
  }
  Layout q, kv, kv_transposed, scores, scores_transposed, rows, per_query_head, dq_accumulator,
      scalar;
  Layout As(cudnnDataType_t type, const Layout& like) const {
    return {type, like.dims, like.strides};
  }
};

absl::Status CheckShape(const SdpaShape& shape, const char* graph) {
  const int64_t b = shape.batch, s = shape.seq_len, h = shape.heads, hk = shape.kv_heads,
                d = shape.head_dim;
  if (b <= 0 || s <= 0 || h <= 0 || hk <= 0 || d <= 0 || h % hk != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cuDNN ", graph, ": batch ", b, ", seq_len ", s, ", heads ", h, ", kv_heads ", hk,
        ", head_dim ", d, " is no attention shape (all positive, heads a multiple of kv_heads)"));
  }
  return absl::OkStatus();
}

// The causal mask of scores x, as cuDNN frontend 1.9 lowers it: GEN_INDEX of rows and columns in
// int32, row >= column, BINARY_SELECT(x, mask value, keep).
absl::StatusOr<Desc> CausalMask(GraphBuilder& g, const Layouts& l, Desc x, Desc mask_value) {
  const Layout index = l.As(CUDNN_DATA_INT32, l.scores);
  TITAN_ASSIGN_OR_RETURN(Desc row, PointwiseTo(g, "row index", CUDNN_POINTWISE_GEN_INDEX,
                                               CUDNN_DATA_INT32, x, nullptr, index, nullptr, 2));
  TITAN_ASSIGN_OR_RETURN(Desc column, PointwiseTo(g, "column index", CUDNN_POINTWISE_GEN_INDEX,
                                                  CUDNN_DATA_INT32, x, nullptr, index, nullptr, 3));
  TITAN_ASSIGN_OR_RETURN(
      Desc keep, PointwiseTo(g, "row >= column", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row,
                             column, l.As(CUDNN_DATA_BOOLEAN, l.scores)));
  return PointwiseTo(g, "causal select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, x,
                     mask_value, l.scores, keep);
}

// The graph of cuDNN frontend's scaled_dot_product_flash_attention with a causal mask and
// generate_stats, as it lowers for cuDNN 9: S = q k^T; S *= scale; the causal mask; the softmax
// as max, sub, exp, sum, and stats = max + log(sum); P = exp / sum in bf16; out = P v.
absl::Status AddForwardGraph(GraphBuilder& g, const SdpaShape& shape) {
  TITAN_RETURN_IF_ERROR(CheckShape(shape, "SDPA forward"));
  using K = GraphBuilder::Kind;
  const Layouts l(shape);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const auto memory = [&](const char* label, int64_t uid, const Layout& y) {
    return g.Tensor(label, uid, y.type, y.dims, y.strides, K::kMemory);
  };
  TITAN_ASSIGN_OR_RETURN(Desc q, memory("q", kQ, l.q));
  TITAN_ASSIGN_OR_RETURN(Desc kt, memory("k (transposed)", kK, l.kv_transposed));
  TITAN_ASSIGN_OR_RETURN(Desc v, memory("v", kV, l.kv));
  TITAN_ASSIGN_OR_RETURN(Desc o, memory("out", kO, l.q));
  TITAN_ASSIGN_OR_RETURN(Desc stats, memory("stats", kStats, l.rows));
  TITAN_ASSIGN_OR_RETURN(
      Desc scale, g.Tensor("scale", kScale, f32, l.scalar.dims, l.scalar.strides, K::kByValue));
  TITAN_ASSIGN_OR_RETURN(Desc mask_value, g.Tensor("mask value", kMaskValue, f32, l.scalar.dims,
                                                   l.scalar.strides, K::kByValue));

  TITAN_ASSIGN_OR_RETURN(Desc s0, MatmulTo(g, "S = q k^T", q, kt, l.scores));
  TITAN_ASSIGN_OR_RETURN(
      Desc s1, PointwiseTo(g, "S * scale", CUDNN_POINTWISE_MUL, f32, s0, scale, l.scores));
  TITAN_ASSIGN_OR_RETURN(Desc s2, CausalMask(g, l, s1, mask_value));
  TITAN_ASSIGN_OR_RETURN(Desc max, ReduceTo(g, "row max", CUDNN_REDUCE_TENSOR_MAX, s2, l.rows));
  TITAN_ASSIGN_OR_RETURN(Desc centered,
                         PointwiseTo(g, "S - max", CUDNN_POINTWISE_SUB, f32, s2, max, l.scores));
  TITAN_ASSIGN_OR_RETURN(
      Desc e, PointwiseTo(g, "exp", CUDNN_POINTWISE_EXP, f32, centered, nullptr, l.scores));
  TITAN_ASSIGN_OR_RETURN(Desc sum, ReduceTo(g, "row sum", CUDNN_REDUCE_TENSOR_ADD, e, l.rows));
  TITAN_ASSIGN_OR_RETURN(Desc log_sum,
                         PointwiseTo(g, "log", CUDNN_POINTWISE_LOG, f32, sum, nullptr, l.rows));
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("stats = max + log", CUDNN_POINTWISE_ADD, f32, max, log_sum, stats).status());
  TITAN_ASSIGN_OR_RETURN(Desc p, PointwiseTo(g, "P = exp / sum", CUDNN_POINTWISE_DIV, f32, e, sum,
                                             l.As(CUDNN_DATA_BFLOAT16, l.scores)));
  return g.Matmul("out = P v", p, v, o).status();
}

// The graph of cuDNN frontend's sdpa_backward (causal, no dropout) as it lowers for cuDNN 9:
//   softmax_sum = rowsum(dO * O)              (f32, in memory: kSoftmaxSum)
//   P = exp(scale q k^T - stats), masked      (recomputed from the forward's statistics)
//   dV = P^T dO, summed over each kv head's query heads
//   dS = P (dO v^T - softmax_sum) scale
//   dK = dS^T q, summed likewise; dQ = dS k, accumulated in f32 (kDqAccumulator) then bf16.
absl::Status AddBackwardGraph(GraphBuilder& g, const SdpaShape& shape) {
  TITAN_RETURN_IF_ERROR(CheckShape(shape, "SDPA backward"));
  using K = GraphBuilder::Kind;
  const Layouts l(shape);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  const bool grouped = shape.heads != shape.kv_heads;
  const auto memory = [&](const char* label, int64_t uid, const Layout& y) {
    return g.Tensor(label, uid, y.type, y.dims, y.strides, K::kMemory);
  };
  const auto by_value = [&](const char* label, int64_t uid) {
    return g.Tensor(label, uid, f32, l.scalar.dims, l.scalar.strides, K::kByValue);
  };
  TITAN_ASSIGN_OR_RETURN(Desc q, memory("q", kQ, l.q));
  TITAN_ASSIGN_OR_RETURN(Desc kt, memory("k (transposed)", kK, l.kv_transposed));
  TITAN_ASSIGN_OR_RETURN(Desc vt, memory("v (transposed)", kV, l.kv_transposed));
  TITAN_ASSIGN_OR_RETURN(Desc o, memory("out", kO, l.q));
  TITAN_ASSIGN_OR_RETURN(Desc stats, memory("stats", kStats, l.rows));
  TITAN_ASSIGN_OR_RETURN(Desc dout, memory("dout", kDout, l.q));
  TITAN_ASSIGN_OR_RETURN(Desc dq, memory("dq", kDq, l.q));
  TITAN_ASSIGN_OR_RETURN(Desc dk, memory("dk", kDk, l.kv));
  TITAN_ASSIGN_OR_RETURN(Desc dv, memory("dv", kDv, l.kv));
  TITAN_ASSIGN_OR_RETURN(Desc softmax_sum, memory("softmax_sum", kSoftmaxSum, l.rows));
  TITAN_ASSIGN_OR_RETURN(Desc dq_accumulator,
                         memory("dq accumulator", kDqAccumulator, l.dq_accumulator));
  TITAN_ASSIGN_OR_RETURN(Desc scale, by_value("scale", kScale));
  TITAN_ASSIGN_OR_RETURN(Desc mask_value, by_value("mask value", kMaskValue));
  TITAN_ASSIGN_OR_RETURN(Desc one, by_value("one", kOne));

  // softmax_sum = rowsum(dO * O) * 1 (the frontend's dropout-scale multiply, 1 without dropout).
  TITAN_ASSIGN_OR_RETURN(
      Desc dout_out, PointwiseTo(g, "dO * O", CUDNN_POINTWISE_MUL, f32, dout, o, l.As(f32, l.q)));
  TITAN_ASSIGN_OR_RETURN(Desc row_dots,
                         ReduceTo(g, "rowsum(dO * O)", CUDNN_REDUCE_TENSOR_ADD, dout_out, l.rows));
  TITAN_RETURN_IF_ERROR(
      g.Pointwise("softmax_sum", CUDNN_POINTWISE_MUL, f32, row_dots, one, softmax_sum).status());

  // P from the saved statistics; dV = P^T dO.
  TITAN_ASSIGN_OR_RETURN(Desc s0, MatmulTo(g, "S = q k^T", q, kt, l.scores));
  TITAN_ASSIGN_OR_RETURN(
      Desc s1, PointwiseTo(g, "S * scale", CUDNN_POINTWISE_MUL, f32, s0, scale, l.scores));
  TITAN_ASSIGN_OR_RETURN(
      Desc s2, PointwiseTo(g, "S - stats", CUDNN_POINTWISE_SUB, f32, s1, stats, l.scores));
  TITAN_ASSIGN_OR_RETURN(Desc s3, CausalMask(g, l, s2, mask_value));
  TITAN_ASSIGN_OR_RETURN(
      Desc p, PointwiseTo(g, "P = exp", CUDNN_POINTWISE_EXP, f32, s3, nullptr, l.scores));
  TITAN_ASSIGN_OR_RETURN(Desc pt, ReshapeTo(g, "P^T", p, l.scores_transposed));
  if (grouped) {
    TITAN_ASSIGN_OR_RETURN(Desc dv_heads,
                           MatmulTo(g, "dV per query head = P^T dO", pt, dout, l.per_query_head));
    TITAN_RETURN_IF_ERROR(
        g.Reduction("dV = sum over query heads", CUDNN_REDUCE_TENSOR_ADD, dv_heads, dv).status());
  } else {
    TITAN_RETURN_IF_ERROR(g.Matmul("dV = P^T dO", pt, dout, dv).status());
  }

  // dS = P (dO v^T - softmax_sum) scale; dK = dS^T q.
  TITAN_ASSIGN_OR_RETURN(Desc dp, MatmulTo(g, "dP = dO v^T", dout, vt, l.scores));
  TITAN_ASSIGN_OR_RETURN(Desc dp1, PointwiseTo(g, "dP - softmax_sum", CUDNN_POINTWISE_SUB, f32, dp,
                                               softmax_sum, l.scores));
  TITAN_ASSIGN_OR_RETURN(Desc dp2, PointwiseTo(g, "(dP - softmax_sum) * P", CUDNN_POINTWISE_MUL,
                                               f32, dp1, p, l.scores));
  TITAN_ASSIGN_OR_RETURN(
      Desc ds, PointwiseTo(g, "dS = ... * scale", CUDNN_POINTWISE_MUL, f32, dp2, scale, l.scores));
  TITAN_ASSIGN_OR_RETURN(Desc dst, ReshapeTo(g, "dS^T", ds, l.scores_transposed));
  if (grouped) {
    TITAN_ASSIGN_OR_RETURN(Desc dk_heads,
                           MatmulTo(g, "dK per query head = dS^T q", dst, q, l.per_query_head));
    TITAN_RETURN_IF_ERROR(
        g.Reduction("dK = sum over query heads", CUDNN_REDUCE_TENSOR_ADD, dk_heads, dk).status());
  } else {
    TITAN_RETURN_IF_ERROR(g.Matmul("dK = dS^T q", dst, q, dk).status());
  }

  // dQ = dS k: k read back from its transposed view, the product accumulated in f32.
  TITAN_ASSIGN_OR_RETURN(Desc k, ReshapeTo(g, "k", kt, l.kv));
  TITAN_RETURN_IF_ERROR(g.Matmul("dQ accumulator = dS k", ds, k, dq_accumulator).status());
  return g
      .Pointwise("dQ = dQ accumulator", CUDNN_POINTWISE_IDENTITY, f32, dq_accumulator, nullptr, dq)
      .status();
}

absl::Status AddGraph(GraphBuilder& g, SdpaDirection direction, const SdpaShape& shape) {
  return direction == SdpaDirection::kForward ? AddForwardGraph(g, shape)
                                              : AddBackwardGraph(g, shape);
}

const char* GraphName(SdpaDirection direction) {
  return direction == SdpaDirection::kForward ? "SDPA forward" : "SDPA backward";
}

// The scalars, read from the host when the work is enqueued.
struct Scalars {
  explicit Scalars(const Cudnn& cudnn, const SdpaShape& shape)
      : scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.head_dim)))),
        // cuDNN before 9.10 wants the lowest finite value as the mask, later ones -infinity
        // (the frontend's get_negative_inf_value).
        mask_value(cudnn.version < 91000 ? std::numeric_limits<float>::lowest()
                                         : -std::numeric_limits<float>::infinity()) {}
  float scale, mask_value, one = 1.0f;
};

// Binds each uid to its pointer and enqueues the plan; every error is returned (none means
// "fall back" once a plan runs).
absl::Status Execute(const Cudnn& cudnn, cudnnHandle_t handle, const SdpaPlan& plan,
                     const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
                     void* workspace) {
  GraphBuilder g(cudnn, plan.direction == SdpaDirection::kForward ? "SDPA forward execution"
                                                                  : "SDPA backward execution");
  const std::string name = "the variant pack";
  if (uids.size() != pointers.size()) {
    return absl::InternalError(absl::StrCat("cuDNN SDPA: ", uids.size(), " tensor ids but ",
                                            pointers.size(), " pointers for the variant pack"));
  }
  const auto count = static_cast<int64_t>(uids.size());
  TITAN_ASSIGN_OR_RETURN(Desc pack, g.Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, name));
  TITAN_RETURN_IF_ERROR(g.TITAN_CUDNN_SET(pack, name, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                          CUDNN_TYPE_INT64, count, uids.data()));
  TITAN_RETURN_IF_ERROR(g.TITAN_CUDNN_SET(pack, name, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                          CUDNN_TYPE_VOID_PTR, count, pointers.data()));
  TITAN_RETURN_IF_ERROR(g.TITAN_CUDNN_SET(pack, name, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                          CUDNN_TYPE_VOID_PTR, 1, &workspace));
  TITAN_RETURN_IF_ERROR(g.Finalize(pack, name));
  absl::Status executed =
      g.Check(cudnn.BackendExecute(handle, plan.plan, pack), "cudnnBackendExecute");
  if (!executed.ok()) return absl::FailedPreconditionError(executed.message());
  return absl::OkStatus();
}

}  // namespace

CudnnDescriptor::CudnnDescriptor(CudnnDescriptor&& other) noexcept
    : cudnn_(other.cudnn_), descriptor_(std::exchange(other.descriptor_, nullptr)) {}

CudnnDescriptor::~CudnnDescriptor() {
  if (descriptor_ != nullptr) cudnn_->BackendDestroyDescriptor(descriptor_);
}

absl::StatusOr<SdpaPlan> BuildSdpaPlan(const Cudnn& cudnn, cudnnHandle_t handle,
                                       SdpaDirection direction, const SdpaShape& shape) {
  GraphBuilder g(cudnn, GraphName(direction));
  TITAN_RETURN_IF_ERROR(AddGraph(g, direction, shape));
  SdpaPlan plan;
  plan.direction = direction;
  plan.shape = shape;
  TITAN_RETURN_IF_ERROR(g.FinalizePlan(handle, plan));
  plan.descriptors = g.Release();
  return plan;
}

absl::Status BuildSdpaOperations(const Cudnn& cudnn, SdpaDirection direction,
                                 const SdpaShape& shape) {
  GraphBuilder g(cudnn, GraphName(direction));
  return AddGraph(g, direction, shape);
}

absl::Status ExecuteSdpaForward(const Cudnn& cudnn, cudnnHandle_t handle, const SdpaPlan& plan,
                                const SdpaForwardOperands& x) {
  Scalars scalars(cudnn, plan.shape);
  return Execute(cudnn, handle, plan, {kQ, kK, kV, kO, kStats, kScale, kMaskValue},
                 {const_cast<void*>(x.q), const_cast<void*>(x.k), const_cast<void*>(x.v), x.out,
                  x.stats, &scalars.scale, &scalars.mask_value},
                 x.workspace);
}

absl::Status ExecuteSdpaBackward(const Cudnn& cudnn, cudnnHandle_t handle, const SdpaPlan& plan,
                                 const SdpaBackwardOperands& x) {
  Scalars scalars(cudnn, plan.shape);
  return Execute(
      cudnn, handle, plan,
      {kQ, kK, kV, kO, kStats, kDout, kDq, kDk, kDv, kSoftmaxSum, kDqAccumulator, kScale,
       kMaskValue, kOne},
      {const_cast<void*>(x.q), const_cast<void*>(x.k), const_cast<void*>(x.v),
       const_cast<void*>(x.out), const_cast<float*>(x.stats), const_cast<void*>(x.dout), x.dq, x.dk,
       x.dv, x.softmax_sum, x.dq_accumulator, &scalars.scale, &scalars.mask_value, &scalars.one},
      x.workspace);
}

#undef TITAN_CUDNN_SET

}  // namespace titan::cuda
