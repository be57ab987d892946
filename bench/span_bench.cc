// The cost of one ScopedSpan with profiling off (outside a profiled step: what every kernel,
// module and data-loading call pays in a normal run) and while recording, in nanoseconds.
//
//   build/bin/titan_span_bench [spans]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/runtime/profiler.h"

namespace {

double NanosPerSpan(long count) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i) {
    titan::ScopedSpan span("kernel", "Gemm");
    asm volatile("" ::: "memory");  // keeps the loop and the span from being folded away
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
             .count() /
         static_cast<double>(count);
}

}  // namespace

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 10'000'000;
  if (count <= 0) {
    std::fprintf(stderr, "titan_span_bench: expected a positive span count, found %s\n", argv[1]);
    return 2;
  }
  const double off = NanosPerSpan(count);
  const auto folder = std::filesystem::temp_directory_path() / "titan_span_bench";
  titan::Profiler profiler(1, folder.string(), 0);
  profiler.BeginStep(1);
  const long recorded = count < 100'000 ? count : 100'000;  // each one is kept and written
  const double on = NanosPerSpan(recorded);
  profiler.EndStep(1).IgnoreError();
  std::filesystem::remove_all(folder);
  std::printf("off_ns_per_span %.2f recording_ns_per_span %.1f spans %ld\n", off, on, count);
  return 0;
}
