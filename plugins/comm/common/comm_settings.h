// What the comm plugins (mpi, nccl) read of the recipe: the core's [comm] timeouts and flight
// recorder size, and the plugins' own key, trace_folder. Shared so both read them alike.
#ifndef TITAN_PLUGINS_COMM_COMMON_COMM_SETTINGS_H_
#define TITAN_PLUGINS_COMM_COMMON_COMM_SETTINGS_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "titan/comm.h"
#include "titan/config_view.h"

namespace titan::comm {

struct CommSettings {
  int64_t init_timeout_seconds = 300;
  int64_t train_timeout_seconds = 100;
  int64_t trace_buf_size = 20000;
  std::string trace_folder;  // empty: <job.dump_folder>/flight_recorder

  // The plugins' own keys, beyond the core's [comm] ones.
  static std::vector<ConfigKey> Keys() {
    ConfigKey folder;
    folder.name = "trace_folder";
    folder.type = ConfigType::kString;
    folder.default_value = std::string("");
    folder.help =
        "where the flight recorder writes on a timeout, an error or request; empty = "
        "<job.dump_folder>/flight_recorder";
    return {folder};
  }

  // Under comm.backend = "auto" the core passes only its own [comm] keys: the rest keep defaults.
  absl::Status Configure(const ConfigView& config) {
    if (config.Has("init_timeout_seconds")) {
      TITAN_ASSIGN_OR_RETURN(init_timeout_seconds, config.GetInt("init_timeout_seconds"));
    }
    if (config.Has("train_timeout_seconds")) {
      TITAN_ASSIGN_OR_RETURN(train_timeout_seconds, config.GetInt("train_timeout_seconds"));
    }
    if (config.Has("trace_buf_size")) {
      TITAN_ASSIGN_OR_RETURN(trace_buf_size, config.GetInt("trace_buf_size"));
    }
    if (config.Has("trace_folder")) {
      TITAN_ASSIGN_OR_RETURN(trace_folder, config.GetString("trace_folder"));
    }
    return absl::OkStatus();
  }

  std::string TraceFolder(const JoinOptions& options) const {
    if (!trace_folder.empty()) return trace_folder;
    return (std::filesystem::path(options.dump_folder.empty() ? "." : options.dump_folder) /
            "flight_recorder")
        .string();
  }
};

}  // namespace titan::comm

#endif  // TITAN_PLUGINS_COMM_COMMON_COMM_SETTINGS_H_
