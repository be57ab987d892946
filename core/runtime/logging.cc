#include "core/runtime/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace titan {
namespace {

std::atomic<int> g_rank{0};
std::atomic<int64_t> g_step{-1};

// %R: the rank and step of the line.
class RankStepFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    int64_t step = g_step.load();
    std::string text = step < 0 ? absl::StrCat("rank ", g_rank.load(), " step -")
                                : absl::StrCat("rank ", g_rank.load(), " step ", step);
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<RankStepFlag>();
  }
};

}  // namespace

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name) {
  constexpr absl::string_view kNames[] = {"trace", "debug",    "info", "warn",
                                          "error", "critical", "off"};
  for (int i = 0; i < static_cast<int>(std::size(kNames)); ++i) {
    if (name == kNames[i]) return static_cast<spdlog::level::level_enum>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--log-level ", name, ": expected one of ", absl::StrJoin(kNames, ", ")));
}

std::unique_ptr<spdlog::formatter> MakeLogFormatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<RankStepFlag>('R');
  formatter->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [%R] %v");
  return formatter;
}

void InitLogging(spdlog::level::level_enum level) {
  // color_mode::automatic colours only when stderr is a terminal.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(spdlog::color_mode::automatic);
  sink->set_formatter(MakeLogFormatter());
  auto logger = std::make_shared<spdlog::logger>("titan", std::move(sink));
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

void SetLogRank(int rank) { g_rank = rank; }
void SetLogStep(int64_t step) { g_step = step; }

}  // namespace titan
