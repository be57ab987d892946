#include "core/tensor/blas_kernels.h"

#include <cblas.h>

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

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

// Set, with OPENBLAS_CORETYPE, by the restart below: what OpenBLAS picked on its own.
constexpr char kPickedVariable[] = "TITAN_OPENBLAS_PICKED";

// Why the restart did not happen, when it was wanted but failed; empty otherwise.
std::string& RestartFailure() {
  static std::string failure;
  return failure;
}

std::string WhyNot(const Cpu& cpu, const std::string& picked) {
  return absl::StrCat("OpenBLAS picked ", picked, " for this CPU, family ", cpu.family, " model ",
                      cpu.model);
}

const char* IsaName(const Cpu& cpu) {
  return cpu.avx512 ? "AVX-512" : cpu.avx2_fma ? "AVX2" : "AVX";
}

// OpenBLAS reads OPENBLAS_CORETYPE only when it loads, and it has loaded before any of titan's
// code runs, so wider kernels need a fresh start: the same program, arguments and process (exec
// keeps the pid, so mpirun's ranks stay its ranks) with the variable set. Runs before main, while
// the process has one thread and has opened nothing of its own.
bool RestartOnWiderKernels() {
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (user != nullptr && *user != '\0') return false;
  const std::string wanted = BlasCoreForThisCpu();
  const std::string picked = openblas_get_corename();
  const int picked_level = BlasCoreLevel(picked);
  if (wanted.empty() || picked_level < 0 || picked_level >= BlasCoreLevel(wanted)) return false;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<char*> argv;
  for (size_t at = 0; at < cmdline.size(); at = cmdline.find('\0', at) + 1) {
    argv.push_back(const_cast<char*>(cmdline.data() + at));
  }
  if (argv.empty()) {
    RestartFailure() = "/proc/self/cmdline could not be read";
    return false;
  }
  argv.push_back(nullptr);
  setenv("OPENBLAS_CORETYPE", wanted.c_str(), 1);
  setenv(kPickedVariable, picked.c_str(), 1);
  execv("/proc/self/exe", argv.data());
  RestartFailure() = absl::StrCat("exec /proc/self/exe: ", std::strerror(errno));
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kPickedVariable);
  return false;
}

[[maybe_unused]] const bool kRestarted = RestartOnWiderKernels();

std::string Describe() {
  const std::string version = Version();
  const std::string running = openblas_get_corename();
  const Cpu cpu = ThisCpu();
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const char* picked = std::getenv(kPickedVariable);
  if (user != nullptr && *user != '\0') {
    if (picked != nullptr) {
      return absl::StrCat(version, " ", running, " kernels (OPENBLAS_CORETYPE=", user,
                          ", set by titan for ", IsaName(cpu), ": ", WhyNot(cpu, picked), ")");
    }
    return absl::StrCat(version, " ", running, " kernels (OPENBLAS_CORETYPE=", user, ")");
  }
  if (!RestartFailure().empty()) {
    return absl::StrCat(version, " ", running, " kernels (", WhyNot(cpu, running),
                        "; titan could not restart with OPENBLAS_CORETYPE=", BlasCoreForThisCpu(),
                        ": ", RestartFailure(), ")");
  }
  return absl::StrCat(version, " ", running, " kernels (OpenBLAS's choice)");
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

const std::string& BlasKernels() {
  static const std::string described = Describe();
  return described;
}

}  // namespace titan
