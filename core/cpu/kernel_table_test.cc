// The kernel table (titan/compute_kernels.inc) drives the operand checks of every backend: each
// kernel runs its entry's check before the backend's implementation, which a refused call never
// reaches, and the CPU backend refuses a bad operand with exactly the check's message.
#include "titan/kernel_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/cpu/cpu_compute.h"
#include "titan/compute.h"

namespace titan {
namespace {

// A backend whose implementations only record that they ran: what reaches them passed the check.
class RecordingCompute : public Compute {
 public:
  Device device() const override { return Device{DeviceType::kCuda, 0}; }
  std::string Describe() const override { return "recording"; }
  StreamHandle current_stream() const override { return nullptr; }
  absl::StatusOr<EventHandle> RecordEvent(StreamHandle) override { return nullptr; }
  absl::Status StreamWaitEvent(StreamHandle, EventHandle) override { return absl::OkStatus(); }
  absl::Status SynchronizeEvent(EventHandle) override { return absl::OkStatus(); }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  std::vector<std::string> ran;

 private:
  template <typename Operands>
  absl::Status Record(const char* kernel, const Operands&) {
    ran.push_back(kernel);
    return absl::OkStatus();
  }
#define TITAN_KERNEL(name, operands, names, check) \
  absl::Status Run##name operands override { return Record(#name, std::forward_as_tuple names); }
#include "titan/compute_kernels.inc"
#undef TITAN_KERNEL
};

// Calls `call` with a default value of each of its parameters: views with no data on the CPU,
// zero sizes and scalars, an empty spec.
template <typename Call, typename... Operands>
absl::Status CallWithDefaults(const Call& call, absl::Status (Call::*)(Operands...) const) {
  return call(std::remove_cvref_t<Operands>{}...);
}
template <typename Call>
absl::Status CallWithDefaults(const Call& call) {
  return CallWithDefaults(call, &Call::operator());
}

struct KernelCall {
  std::string kernel;
  std::function<absl::Status(Compute&)> call_with_defaults;
};

// Every kernel of the table, called through the compute interface as the model calls it.
std::vector<KernelCall> EveryKernel() {
  return {
#define TITAN_KERNEL(name, operands, names, check)                                \
  {#name, [](Compute& compute) {                                                  \
     return CallWithDefaults([&compute] operands { return compute.name names; }); \
   }},
#include "titan/compute_kernels.inc"
#undef TITAN_KERNEL
  };
}

TEST(KernelTable, EveryKernelChecksItsOperandsBeforeTheBackendRuns) {
  RecordingCompute compute;
  const std::vector<KernelCall> kernels = EveryKernel();
  ASSERT_FALSE(kernels.empty());
  for (const KernelCall& kernel : kernels) {
    const absl::Status status = kernel.call_with_defaults(compute);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << kernel.kernel;
    // The entry's check names its own kernel.
    EXPECT_THAT(std::string(status.message()), testing::StartsWith(kernel.kernel + ": ")) << status;
  }
  EXPECT_THAT(compute.ran, testing::IsEmpty());
}

TEST(KernelTable, OperandsThatPassTheCheckReachTheBackendOnce) {
  RecordingCompute compute;
  float x[4] = {}, out[4] = {};
  const Device cuda{DeviceType::kCuda, 0};
  ASSERT_TRUE(compute
                  .Accumulate(TensorView{x, DType::kF32, cuda, {4}, {}},
                              TensorView{out, DType::kF32, cuda, {2, 2}, {}})
                  .ok());
  EXPECT_THAT(compute.ran, testing::ElementsAre("Accumulate"));
}

TEST(KernelTable, TheCpuRefusesABadOperandWithTheTablesCheckAndWritesNothing) {
  std::vector<float> x(4, 1.0f), out(6, 7.0f);
  const TensorView from{x.data(), DType::kF32, Device{}, {4}, {}};
  const TensorView to{out.data(), DType::kF32, Device{}, {6}, {}};
  const absl::Status refused = CpuCompute::Get().Accumulate(from, to);
  EXPECT_EQ(refused, CheckAccumulateOperands(from, to, DeviceType::kCpu));
  EXPECT_EQ(refused.message(), "Accumulate: operand 'x' expected 6 elements, found 4");
  EXPECT_THAT(out, testing::Each(7.0f));
}

TEST(KernelTable, TheFingerprintIsOfEveryKernelsNameAndOperands) {
  EXPECT_EQ(kKernelTableFingerprint, Fnv1a64(kKernelTableText));
  EXPECT_THAT(std::string(kKernelTableText),
              testing::HasSubstr("\nFloat8Amax(const TensorView& x, const Float8Scaling& scaling, "
                                 "TensorView amax)\n"));
  // One line per kernel.
  EXPECT_EQ(std::count(kKernelTableText.begin(), kKernelTableText.end(), '\n'),
            static_cast<std::ptrdiff_t>(EveryKernel().size()));
  EXPECT_NE(Fnv1a64("Fill(TensorView x, float value)\n"),
            Fnv1a64("Fill(TensorView x, double value)\n"));
}

}  // namespace
}  // namespace titan
