#include "core/train/metrics.h"

#include <cblas.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace titan {

absl::StatusOr<MetricsLog> MetricsLog::Open(const std::string& dump_folder) {
  std::error_code error;
  std::filesystem::create_directories(dump_folder, error);
  MetricsLog log;
  log.path_ = (std::filesystem::path(dump_folder) / "metrics.jsonl").string();
  log.out_.open(log.path_, std::ios::trunc);
  if (!log.out_) {
    return absl::PermissionDeniedError(absl::StrCat("job.dump_folder: cannot write ", log.path_));
  }
  log.terminal_ = isatty(STDERR_FILENO) != 0;
  return log;
}

void MetricsLog::ClearBar() {
  if (bar_shown_) std::fputs("\r\033[K", stderr);
  bar_shown_ = false;
}

void MetricsLog::Log(const StepMetrics& m) {
  ClearBar();
  spdlog::info(
      "loss {:.4f}  grad_norm {:.3f}  lr {:.2e}  tps {:.0f}  tflops {:.3f}  mfu {:.1f}%  "
      "mem {:.2f}GiB  data {:.3f}s",
      m.loss, m.grad_norm, m.lr, m.tps, m.tflops, m.mfu, m.mem_gib, m.data_s);
  out_ << absl::StrFormat(
              "{\"step\": %d, \"loss\": %.6f, \"grad_norm\": %.6f, \"lr\": %.6e, \"tps\": %.1f, "
              "\"tflops\": %.4f, \"mfu\": %.3f, \"mem_gib\": %.4f, \"data_s\": %.4f}\n",
              m.step, m.loss, m.grad_norm, m.lr, m.tps, m.tflops, m.mfu, m.mem_gib, m.data_s)
       << std::flush;
}

void MetricsLog::LogEval(int64_t step, double loss) {
  ClearBar();
  spdlog::info("validation loss {:.4f}", loss);
  out_ << absl::StrFormat("{\"step\": %d, \"eval_loss\": %.6f}\n", step, loss) << std::flush;
}

void MetricsLog::Progress(int64_t step, int64_t steps, double elapsed_s) {
  if (!terminal_) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * step / std::max<int64_t>(steps, 1));
  const double eta = step > 0 ? elapsed_s / step * (steps - step) : 0;
  std::fprintf(stderr, "\r\033[K[%s%s] %lld/%lld steps  ETA %dm%02ds",
               std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
               static_cast<long long>(step), static_cast<long long>(steps),
               static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  std::fflush(stderr);
  bar_shown_ = true;
}

double PeakMemoryGib() {
  // VmHWM is this program's own peak. ru_maxrss is not: across fork and exec it keeps the peak
  // of the process that started it (a Python bench with torch loaded, say).
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);  // KiB
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // also KiB
}

double FlopPerToken(const LlamaConfig& config, int64_t seq_len) {
  // A tied table is also the output projection, a matmul: it stays in the count.
  const double embedding =
      config.tie_embeddings ? 0.0 : static_cast<double>(config.vocab_size) * config.dim;
  return 6.0 * (static_cast<double>(config.ParameterCount()) - embedding) +
         6.0 * static_cast<double>(config.n_layers * config.dim * seq_len);
}

double MeasurePeakTflops(int n) {
  const int64_t kN = n;
  std::vector<float> a(kN * kN, 1.0f), b(kN * kN, 0.5f), c(kN * kN);
  // Not timed: the first product pays for page faults and starting the thread pool.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data(), kN, b.data(),
              kN, 0.0f, c.data(), kN);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a.data(), kN, b.data(),
                kN, 0.0f, c.data(), kN);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * kN * kN * kN / std::max(s, 1e-9) / 1e12);
  }
  return best;
}

}  // namespace titan
