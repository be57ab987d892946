// The CPU compute's mixture-of-experts kernels: the router (TorchTitan's TokenChoiceTopKRouter)
// and its backward, the dropless permutation of the assignments into expert-major order, and the
// gathers and weighted sums that move tokens to their experts' rows and back. Every sum runs in
// the order titan/compute_kernels.inc states, so the CUDA kernels (plugins/device/cuda/
// moe_kernels.cuh) give the same bits; tokens run in parallel, each by itself.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_compute.h"
#include "core/runtime/profiler.h"

namespace titan {
namespace {

const float* F(const TensorView& x) { return x.data_as<const float>(); }
float* MutableF(const TensorView& x) { return x.data_as<float>(); }
const int32_t* I(const TensorView& x) { return x.data_as<const int32_t>(); }

// Whether value a (at index ia) ranks before value b (at index ib): larger first, a NaN after every
// number, ties to the lower index. A strict total order, so any search for the best gives the same.
bool RanksBefore(float a, int64_t ia, float b, int64_t ib) {
  const bool a_nan = std::isnan(a), b_nan = std::isnan(b);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a != b) return a > b;
  return ia < ib;
}

// The best of values[first, end) ranking after `after` (-1: none), with `eligible` (null: all).
int64_t NextBest(const float* values, int64_t first, int64_t end, int64_t after,
                 const std::vector<char>* eligible) {
  int64_t best = -1;
  for (int64_t e = first; e < end; ++e) {
    if (eligible != nullptr && !(*eligible)[e]) continue;
    if (after >= 0 && !RanksBefore(values[after], after, values[e], e)) continue;
    if (best < 0 || RanksBefore(values[e], e, values[best], best)) best = e;
  }
  return best;
}

// scores[e] of one token's logits: a softmax (exponentials summed in order in f64) or sigmoids,
// each rounded to f32 at the end.
void Scores(const float* logits, int64_t experts, MoeRouting::Score score, float* scores) {
  if (score == MoeRouting::Score::kSigmoid) {
    for (int64_t e = 0; e < experts; ++e) {
      scores[e] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[e]))));
    }
    return;
  }
  float top = logits[0];
  for (int64_t e = 1; e < experts; ++e) {
    if (logits[e] > top) top = logits[e];
  }
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e) sum += std::exp(static_cast<double>(logits[e]) - top);
  for (int64_t e = 0; e < experts; ++e) {
    scores[e] = static_cast<float>(std::exp(static_cast<double>(logits[e]) - top) / sum);
  }
}

// One token's routing, with its scratch: the choice values, and with groups each group's score
// (the sum of its top two choice values) and which experts are eligible.
struct TokenRouter {
  const MoeRouting& routing;
  int64_t experts;
  std::vector<float> scores, choice, group_scores;
  std::vector<char> eligible;

  TokenRouter(const MoeRouting& r, int64_t e)
      : routing(r), experts(e), scores(e), choice(e), group_scores(r.groups), eligible(e) {}

  void Route(const float* logits, const float* bias, int32_t* chosen, float* weights) {
    Scores(logits, experts, routing.score, scores.data());
    for (int64_t e = 0; e < experts; ++e) choice[e] = bias ? scores[e] + bias[e] : scores[e];
    const std::vector<char>* allowed = nullptr;
    if (routing.groups > 1) {
      const int64_t size = experts / routing.groups;
      for (int64_t g = 0; g < routing.groups; ++g) {
        const int64_t first = NextBest(choice.data(), g * size, (g + 1) * size, -1, nullptr);
        const int64_t second = NextBest(choice.data(), g * size, (g + 1) * size, first, nullptr);
        group_scores[g] = second < 0 ? choice[first] : choice[first] + choice[second];
      }
      std::fill(eligible.begin(), eligible.end(), 0);
      int64_t group = -1;
      for (int64_t c = 0; c < routing.groups_chosen; ++c) {
        group = NextBest(group_scores.data(), 0, routing.groups, group, nullptr);
        std::fill(eligible.begin() + group * size, eligible.begin() + (group + 1) * size, 1);
      }
      allowed = &eligible;
    }
    int64_t expert = -1;
    float sum = 0.0f;
    for (int64_t j = 0; j < routing.top_k; ++j) {
      expert = NextBest(choice.data(), 0, experts, expert, allowed);
      chosen[j] = static_cast<int32_t>(expert);
      weights[j] = scores[expert];
      sum += weights[j];
    }
    const float denominator = sum + 1e-20f;
    for (int64_t j = 0; j < routing.top_k; ++j) {
      if (routing.normalize) weights[j] = weights[j] / denominator;
      weights[j] = weights[j] * routing.scale;
    }
  }
};

absl::Status ExpertOutOfRange(const char* kernel, int64_t at, int32_t expert, int64_t experts) {
  return absl::InvalidArgumentError(absl::StrCat(kernel, ": operand 'experts' holds expert ",
                                                 expert, " at assignment ", at, ", outside [0, ",
                                                 experts, ")"));
}

