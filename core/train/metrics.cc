#include "core/train/metrics.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/data/input_file.h"

namespace titan {

absl::StatusOr<MetricsLog> MetricsLog::Open(const std::string& dump_folder, PeakFlops peak,
                                            int64_t resumed_step,
                                            std::unique_ptr<TensorBoardWriter> tensorboard,
                                            bool jsonl, const std::string& resumed_row) {
  MetricsLog log;
  log.tensorboard_ = std::move(tensorboard);
  log.jsonl_ = jsonl;
  if (!jsonl) {
    log.peak_ = std::move(peak);
    if (log.tensorboard_ != nullptr) log.path_ = log.tensorboard_->path();
    return log;
  }
  std::error_code error;
  std::filesystem::create_directories(dump_folder, error);
  log.path_ = (std::filesystem::path(dump_folder) / "metrics.jsonl").string();
  log.peak_ = std::move(peak);
  std::ios::openmode mode = std::ios::trunc;
  if (resumed_step > 0) {
    std::string old;
    if (std::filesystem::exists(log.path_, error)) {
      TITAN_RETURN_IF_ERROR(
          InspectInput(log.path_, /*folder_ok=*/false, "the metrics file of the resumed run")
              .status());
      std::ifstream in(log.path_, std::ios::binary);
      old.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    MetricsHistory history = MetricsRowsUpTo(old, resumed_step);
    if (!history.invalid_lines.empty()) {
      spdlog::warn(
          "[metrics] {}: line(s) {} are no metrics row (a damaged file?): left out of the "
          "resumed run's history",
          log.path_, LineRanges(history.invalid_lines));
    }
    const bool relog = !history.has_step_row && !resumed_row.empty();
    if (relog) absl::StrAppend(&history.kept, resumed_row, "\n");
    // Rewritten beside it and renamed over it, so a kill now never loses the history.
    const std::string staged = log.path_ + ".tmp";
    std::ofstream staged_out(staged, std::ios::trunc | std::ios::binary);
    staged_out << history.kept;
    staged_out.close();
    if (staged_out) std::filesystem::rename(staged, log.path_, error);
    if (!staged_out || error) {
      std::filesystem::remove(staged, error);
      return absl::PermissionDeniedError(
          absl::StrCat("job.dump_folder: cannot rewrite ", log.path_, " for the resumed run (",
                       staged, " could not be written and renamed over it)"));
    }
    spdlog::info(
        "[metrics] resumed after step {}: {} keeps the rows up to it, {} row(s) past it "
        "dropped{}",
        resumed_step, log.path_, history.past,
        relog ? absl::StrCat("; step ", resumed_step,
                             "'s row was lost and is logged again from the checkpoint")
              : "");
    mode = std::ios::app;
  }
  log.out_.open(log.path_, mode);
  if (!log.out_) {
    return absl::PermissionDeniedError(absl::StrCat("job.dump_folder: cannot write ", log.path_));
  }
  log.terminal_ = isatty(STDERR_FILENO) != 0;
  return log;
}

MetricsHistory MetricsRowsUpTo(absl::string_view jsonl, int64_t step) {
  MetricsHistory history;
  int64_t number = 0;
  for (absl::string_view line : absl::StrSplit(jsonl, '\n')) {
    ++number;
    if (line.empty()) continue;
    const nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_object() || !row.contains("step") || !row["step"].is_number_integer()) {
      history.invalid_lines.push_back(number);
    } else if (row["step"].get<int64_t>() <= step) {
      absl::StrAppend(&history.kept, line, "\n");
      if (row["step"].get<int64_t>() == step && row.contains("loss")) history.has_step_row = true;
    } else {
      ++history.past;
    }
  }
  return history;
}

std::string LineRanges(const std::vector<int64_t>& lines) {
  std::string text;
  for (size_t i = 0; i < lines.size();) {
    size_t j = i;
    while (j + 1 < lines.size() && lines[j + 1] == lines[j] + 1) ++j;
    absl::StrAppend(&text, text.empty() ? "" : ", ", lines[i]);
    if (j > i) absl::StrAppend(&text, "-", lines[j]);
    i = j + 1;
  }
  return text;
}

Throughput RankThroughput(int64_t tokens, double seconds, int non_data_parallel,
                          double flop_per_token, double peak_tflops) {
  Throughput t;
  t.tps = static_cast<double>(tokens) / (seconds * non_data_parallel);
  t.tflops = t.tps * flop_per_token / 1e12;
  t.mfu = 100.0 * t.tflops / peak_tflops;
  return t;
}

namespace {

// A row's values as metrics.jsonl prints them; mfu is null when the peak is too low.
std::vector<std::pair<std::string, std::string>> RowFields(const StepMetrics& m, bool mfu_known) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"loss", absl::StrFormat("%.6f", m.loss)},
      {"grad_norm", absl::StrFormat("%.6f", m.grad_norm)},
      {"lr", absl::StrFormat("%.6e", m.lr)},
      {"tps", absl::StrFormat("%.1f", m.tps)},
      {"tflops", absl::StrFormat("%.4f", m.tflops)},
      {"mfu", mfu_known ? absl::StrFormat("%.3f", m.mfu) : "null"},
      {"mem_gib", absl::StrFormat("%.4f", m.mem_gib)},
      {"data_s", absl::StrFormat("%.4f", m.data_s)}};
  if (m.device_memory) {
    fields.emplace_back("mem_reserved_gib", absl::StrFormat("%.4f", m.mem_reserved_gib));
  }
  if (m.pipeline) {
    fields.emplace_back("pp_bubble", absl::StrFormat("%.4f", m.bubble));
    fields.emplace_back("pp_bubble_schedule", absl::StrFormat("%.4f", m.bubble_theory));
  }
  if (m.aux_loss) fields.emplace_back("moe_aux_loss", absl::StrFormat("%.6e", *m.aux_loss));
  if (m.tp_overlap) {
    fields.emplace_back("tp_comm_hidden_s", absl::StrFormat("%.6f", m.tp_hidden_s));
    fields.emplace_back("tp_comm_exposed_s", absl::StrFormat("%.6f", m.tp_exposed_s));
  }
  if (!m.expert_tokens.empty()) {
    fields.emplace_back("expert_imbalance", absl::StrFormat("%.4f", m.expert_imbalance));
    fields.emplace_back("expert_tokens",
                        absl::StrCat("[", absl::StrJoin(m.expert_tokens, ", "), "]"));
  }
  return fields;
}

}  // namespace

