#include "tools/gpu_proof/cpu_info.h"

#include <gtest/gtest.h>

namespace titan::gpu_proof {
namespace {

TEST(CpuModel, TheFirstModelNameAndTheNumberOfProcessors) {
  const std::string cpuinfo =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
      "\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n";
  EXPECT_EQ(CpuModel(cpuinfo), "AMD EPYC 9654 96-Core Processor (2 processors)");
}

TEST(CpuModel, UnknownWithoutAModelName) {
  EXPECT_EQ(CpuModel("processor\t: 0\nHardware\t: something\n"), "unknown");
  EXPECT_EQ(CpuModel(""), "unknown");
}

}  // namespace
}  // namespace titan::gpu_proof
