// Which CUDA devices the driver shows this process, asked of libcuda directly (dlopen), so the
// proof needs no CUDA library of its own. The driver applies CUDA_VISIBLE_DEVICES.
#ifndef TITAN_TOOLS_GPU_PROOF_CUDA_PROBE_H_
#define TITAN_TOOLS_GPU_PROOF_CUDA_PROBE_H_

#include <string>
#include <vector>

namespace titan::gpu_proof {

struct CudaDevice {
  std::string name;                // "NVIDIA H200"
  std::string compute_capability;  // "9.0"
};

struct CudaProbe {
  std::vector<CudaDevice> devices;  // empty: no device
  std::string driver;               // "13.0" when the driver answered
  std::string note;                 // why there is no device: no driver, cuInit's error, ...
};

// Loads `library` (the driver, libcuda.so.1), initializes it and lists its devices.
CudaProbe ProbeCuda(const std::string& library = "libcuda.so.1");

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_CUDA_PROBE_H_
