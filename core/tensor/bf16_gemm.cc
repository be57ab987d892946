#include "core/tensor/bf16_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/tensor/internal/gemm.h"
#include "titan/float16.h"

namespace titan {
namespace {

using dnnl::memory;

memory::desc Matrix(int64_t rows, int64_t columns, bool transposed, memory::data_type type) {
  // A transposed operand is stored [columns, rows]: the logical matrix walks it by columns.
  const memory::dims strides = transposed ? memory::dims{1, rows} : memory::dims{columns, 1};
  return memory::desc({rows, columns}, type, strides);
}

// oneDNN matmul primitives, one per shape and scaling (creating one takes far longer than a
// small GEMM), shared by every thread.
class OneDnnGemm {
 public:
  static OneDnnGemm& Get() {
    static OneDnnGemm gemm;
    return gemm;
  }

  // Null when oneDNN has only its reference kernel for bf16 on this CPU.
  const std::string& native_kernel() const { return kernel_; }

  absl::Status Run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const uint16_t* a, const uint16_t* b, float beta, float* c) {
    try {
      Primitive* primitive = nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const Key key{ta, tb, m, n, k, alpha, beta};
        auto it = primitives_.find(key);
        if (it == primitives_.end()) {
          const dnnl::matmul::primitive_desc described = Describe(ta, tb, m, n, k, alpha, beta);
          it = primitives_
                   .emplace(key, Primitive{dnnl::matmul(described), described.scratchpad_desc()})
                   .first;
        }
        primitive = &it->second;
      }
      // Each thread's own scratchpad: oneDNN's shared one would let concurrent calls (the bf16
      // attention's tiles) overwrite each other's packed operands.
      thread_local std::vector<char> scratch;
      scratch.resize(std::max<size_t>(scratch.size(), primitive->scratchpad.get_size()));
      // Each thread's memory objects and stream for each primitive, made once: a small GEMM's
      // call then costs little more than its kernel (made per call, they and their malloc and
      // free took about a fifth of the bf16 attention's time on the debug model's tiles).
      thread_local std::map<const Primitive*, Bound> bound_by_primitive;
      thread_local dnnl::stream stream(engine_);
      auto bound_at = bound_by_primitive.find(primitive);
      if (bound_at == bound_by_primitive.end()) {
        bound_at = bound_by_primitive.emplace(primitive, Bind(*primitive, ta, tb, m, n, k)).first;
      }
      Bound& bound = bound_at->second;
      bound.src.set_data_handle(const_cast<uint16_t*>(a));
      bound.weights.set_data_handle(const_cast<uint16_t*>(b));
      bound.dst.set_data_handle(c);
      bound.scratchpad.set_data_handle(scratch.data());
      primitive->matmul.execute(stream, bound.args);
      stream.wait();
    } catch (const dnnl::error& e) {
      return absl::InternalError(absl::StrCat("bf16 GEMM [", m, " x ", k, "] . [", k, " x ", n,
                                              "] by oneDNN failed: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, float, float>;
  struct Primitive {
    dnnl::matmul matmul;
    memory::desc scratchpad;
  };
  // One thread's operands of one primitive, pointed at each call's data.
  struct Bound {
    memory src, weights, dst, scratchpad;
    std::unordered_map<int, memory> args;
  };

  Bound Bind(const Primitive& primitive, bool ta, bool tb, int64_t m, int64_t n, int64_t k) const {
    Bound bound;
    bound.src = memory(Matrix(m, k, ta, memory::data_type::bf16), engine_, nullptr);
    bound.weights = memory(Matrix(k, n, tb, memory::data_type::bf16), engine_, nullptr);
    bound.dst = memory(Matrix(m, n, false, memory::data_type::f32), engine_, nullptr);
    bound.scratchpad = memory(primitive.scratchpad, engine_, nullptr);
    bound.args = {{DNNL_ARG_SRC, bound.src},
                  {DNNL_ARG_WEIGHTS, bound.weights},
                  {DNNL_ARG_DST, bound.dst},
                  {DNNL_ARG_SCRATCHPAD, bound.scratchpad}};
    return bound;
  }

  OneDnnGemm() : engine_(dnnl::engine::kind::cpu, 0) {
    try {
      const std::string impl = Describe(false, true, 64, 64, 64, 1.0f, 0.0f).impl_info_str();
      if (impl.rfind("ref", 0) != 0) kernel_ = impl;
    } catch (const dnnl::error&) {
      // No bf16 matmul at all on this CPU: the emulation runs.
    }
  }

  dnnl::matmul::primitive_desc Describe(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                                        float alpha, float beta) const {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::desc desc(Matrix(m, k, ta, memory::data_type::bf16),
                                  Matrix(k, n, tb, memory::data_type::bf16),
                                  Matrix(m, n, false, memory::data_type::f32));
    return dnnl::matmul::primitive_desc(desc, attr, engine_);
  }

  dnnl::engine engine_;
  std::string kernel_;
  std::mutex mutex_;
  std::map<Key, Primitive> primitives_;
};

bool EmulationForced() {
  const char* forced = std::getenv("TITAN_BF16_GEMM");
  return forced != nullptr && std::strcmp(forced, "emulate") == 0;
}

bool Native() {
  static const bool native = !EmulationForced() && !OneDnnGemm::Get().native_kernel().empty();
  return native;
}

// Widening bf16 to f32 is exact, so sgemm on the widened copies multiplies the same numbers.
void Emulate(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
             const uint16_t* b, float beta, float* c) {
  std::vector<float> wide(m * k + k * n);
  float* wide_a = wide.data();
  float* wide_b = wide_a + m * k;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m * k; ++i) wide_a[i] = Bf16ToF32(a[i]);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < k * n; ++i) wide_b[i] = Bf16ToF32(b[i]);
  internal::Gemm(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                 wide_a, ta ? m : k, wide_b, tb ? k : n, beta, c, n);
}

}  // namespace

absl::Status Bf16Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                      float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c) {
  static const absl::Status setting = CheckBf16GemmSetting();
  TITAN_RETURN_IF_ERROR(setting);
  if (m == 0 || n == 0) return absl::OkStatus();
  if (Native()) {
    return OneDnnGemm::Get().Run(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
  }
  return EmulatedBf16Gemm(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
}

absl::Status EmulatedBf16Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k,
                              float alpha, const uint16_t* a, const uint16_t* b, float beta,
                              float* c) {
  if (m == 0 || n == 0) return absl::OkStatus();
  Emulate(transpose_a, transpose_b, m, n, k, alpha, a, b, beta, c);
  return absl::OkStatus();
}

absl::Status CheckBf16GemmSetting() {
  const char* setting = std::getenv("TITAN_BF16_GEMM");
  if (setting == nullptr || *setting == '\0' || std::strcmp(setting, "emulate") == 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("environment variable TITAN_BF16_GEMM=", setting,
                   ": expected \"emulate\" (to force the emulated bf16 GEMM), or leave it unset"));
}

std::string Bf16GemmPath() {
  if (Native()) return absl::StrCat("by oneDNN (", OneDnnGemm::Get().native_kernel(), ")");
  if (EmulationForced()) return "emulated (TITAN_BF16_GEMM=emulate): bf16 widened to f32, sgemm";
  return "emulated (this CPU has no bf16 instructions oneDNN uses: AVX512_BF16 or AMX): bf16 "
         "widened to f32, sgemm";
}

}  // namespace titan
