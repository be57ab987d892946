// The parts of the proof, in the order they run. Each is judged by its own checks and returns
// pass, fail or timed out (its time is the context's part_end), with what it found.
#ifndef TITAN_TOOLS_GPU_PROOF_PARTS_H_
#define TITAN_TOOLS_GPU_PROOF_PARTS_H_

#include "absl/status/status.h"
#include "tools/gpu_proof/context.h"

namespace titan::gpu_proof {

// The relative difference allowed between the losses of two runs of the same f32 recipe.
constexpr double kLossTolerance = 1e-5;
// Between two layouts of one bf16 recipe, whose sums in another order can move a value across a
// bf16 rounding step (tests/CMakeLists.txt's TITAN_BF16_LAYOUT_TOLERANCE).
constexpr double kBf16LayoutTolerance = 1e-4;

// Without a GPU: titan-run --version, --list-plugins shows every plugin of the bundle and
// rejects none, and the CPU f32 run reproduces the bundle's reference losses.
PartOutcome BundlePart(const Context& context);

// The GPU test binaries (the cuda device and compute tests, cuBLASLt's), then NCCL's alone.
PartOutcome KernelsPart(const Context& context);
PartOutcome NcclPart(const Context& context);

// The debug recipe's f32 losses on cuda against the CPU reference's.
PartOutcome LossesPart(const Context& context);

// A cuda run resumed from the step-10 checkpoint of an uninterrupted one: the same losses and
// eval losses bit for bit, and the same final parameters.
PartOutcome ResumePart(const Context& context);

// fsdp 2 and tp 2 (two ranks sharing the GPU through mpi) against one rank, and fsdp 2's
// Float8 all-gather against one rank in Float8. Not run without the bundle's launcher.
PartOutcome LayoutsPart(const Context& context);

// The throughput table (throughput.h).
PartOutcome ThroughputPart(const Context& context);

// Async tensor parallelism's figure: tp 2 over nccl on two GPUs, synchronous then async, 10 bf16
// steps of the debug recipe at seq_len 2048: each one's step time and the tp communication hidden
// and exposed per step, the async losses within bf16's layout tolerance of the synchronous ones.
// Not run, saying so, on one GPU or without the bundle's launcher.
PartOutcome AsyncTpPart(const Context& context);

// --make-reference: the CPU f32 run, its metrics.jsonl and a reference.json describing it
// written into the bundle's reference/.
absl::Status MakeReference(const Context& context);

}  // namespace titan::gpu_proof

#endif  // TITAN_TOOLS_GPU_PROOF_PARTS_H_