// The first expert id outside [0, experts) reported, or OK.
absl::Status ExpectExpertsInRange(const char* kernel, const TensorView& ids, int64_t experts) {
  const int32_t* id = I(ids);
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (id[i] < 0 || id[i] >= experts) return ExpertOutOfRange(kernel, i, id[i], experts);
  }
  return absl::OkStatus();
}

// slots must be a permutation of [0, m): a slot out of range would reach outside the rows, and a
// repeated one would have two tokens write one row.
absl::Status ExpectPermutation(const char* kernel, const TensorView& slots) {
  const int64_t m = slots.numel();
  const int32_t* slot = I(slots);
  std::vector<char> seen(static_cast<size_t>(m), 0);
  for (int64_t i = 0; i < m; ++i) {
    if (slot[i] < 0 || slot[i] >= m || seen[slot[i]]) {
      return absl::InvalidArgumentError(absl::StrCat(
          kernel, ": operand 'slots' holds ", slot[i], " at assignment ", i, ", ",
          slot[i] < 0 || slot[i] >= m ? absl::StrCat("outside [0, ", m, ")") : "a second time",
          ": not a permutation of the ", m, " rows (MoePermute's)"));
    }
    seen[slot[i]] = 1;
  }
  return absl::OkStatus();
}

// The 32 interleaved partial sums of the products a[c] b[c] (c into sum c mod 32, in order),
// added pairwise 16, 8, 4, 2 and 1 apart: a CUDA warp's dot product (WarpSum), bit for bit.
float WarpOrderDot(const float* a, const float* b, int64_t length) {
  float lanes[32] = {};
  for (int64_t c = 0; c < length; ++c) lanes[c % 32] += a[c] * b[c];
  for (int offset = 16; offset > 0; offset /= 2) {
    float next[32];
    for (int lane = 0; lane < 32; ++lane) next[lane] = lanes[lane] + lanes[lane ^ offset];
    std::memcpy(lanes, next, sizeof(lanes));
  }
  return lanes[0];
}

}  // namespace

