// The GEMM plan cache's key and bookkeeping, on the CPU: which calls share a cuBLASLt plan, and
// that a plan is built once per problem, refusals remembered, the least recently used dropped.
#include "gemm_plan_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gemm_plan.h"

namespace titan::cuda {
namespace {

alignas(256) float storage[4096];

// c [m, n] = a [m, k] b [k, n] as compute_gemm.cc hands it to cuBLASLt (b first).
LtMatmul Call(int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
  return LtMatmul{.a = {b, CUDA_R_32F, n, k, n, false, nullptr},
                  .b = {a, CUDA_R_32F, k, m, k, false, nullptr},
                  .c = c,
                  .c_rows = n,
                  .c_columns = m,
                  .compute = CUBLAS_COMPUTE_32F,
                  .alpha = 1.0f,
                  .beta = 0.0f};
}

TEST(GemmPlanKey, CallsOfOneProblemShareAKeyWhateverTheirPointersAndFactors) {
  const LtMatmul first = Call(8, 16, 32, storage, storage + 512, storage + 1024);
  LtMatmul second = Call(8, 16, 32, storage + 1536, storage + 2048, storage + 2560);
  second.alpha = 0.5f;
  second.beta = 1.0f;
  EXPECT_EQ(PlanKeyOf(first), PlanKeyOf(second));
  EXPECT_EQ(GemmPlanKeyHash{}(PlanKeyOf(first)), GemmPlanKeyHash{}(PlanKeyOf(second)));
}

TEST(GemmPlanKey, EveryPropertyOfTheProblemTellsPlansApart) {
  const LtMatmul base = Call(8, 16, 32, storage, storage + 512, storage + 1024);
  std::vector<std::pair<std::string, LtMatmul>> variants;
  const auto vary = [&](const std::string& what, auto change) {
    LtMatmul call = base;
    change(call);
    variants.emplace_back(what, call);
  };
  vary("m", [](LtMatmul& c) { c.c_columns = 9; });
  vary("n", [](LtMatmul& c) { c.c_rows = 17; });
  vary("a rows", [](LtMatmul& c) { c.a.rows = 17; });
  vary("a leading", [](LtMatmul& c) { c.a.leading = 20; });
  vary("b columns", [](LtMatmul& c) { c.b.columns = 9; });
  vary("a transposed", [](LtMatmul& c) { c.a.transpose = true; });
  vary("b transposed", [](LtMatmul& c) { c.b.transpose = true; });
  vary("bf16", [](LtMatmul& c) { c.a.type = c.b.type = CUDA_R_16BF; });
  vary("tf32", [](LtMatmul& c) { c.compute = CUBLAS_COMPUTE_32F_FAST_TF32; });
  vary("a unaligned", [](LtMatmul& c) { c.a.data = storage + 513; });
  vary("c unaligned", [](LtMatmul& c) { c.c = storage + 1026; });
  vary("scaled", [](LtMatmul& c) {
    c.a.scale = c.b.scale = storage;
    c.a.type = c.b.type = CUDA_R_8F_E4M3;
  });
  vary("outer vector scales", [](LtMatmul& c) { c.outer_vector_scales = true; });
  const GemmPlanKey key = PlanKeyOf(base);
  for (size_t i = 0; i < variants.size(); ++i) {
    const GemmPlanKey other = PlanKeyOf(variants[i].second);
    EXPECT_NE(other, key) << variants[i].first;
    EXPECT_NE(GemmPlanKeyHash{}(other), GemmPlanKeyHash{}(key)) << variants[i].first;
    for (size_t j = 0; j < i; ++j) {
      EXPECT_NE(other, PlanKeyOf(variants[j].second))
          << variants[i].first << " vs " << variants[j].first;
    }
  }
  EXPECT_EQ(key.epilogue, CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(key.c_type, CUDA_R_32F);
}

TEST(GemmPlanKey, AlignmentIsTheLargestPowerOfTwoUpTo256) {
  const auto* base = reinterpret_cast<const char*>(storage);
  EXPECT_EQ(AlignmentOf(base), 256u);
  EXPECT_EQ(AlignmentOf(base + 4), 4u);
  EXPECT_EQ(AlignmentOf(base + 48), 16u);
  EXPECT_EQ(AlignmentOf(base + 1), 1u);
  EXPECT_EQ(AlignmentOf(base + 512), 256u);
}

GemmPlanKey KeyWithRows(int64_t rows) {
  GemmPlanKey key;
  key.c_rows = rows;
  return key;
}

TEST(PlanCache, BuildsEachPlanOnceAndDropsTheLeastRecentlyUsed) {
  PlanCache<int> cache(2);
  std::lock_guard<std::mutex> held(cache.lock());
  int built = 0;
  const auto find = [&](int64_t rows) {
    absl::StatusOr<int*> plan = cache.FindOrBuild(KeyWithRows(rows), [&]() -> absl::StatusOr<int> {
      ++built;
      return static_cast<int>(rows) * 10;
    });
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? **plan : -1;
  };
  EXPECT_EQ(find(1), 10);
  EXPECT_EQ(find(2), 20);
  EXPECT_EQ(find(1), 10);  // found: 2 is now the least recently used
  EXPECT_EQ(built, 2);
  EXPECT_EQ(find(3), 30);  // drops 2
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(find(1), 10);
  EXPECT_EQ(built, 3);
  EXPECT_EQ(find(2), 20);  // built again
  EXPECT_EQ(built, 4);
  EXPECT_EQ(cache.builds(), 4);
}

TEST(PlanCache, RemembersARefusalButNotAnotherFailure) {
  PlanCache<int> cache(8);
  std::lock_guard<std::mutex> held(cache.lock());
  int built = 0;
  const auto refused = [&]() -> absl::StatusOr<int> {
    ++built;
    return absl::UnimplementedError("Gemm: cuBLASLt has no algorithm for [3, 4]");
  };
  const auto out_of_memory = [&]() -> absl::StatusOr<int> {
    ++built;
    return absl::FailedPreconditionError("cuda: cublasLtMatmulDescCreate failed");
  };
  for (int call = 0; call < 3; ++call) {
    absl::StatusOr<int*> plan = cache.FindOrBuild(KeyWithRows(4), refused);
    EXPECT_TRUE(absl::IsUnimplemented(plan.status())) << plan.status();
    EXPECT_EQ(plan.status().message(), "Gemm: cuBLASLt has no algorithm for [3, 4]");
  }
  EXPECT_EQ(built, 1);
  for (int call = 0; call < 3; ++call) {
    EXPECT_EQ(cache.FindOrBuild(KeyWithRows(5), out_of_memory).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(built, 4);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace titan::cuda
