#include "core/runtime/logging.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

namespace titan {
namespace {

std::string LogOneLine(const std::string& message) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_formatter(MakeLogFormatter());
  spdlog::logger logger("test", sink);
  logger.info(message);
  return out.str();
}

TEST(Logging, EveryLineCarriesRankAndStep) {
  SetLogRank(3);
  SetLogStep(-1);
  EXPECT_NE(LogOneLine("before").find("[info] [rank 3 step -] before"), std::string::npos);
  SetLogStep(17);
  EXPECT_NE(LogOneLine("during").find("[info] [rank 3 step 17] during"), std::string::npos);
  SetLogRank(0);
  SetLogStep(-1);
}

TEST(Logging, ParsesLevels) {
  EXPECT_EQ(*ParseLogLevel("debug"), spdlog::level::debug);
  EXPECT_EQ(*ParseLogLevel("off"), spdlog::level::off);
  auto bad = ParseLogLevel("loud");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("trace, debug, info"), absl::string_view::npos);
}

}  // namespace
}  // namespace titan
