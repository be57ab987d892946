// Runs this plugin's CUDA kernels on the CPU, for tests on machines without a GPU (test-only).
// A block's threads are fibers (ucontext) of one OS thread, switched only at __syncthreads and
// warp shuffles, so the kernel's own code runs as written, in a fixed order: a read of shared
// memory that a missing __syncthreads leaves unordered reads what the order gives, and running
// the fibers first to last and then last to first (set_reverse_order) tells such a race by a
// different result. Dynamic shared memory starts as NaNs, so reading what no thread wrote shows.
// A barrier that some threads never reach aborts with a message.
//
// Include this before a kernel header (*.cuh), in a C++ test built without nvcc; launch with
// emulation::Launch(kernel, blocks, threads, shared_bytes, arguments...).
#ifndef TITAN_PLUGINS_DEVICE_CUDA_CUDA_EMULATION_H_
#define TITAN_PLUGINS_DEVICE_CUDA_CUDA_EMULATION_H_

#include <cuda_runtime.h>  // dim3, uint3, float4, cudaError_t
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#define TITAN_CUDA_EMULATION 1

// CUDA's qualifiers mean nothing on the CPU; __shared__ variables are one per program, which is
// one per block as blocks run one after another.
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict

namespace titan::emulation {

enum class Wait { kRunnable, kBlockBarrier, kWarpBarrier, kDone };

struct Fiber {
  ucontext_t context;
  std::vector<char> stack;
  Wait wait = Wait::kRunnable;
};

struct State {
  uint3 thread{0, 0, 0}, block{0, 0, 0};
  dim3 block_dim{1, 1, 1}, grid_dim{1, 1, 1};
  std::vector<float4> shared;  // the dynamic shared memory
  std::vector<Fiber> fibers;
  std::vector<float> exchange;  // one slot per thread for shuffles
  ucontext_t scheduler;
  int current = 0;
  bool reverse = false;
  std::function<void()> body;
};

inline State& state() {
  static State* s = new State();
  return *s;
}

// Runs fibers last to first (true) or first to last.
inline void set_reverse_order(bool reverse) { state().reverse = reverse; }

inline void Yield(Wait wait) {
  State& s = state();
  Fiber& fiber = s.fibers[s.current];
  fiber.wait = wait;
  swapcontext(&fiber.context, &s.scheduler);
}

inline void FiberEntry() {
  State& s = state();
  s.body();
  s.fibers[s.current].wait = Wait::kDone;  // returning resumes the scheduler (uc_link)
}

inline void RunBlock(int threads) {
  constexpr size_t kStackBytes = size_t{256} << 10;
  State& s = state();
  s.fibers.resize(threads);
  s.exchange.assign(threads, 0.0f);
  for (Fiber& fiber : s.fibers) {
    fiber.stack.resize(kStackBytes);
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = fiber.stack.data();
    fiber.context.uc_stack.ss_size = fiber.stack.size();
    fiber.context.uc_link = &s.scheduler;
    makecontext(&fiber.context, FiberEntry, 0);
    fiber.wait = Wait::kRunnable;
  }
  for (;;) {
    bool ran = false;
    for (int n = 0; n < threads; ++n) {
      const int t = s.reverse ? threads - 1 - n : n;
      if (s.fibers[t].wait != Wait::kRunnable) continue;
      s.current = t;
      s.thread = uint3{static_cast<unsigned>(t % s.block_dim.x),
                       static_cast<unsigned>(t / s.block_dim.x % s.block_dim.y),
                       static_cast<unsigned>(t / (s.block_dim.x * s.block_dim.y))};
      swapcontext(&s.scheduler, &s.fibers[t].context);
      ran = true;
    }
    int done = 0, at_block = 0;
    for (const Fiber& fiber : s.fibers) {
      done += fiber.wait == Wait::kDone;
      at_block += fiber.wait == Wait::kBlockBarrier;
    }
    if (done == threads) return;
    bool released = false;
    for (int warp = 0; warp * 32 < threads; ++warp) {
      int waiting = 0, live = 0;
      for (int t = warp * 32; t < threads && t < warp * 32 + 32; ++t) {
        live += s.fibers[t].wait != Wait::kDone;
        waiting += s.fibers[t].wait == Wait::kWarpBarrier;
      }
      if (waiting == 0 || waiting != live) continue;
      for (int t = warp * 32; t < threads && t < warp * 32 + 32; ++t) {
        if (s.fibers[t].wait == Wait::kWarpBarrier) s.fibers[t].wait = Wait::kRunnable;
      }
      released = true;
    }
    if (!released && at_block > 0 && at_block + done == threads) {
      for (Fiber& fiber : s.fibers) {
        if (fiber.wait == Wait::kBlockBarrier) fiber.wait = Wait::kRunnable;
      }
      released = true;
    }
    if (!released && !ran) {
      std::fprintf(stderr,
                   "cuda emulation: block %u deadlocked: threads wait at barriers that "
                   "others never reach\n",
                   s.block.x);
      std::abort();
    }
  }
}

// Runs kernel<<<blocks, threads, shared_bytes>>>(arguments...) block after block.
template <typename... Parameters, typename... Arguments>
cudaError_t Launch(void (*kernel)(Parameters...), int64_t blocks, int threads, size_t shared_bytes,
                   Arguments... arguments) {
  State& s = state();
  s.grid_dim = dim3(static_cast<unsigned>(blocks));
  s.block_dim = dim3(static_cast<unsigned>(threads));
  s.body = [&] { kernel(arguments...); };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t b = 0; b < blocks; ++b) {
    s.block = uint3{static_cast<unsigned>(b), 0, 0};
    s.shared.assign(shared_bytes / sizeof(float4) + 1, float4{nan, nan, nan, nan});
    RunBlock(threads);
  }
  return cudaSuccess;
}

