#include "core/tensor/blas_kernels.h"

#include <cblas.h>

#include <array>
#include <cstdlib>
#include <string_view>

#include "absl/strings/str_cat.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

// OpenBLAS's own start and stop (driver/others/memory.c): the library's load constructor and
// unload destructor, exported by every build. Weak, so a BLAS without them still links; titan then
// leaves the kernels as they are.
extern "C" __attribute__((weak)) void gotoblas_init(void);
extern "C" __attribute__((weak)) void gotoblas_quit(void);

namespace titan {
namespace {

struct Cpu {
  bool avx512 = false, avx2_fma = false, avx = false;
  unsigned family = 0, model = 0;
};

Cpu ThisCpu() {
  Cpu cpu;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // SkylakeX's kernels use the foundation, byte/word, vector-length, doubleword and conflict sets.
  cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512cd");
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  cpu.avx = __builtin_cpu_supports("avx");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0) {
    const unsigned base_family = (eax >> 8) & 0xf;
    cpu.family = base_family + (base_family == 0xf ? (eax >> 20) & 0xff : 0);
    cpu.model = ((eax >> 4) & 0xf) | (base_family >= 6 ? ((eax >> 16) & 0xf) << 4 : 0);
  }
#endif
  return cpu;
}

// "OpenBLAS 0.3.21" from "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...".
std::string Version() {
  const std::string config = openblas_get_config();
  const size_t first = config.find(' ');
  return config.substr(0, first == std::string::npos ? first : config.find(' ', first + 1));
}

std::string Choose() {
  const std::string version = Version();
  const std::string picked = openblas_get_corename();
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (user != nullptr && *user != '\0') {
    return absl::StrCat(version, " ", picked, " kernels (OPENBLAS_CORETYPE=", user, ")");
  }
  const Cpu cpu = ThisCpu();
  const std::string wanted = BlasCoreForThisCpu();
  const int picked_level = BlasCoreLevel(picked);
  if (wanted.empty() || picked_level < 0 || picked_level >= BlasCoreLevel(wanted)) {
    return absl::StrCat(version, " ", picked, " kernels (OpenBLAS's choice)");
  }
  const std::string why = absl::StrCat("OpenBLAS picked ", picked, " for this CPU, family ",
                                       cpu.family, " model ", cpu.model);
  if (gotoblas_init == nullptr || gotoblas_quit == nullptr) {
    return absl::StrCat(version, " ", picked, " kernels (", why,
                        "; this OpenBLAS cannot be restarted: set OPENBLAS_CORETYPE=", wanted, ")");
  }
  // Read by the restart, exactly as if the user had set it before OpenBLAS loaded.
  setenv("OPENBLAS_CORETYPE", wanted.c_str(), /*overwrite=*/0);
  gotoblas_quit();
  gotoblas_init();
  return absl::StrCat(version, " ", openblas_get_corename(), " kernels (chosen by titan for ",
                      cpu.avx512 ? "AVX-512" : cpu.avx2_fma ? "AVX2" : "AVX", ": ", why, ")");
}

}  // namespace

std::string BlasCoreForIsa(bool avx512, bool avx2_fma, bool avx) {
  if (avx512) return "SkylakeX";
  if (avx2_fma) return "Haswell";
  if (avx) return "Sandybridge";
  return "";
}

std::string BlasCoreForThisCpu() {
  const Cpu cpu = ThisCpu();
  return BlasCoreForIsa(cpu.avx512, cpu.avx2_fma, cpu.avx);
}

int BlasCoreLevel(const std::string& core) {
  struct Level {
    std::string_view core;
    int level;
  };
  static constexpr std::array<Level, 27> kLevels = {{
      {"Unknown", 0},     {"Katmai", 0},        {"Coppermine", 0},   {"Northwood", 0},
      {"Prescott", 0},    {"Banias", 0},        {"Atom", 0},         {"Core2", 0},
      {"Penryn", 0},      {"Dunnington", 0},    {"Nehalem", 0},      {"Athlon", 0},
      {"Opteron", 0},     {"Opteron_SSE3", 0},  {"Barcelona", 0},    {"Nano", 0},
      {"Bobcat", 0},      {"Sandybridge", 1},   {"Bulldozer", 1},    {"Piledriver", 1},
      {"Steamroller", 1}, {"Haswell", 2},       {"Excavator", 2},    {"Zen", 2},
      {"SkylakeX", 3},    {"Cooperlake", 3},    {"SapphireRapids", 3},
  }};
  for (const Level& entry : kLevels) {
    if (entry.core == core) return entry.level;
  }
  return -1;
}

const std::string& SelectBlasKernels() {
  static const std::string chosen = Choose();
  return chosen;
}

}  // namespace titan
