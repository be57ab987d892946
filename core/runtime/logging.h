// spdlog set-up: every line carries the rank and the training step; colour only on a terminal.
#ifndef TITAN_CORE_RUNTIME_LOGGING_H_
#define TITAN_CORE_RUNTIME_LOGGING_H_

#include <spdlog/spdlog.h>

#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "titan/status.h"

namespace titan {

absl::StatusOr<spdlog::level::level_enum> ParseLogLevel(absl::string_view name);

// Makes the default logger write to stderr with titan's line format.
void InitLogging(spdlog::level::level_enum level);

// The formatter every titan sink uses: "[time] [level] [rank R step S] message".
std::unique_ptr<spdlog::formatter> MakeLogFormatter();

void SetLogRank(int rank);
void SetLogStep(int64_t step);  // negative: not in the step loop yet

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_LOGGING_H_