std::string MetricsLog::WriteRow(int64_t step,
                                 const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<std::pair<std::string, double>> scalars;
  std::string row = absl::StrFormat("{\"step\": %d", step);
  for (const auto& [key, text] : fields) {
    absl::StrAppend(&row, ", \"", key, "\": ", text);
    double value = 0;
    if (absl::SimpleAtod(text, &value)) scalars.emplace_back(key, value);  // not a null
  }
  absl::StrAppend(&row, "}");
  if (jsonl_) out_ << row << "\n" << std::flush;
  // The values as the row prints them, so TensorBoard shows what metrics.jsonl holds.
  if (tensorboard_ != nullptr) {
    absl::Status written = tensorboard_->AddScalars(step, scalars);
    if (!written.ok() && !warned_tensorboard_) {
      warned_tensorboard_ = true;
      spdlog::warn("[metrics] {}; TensorBoard misses the steps from {} on",
                   std::string(written.message()), step);
    }
  }
  return row;
}

void MetricsLog::ClearBar() {
  if (bar_shown_) std::fputs("\r\033[K", stderr);
  bar_shown_ = false;
}

void MetricsLog::Log(const StepMetrics& m) {
  if (!jsonl_) {
    WriteRow(m.step, RowFields(m, m.mfu <= 100.0));
    return;
  }
  last_row_step_ = m.step;
  ClearBar();
  // Above 100% the peak, not the run, is wrong (a probe on a busy machine, a low setting).
  const bool mfu_known = m.mfu <= 100.0;
  if (!mfu_known && !warned_mfu_) {
    warned_mfu_ = true;
    spdlog::warn(
        "[metrics] {:.4f} TFLOP/s achieved is above the peak of {:.4f} TFLOP/s ({}), so that "
        "peak is too low: MFU is logged as n/a (null in metrics.jsonl); set metrics.peak_tflops "
        "to this device's peak",
        m.tflops, peak_.tflops, peak_.source);
  }
  const std::string mfu =
      mfu_known ? absl::StrFormat("%.1f%%", m.mfu) : std::string("n/a (peak too low)");
  std::string bubble = m.pipeline ? absl::StrFormat("  bubble %.1f%% (schedule %.1f%%)",
                                                    100 * m.bubble, 100 * m.bubble_theory)
                                  : "";
  if (!m.expert_tokens.empty()) {
    absl::StrAppend(&bubble, absl::StrFormat("  experts max/mean %.2f", m.expert_imbalance));
  }
  if (m.aux_loss) absl::StrAppend(&bubble, absl::StrFormat("  aux_loss %.3e", *m.aux_loss));
  if (m.tp_overlap) {
    absl::StrAppend(&bubble, absl::StrFormat("  tp comm hidden %.1fms exposed %.1fms",
                                             1e3 * m.tp_hidden_s, 1e3 * m.tp_exposed_s));
  }
  spdlog::info(
      "loss {:.4f}  grad_norm {:.3f}  lr {:.2e}  tps {:.0f}  tflops {:.3f}  mfu {}  "
      "mem {:.2f}GiB{}  data {:.3f}s{}",
      m.loss, m.grad_norm, m.lr, m.tps, m.tflops, mfu, m.mem_gib,
      m.device_memory ? absl::StrFormat(" (reserved %.2fGiB)", m.mem_reserved_gib) : "", m.data_s,
      bubble);
  last_row_ = WriteRow(m.step, RowFields(m, mfu_known));
}

void MetricsLog::LogEval(int64_t step, double loss) {
  if (jsonl_) {
    ClearBar();
    spdlog::info("validation loss {:.4f}", loss);
  }
  WriteRow(step, {{"eval_loss", absl::StrFormat("%.6f", loss)}});
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

void SetPeakMemory(DevicePlugin& device, StepMetrics& m) {
  constexpr double kGib = 1024.0 * 1024.0 * 1024.0;
  absl::StatusOr<DeviceMemoryInfo> info =
      device.type() == DeviceType::kCpu ? absl::NotFoundError("") : device.MemoryInfo();
  if (!info.ok()) {
    m.mem_gib = PeakMemoryGib();
    return;
  }
  m.device_memory = true;
  m.mem_gib = static_cast<double>(info->peak_allocated_bytes) / kGib;
  m.mem_reserved_gib = static_cast<double>(info->peak_reserved_bytes) / kGib;
}

double FlopPerToken(const LlamaConfig& config, int64_t seq_len) {
  // A tied table is also the output projection, a matmul: it stays in the count.
  const double embedding =
      config.tie_embeddings ? 0.0 : static_cast<double>(config.vocab_size) * config.dim;
  // A mixture of experts counts the experts a token is sent to (TorchTitan's active count).
  const int64_t attention_width = config.n_heads * config.head_dim();
  return 6.0 * (static_cast<double>(config.ActiveParameterCount()) - embedding) +
         6.0 * static_cast<double>(config.n_layers * attention_width * seq_len);
}

}  // namespace titan
