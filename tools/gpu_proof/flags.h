// titan-gpu-proof's command line, and what a bundle must hold for the proof to start.
#ifndef TITAN_TOOLS_GPU_PROOF_FLAGS_H_
#define TITAN_TOOLS_GPU_PROOF_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/gpu_proof/budget.h"

namespace titan::gpu_proof {

inline constexpr char kUsage[] =
    R"(usage: titan-gpu-proof --bundle DIR [--report FILE] [--deadline-s 600] [--work DIR]
       titan-gpu-proof --bundle DIR --make-reference
The GPU proof of a titan bundle (tools/gpu-bundle makes one): the bundle's own CPU check, then
on the CUDA device the kernel and NCCL tests, the f32 losses against the CPU reference, an exact
resume, fsdp 2 and tp 2 against one rank (with bin/mpirun), and a throughput table.
  --bundle DIR       the unpacked bundle
  --report FILE      the JSON report (default gpu-check-report.json); the log is FILE.log
  --deadline-s N     the whole proof's time; each part's budget scales with it (default 600)
  --work DIR         where the runs write (default: a new folder under $TMPDIR or /tmp)
  --make-reference   only the CPU f32 run, written into DIR/reference/ (the bundle script's)
Exit status: 0 pass, 1 fail, 2 usage, 3 no CUDA device (the bundle's CPU check passed).
)";

struct Flags {
  std::string bundle;
  std::string report = "gpu-check-report.json";
  std::string work;  // empty: a new temporary folder
  double deadline_s = kDefaultDeadlineS;
  bool make_reference = false;
  bool help = false;
};

// Flags take their value after '=' or as the next argument. Errors name the flag.
absl::StatusOr<Flags> ParseFlags(const std::vector<std::string>& args);

// What the bundle at `dir` lacks to start ("bin/titan-run", "reference/cpu_f32/metrics.jsonl",
// ...); the reference only when it is not being made. Empty when nothing is missing.
std::vector<std::string> MissingFromBundle(const std::string& dir, bool make_reference);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_FLAGS_H_
