// The CPU a reference was made on, for reference.json: losses summed in another order on
// another CPU differ in the last digits, and the reader should know which CPU it was.
#ifndef TITAN_TOOLS_GPU_PROOF_CPU_INFO_H_
#define TITAN_TOOLS_GPU_PROOF_CPU_INFO_H_

#include <string>

namespace titan::gpu_proof {

// The first "model name" of /proc/cpuinfo's text, and the number of processors listed:
// "AMD EPYC 9654 96-Core Processor (2 processors)"; "unknown" when there is none.
std::string CpuModel(const std::string& cpuinfo);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_CPU_INFO_H_