absl::Status CpuCompute::RunMoeRoute(const TensorView& logits, const TensorView& bias,
                                     const MoeRouting& routing, TensorView experts,
                                     TensorView weights) {
  ScopedSpan span("kernel", "MoeRoute");
  const int64_t n = logits.shape[0], e = logits.shape[1], k = routing.top_k;
  const float* bias_data = bias.data != nullptr ? F(bias) : nullptr;
  int32_t* chosen = experts.data_as<int32_t>();
  float* weight = MutableF(weights);
#pragma omp parallel
  {
    TokenRouter router(routing, e);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      router.Route(F(logits) + t * e, bias_data, chosen + t * k, weight + t * k);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunMoeRouteBackward(const TensorView& logits, const TensorView& experts,
                                             const TensorView& d_weights, const MoeRouting& routing,
                                             TensorView d_logits) {
  ScopedSpan span("kernel", "MoeRouteBackward");
  const int64_t n = logits.shape[0], e = logits.shape[1], k = routing.top_k;
  TITAN_RETURN_IF_ERROR(ExpectExpertsInRange("MoeRouteBackward", experts, e));
  const int32_t* chosen = I(experts);
  const float* d_weight = F(d_weights);
  float* d_logit = MutableF(d_logits);
#pragma omp parallel
  {
    std::vector<float> scores(e);
    std::vector<double> d_scores(e);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      Scores(F(logits) + t * e, e, routing.score, scores.data());
      const int32_t* ids = chosen + t * k;
      const float* g = d_weight + t * k;
      // w_j = scale p_j / D with D = sum_i p_i + 1e-20 (or w_j = scale p_j): the gradient of p_j
      // is scale (g_j / D - sum_i g_i p_i / D^2) (or scale g_j).
      double sum = 0, g_dot_p = 0;
      for (int64_t j = 0; j < k; ++j) {
        sum += scores[ids[j]];
        g_dot_p += static_cast<double>(g[j]) * scores[ids[j]];
      }
      const double denominator = sum + 1e-20;
      std::fill(d_scores.begin(), d_scores.end(), 0.0);
      for (int64_t j = 0; j < k; ++j) {
        const double d_p = routing.normalize
                               ? g[j] / denominator - g_dot_p / (denominator * denominator)
                               : static_cast<double>(g[j]);
        d_scores[ids[j]] += routing.scale * d_p;
      }
      float* out = d_logit + t * e;
      if (routing.score == MoeRouting::Score::kSigmoid) {
        for (int64_t x = 0; x < e; ++x)
          out[x] = static_cast<float>(d_scores[x] * scores[x] * (1.0 - scores[x]));
        continue;
      }
      // Softmax: d_logit_x = s_x (d_s_x - sum_y d_s_y s_y), d_s nonzero at the chosen only.
      double d_dot_s = 0;
      for (int64_t x = 0; x < e; ++x) d_dot_s += d_scores[x] * scores[x];
      for (int64_t x = 0; x < e; ++x)
        out[x] = static_cast<float>(scores[x] * (d_scores[x] - d_dot_s));
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunMoePermute(const TensorView& experts, TensorView counts,
                                       TensorView slots) {
  ScopedSpan span("kernel", "MoePermute");
  const int64_t m = experts.numel(), e = counts.numel();
  TITAN_RETURN_IF_ERROR(ExpectExpertsInRange("MoePermute", experts, e));
  const int32_t* id = I(experts);
  int32_t* count = counts.data_as<int32_t>();
  int32_t* slot = slots.data_as<int32_t>();
  std::fill(count, count + e, 0);
  for (int64_t i = 0; i < m; ++i) ++count[id[i]];
  // Each expert's first row, then the assignments in index order: a stable counting sort.
  std::vector<int64_t> next(static_cast<size_t>(e));
  int64_t row = 0;
  for (int64_t x = 0; x < e; ++x) {
    next[x] = row;
    row += count[x];
  }
  for (int64_t i = 0; i < m; ++i) slot[i] = static_cast<int32_t>(next[id[i]]++);
  return absl::OkStatus();
}

absl::Status CpuCompute::RunMoeDispatch(const TensorView& x, const TensorView& slots,
                                        TensorView out) {
  ScopedSpan span("kernel", "MoeDispatch");
  TITAN_RETURN_IF_ERROR(ExpectPermutation("MoeDispatch", slots));
  const int64_t n = x.shape[0], d = x.shape[1], m = slots.numel();
  if (m == 0) return absl::OkStatus();
  const int64_t k = m / n;
  const size_t row_bytes = static_cast<size_t>(d) * DTypeSize(x.dtype);
  const auto* in = static_cast<const unsigned char*>(x.data);
  auto* rows = static_cast<unsigned char*>(out.data);
  const int32_t* slot = I(slots);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      std::memcpy(rows + slot[t * k + j] * row_bytes, in + t * row_bytes, row_bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunMoeDispatchBackward(const TensorView& d_out, const TensorView& slots,
                                                TensorView dx) {
  ScopedSpan span("kernel", "MoeDispatchBackward");
  TITAN_RETURN_IF_ERROR(ExpectPermutation("MoeDispatchBackward", slots));
  const int64_t n = dx.shape[0], d = dx.shape[1], m = slots.numel();
  if (m == 0) return absl::OkStatus();
  const int64_t k = m / n;
  const float* rows = F(d_out);
  float* grad = MutableF(dx);
  const int32_t* slot = I(slots);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < d; ++c) {
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) sum += rows[slot[t * k + j] * d + c];
      grad[t * d + c] += sum;
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunMoeCombine(const TensorView& y, const TensorView& weights,
                                       const TensorView& slots, TensorView out) {
  ScopedSpan span("kernel", "MoeCombine");
  TITAN_RETURN_IF_ERROR(ExpectPermutation("MoeCombine", slots));
  const int64_t n = out.shape[0], d = out.shape[1], m = slots.numel();
  if (m == 0) return absl::OkStatus();
  const int64_t k = m / n;
  const float* rows = F(y);
  const float* weight = F(weights);
  float* result = MutableF(out);
  const int32_t* slot = I(slots);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < d; ++c) {
      float sum = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const float product = weight[t * k + j] * rows[slot[t * k + j] * d + c];
        sum += product;
      }
      result[t * d + c] += sum;
    }
  }
  return absl::OkStatus();
}

absl::Status CpuCompute::RunMoeCombineBackward(const TensorView& d_out, const TensorView& y,
                                               const TensorView& weights, const TensorView& slots,
                                               TensorView d_y, TensorView d_weights) {
  ScopedSpan span("kernel", "MoeCombineBackward");
  TITAN_RETURN_IF_ERROR(ExpectPermutation("MoeCombineBackward", slots));
  const int64_t n = d_out.shape[0], d = d_out.shape[1], m = slots.numel();
  if (m == 0) return absl::OkStatus();
  const int64_t k = m / n;
  const float* grad = F(d_out);
  const float* rows = F(y);
  const float* weight = F(weights);
  float* d_rows = MutableF(d_y);
  float* d_weight = MutableF(d_weights);
  const int32_t* slot = I(slots);
#pragma omp parallel for schedule(static)
  for (int64_t a = 0; a < m; ++a) {
    const float* g = grad + (a / k) * d;
    const int64_t row = slot[a];
    for (int64_t c = 0; c < d; ++c) d_rows[row * d + c] = weight[a] * g[c];
    d_weight[a] = WarpOrderDot(g, rows + row * d, d);
  }
  return absl::OkStatus();
}

}  // namespace titan