// As Launch, for the Run* functions of the kernel headers that take a launcher.
struct Launcher {
  template <typename... Parameters, typename... Arguments>
  cudaError_t operator()(void (*kernel)(Parameters...), int64_t blocks, int threads,
                         size_t shared_bytes, Arguments... arguments) const {
    return Launch(kernel, blocks, threads, shared_bytes, arguments...);
  }
};

}  // namespace titan::emulation

#define threadIdx (::titan::emulation::state().thread)
#define blockIdx (::titan::emulation::state().block)
#define blockDim (::titan::emulation::state().block_dim)
#define gridDim (::titan::emulation::state().grid_dim)

inline void __syncthreads() { ::titan::emulation::Yield(::titan::emulation::Wait::kBlockBarrier); }

// Every lane of the warp writes, waits for the others, reads its partner, and waits again before
// the slots are written anew.
template <typename T>
T __shfl_xor_sync(unsigned /*mask*/, T value, int lane_mask, int /*width*/ = 32) {
  using ::titan::emulation::Wait;
  ::titan::emulation::State& s = ::titan::emulation::state();
  const int t = s.current;
  float slot;
  std::memcpy(&slot, &value, sizeof(float) < sizeof(T) ? sizeof(float) : sizeof(T));
  static_assert(sizeof(T) <= sizeof(float), "shuffles of 4-byte values only");
  s.exchange[t] = slot;
  ::titan::emulation::Yield(Wait::kWarpBarrier);
  const float other_slot = s.exchange[(t & ~31) | ((t & 31) ^ lane_mask)];
  ::titan::emulation::Yield(Wait::kWarpBarrier);
  T other;
  std::memcpy(&other, &other_slot, sizeof(T));
  return other;
}

// Every lane of the warp sets its bit, as for a shuffle.
inline unsigned __ballot_sync(unsigned /*mask*/, int predicate) {
  using ::titan::emulation::Wait;
  ::titan::emulation::State& s = ::titan::emulation::state();
  const int t = s.current, first = t & ~31;
  s.exchange[t] = predicate ? 1.0f : 0.0f;
  ::titan::emulation::Yield(Wait::kWarpBarrier);
  unsigned bits = 0;
  for (int lane = 0; lane < 32 && first + lane < static_cast<int>(s.exchange.size()); ++lane) {
    if (s.exchange[first + lane] != 0.0f) bits |= 1u << lane;
  }
  ::titan::emulation::Yield(Wait::kWarpBarrier);
  return bits;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }

inline float* DynamicSharedFloats() {
  return reinterpret_cast<float*>(::titan::emulation::state().shared.data());
}

inline unsigned __float_as_uint(float x) {
  unsigned bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}
inline float __uint_as_float(unsigned bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}
inline unsigned atomicMax(unsigned* address, unsigned value) {  // one OS thread: plain
  const unsigned old = *address;
  if (value > old) *address = value;
  return old;
}

// CUDA's separately rounded product and sum, which keep nvcc from fusing them into an FMA.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }

// CUDA's classification functions, which the kernels call unqualified.
using std::isfinite;
using std::isnan;
using std::signbit;

// CUDA's min and max of integers of one type.
template <typename T>
T min(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
T max(T a, T b) {
  return a < b ? b : a;
}

#endif  // TITAN_PLUGINS_DEVICE_CUDA_CUDA_EMULATION_H_
