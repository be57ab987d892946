#include "core/train/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/cpu/cpu_device.h"
#include "tests/support/scrambled_device.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

StepMetrics Row(int64_t step, double mfu) {
  StepMetrics m;
  m.step = step, m.loss = 1, m.tflops = 0.05, m.mfu = mfu;
  return m;
}

class MetricsLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / absl::StrCat("titan_metrics_", getpid());
    fs::create_directories(dir_);
    // What the log says goes to `said_` for the test to read.
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "test", std::make_shared<spdlog::sinks::ostream_sink_mt>(said_)));
  }
  void TearDown() override {
    spdlog::set_default_logger(previous_);
    fs::remove_all(dir_);
  }
  fs::path dir_;
  std::ostringstream said_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST(MetricsRowsUpTo, KeepsTheHistoryUpToTheStepAndDropsTheRest) {
  const std::string jsonl =
      "{\"step\": 1, \"loss\": 8.1}\n{\"step\": 10, \"loss\": 7.0}\n{\"step\": 10, "
      "\"eval_loss\": 7.2}\n{\"step\": 20, \"loss\": 6.0}\n{\"step\": 30, \"lo";
  MetricsHistory history = MetricsRowsUpTo(jsonl, 10);
  EXPECT_EQ(history.kept,
            "{\"step\": 1, \"loss\": 8.1}\n{\"step\": 10, \"loss\": 7.0}\n{\"step\": 10, "
            "\"eval_loss\": 7.2}\n");
  EXPECT_EQ(history.past, 1);                                   // step 20
  EXPECT_EQ(history.invalid_lines, (std::vector<int64_t>{5}));  // step 30's, cut short by a kill
  EXPECT_TRUE(history.has_step_row);
  history = MetricsRowsUpTo(jsonl, 0);
  EXPECT_EQ(history.kept, "");
  EXPECT_EQ(history.past, 4);
  EXPECT_FALSE(history.has_step_row);
}

// Damage anywhere (random bytes, a row cut short, a wrong type) costs only the lines it hit,
// each named by its number; the step's own eval row is not its training row.
TEST(MetricsRowsUpTo, KeepsEveryValidRowAroundDamageAndNamesTheDamagedLines) {
  const std::string jsonl = std::string("{\"step\": 1, \"loss\": 8.1}\n") + "\x93\xff\x01junk\n" +
                            "{\"step\": 2, \"loss\": 7.9}\n" + "{\"step\": \"3\", \"loss\": 7}\n" +
                            "[1, 2]\n" + "{\"step\": 3, \"eval_loss\": 7.5}\n" +
                            "{\"step\": 3, \"lo\n" + "{\"step\": 4, \"loss\": 7.0}\n";
  const MetricsHistory history = MetricsRowsUpTo(jsonl, 3);
  EXPECT_EQ(history.kept,
            "{\"step\": 1, \"loss\": 8.1}\n{\"step\": 2, \"loss\": 7.9}\n{\"step\": 3, "
            "\"eval_loss\": 7.5}\n");
  EXPECT_EQ(history.invalid_lines, (std::vector<int64_t>{2, 4, 5, 7}));
  EXPECT_EQ(history.past, 1);
  EXPECT_FALSE(history.has_step_row);
  EXPECT_EQ(LineRanges(history.invalid_lines), "2, 4-5, 7");
}

TEST_F(MetricsLogTest, AResumedRunWarnsAboutDamageAndLogsTheCheckpointsLostRowAgain) {
  const std::string row_3 = "{\"step\": 3, \"loss\": 7.000000}";
  std::ofstream(dir_ / "metrics.jsonl") << "{\"step\": 1, \"loss\": 8.1}\n\x01\x02\n"
                                        << "{\"step\": 2, \"loss\": 7.9}\n{\"step\": 3, \"lo";
  {
    absl::StatusOr<MetricsLog> resumed =
        MetricsLog::Open(dir_.string(), {1.0, "test"}, 3, nullptr, true, row_3);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
  }
  EXPECT_EQ(ReadAll(dir_ / "metrics.jsonl"),
            "{\"step\": 1, \"loss\": 8.1}\n{\"step\": 2, \"loss\": 7.9}\n" + row_3 + "\n");
  EXPECT_THAT(said_.str(), HasSubstr((dir_ / "metrics.jsonl").string() +
                                     ": line(s) 2, 4 are no metrics row (a damaged file?)"));
  EXPECT_THAT(said_.str(), HasSubstr("0 row(s) past it dropped; step 3's row was lost and is "
                                     "logged again from the checkpoint"));
  // With the row there, the checkpoint's copy is not added again.
  {
    absl::StatusOr<MetricsLog> again =
        MetricsLog::Open(dir_.string(), {1.0, "test"}, 3, nullptr, true, row_3);
    ASSERT_TRUE(again.ok()) << again.status();
  }
  EXPECT_EQ(ReadAll(dir_ / "metrics.jsonl"),
            "{\"step\": 1, \"loss\": 8.1}\n{\"step\": 2, \"loss\": 7.9}\n" + row_3 + "\n");
}

TEST_F(MetricsLogTest, TheLastTrainingRowIsKeptForTheCheckpoint) {
  absl::StatusOr<MetricsLog> log = MetricsLog::Open(dir_.string(), {1.0, "test"});
  ASSERT_TRUE(log.ok()) << log.status();
  log->Log(Row(4, 5));
  log->LogEval(4, 7.5);
  const std::string written = ReadAll(dir_ / "metrics.jsonl");
  EXPECT_EQ(log->TrainingRow(4) + "\n", written.substr(0, written.find('\n') + 1));
  EXPECT_EQ(log->TrainingRow(5), "");
}

TEST_F(MetricsLogTest, AResumedRunKeepsTheRowsUpToItsCheckpoint) {
  {
    absl::StatusOr<MetricsLog> first = MetricsLog::Open(dir_.string(), {1.0, "test"});
    ASSERT_TRUE(first.ok()) << first.status();
    for (int64_t step : {1, 5, 10}) first->Log(Row(step, 5));
    first->LogEval(10, 7.5);
  }
  const std::string before = ReadAll(dir_ / "metrics.jsonl");
  const std::string up_to_5 = before.substr(0, before.find("{\"step\": 10"));
  {
    absl::StatusOr<MetricsLog> resumed = MetricsLog::Open(dir_.string(), {1.0, "test"}, 5);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(ReadAll(dir_ / "metrics.jsonl"), up_to_5);
    resumed->Log(Row(10, 6));
  }
  const std::string after = ReadAll(dir_ / "metrics.jsonl");
  EXPECT_EQ(after.rfind(up_to_5, 0), 0u) << after;
  EXPECT_EQ(after.substr(up_to_5.size()).rfind("{\"step\": 10, ", 0), 0u) << after;
  EXPECT_THAT(after, HasSubstr("\"mfu\": 6.000"));
  EXPECT_FALSE(fs::exists(dir_ / "metrics.jsonl.tmp"));
  EXPECT_THAT(said_.str(), HasSubstr("resumed after step 5"));
  // A fresh run starts the file anew.
  ASSERT_TRUE(MetricsLog::Open(dir_.string(), {1.0, "test"}).ok());
  EXPECT_EQ(ReadAll(dir_ / "metrics.jsonl"), "");
  // A folder in its place is named, not thrown from a stream.
  fs::remove(dir_ / "metrics.jsonl");
  fs::create_directories(dir_ / "metrics.jsonl");
  EXPECT_THAT(MetricsLog::Open(dir_.string(), {1.0, "test"}, 5).status().message(),
              HasSubstr("metrics.jsonl\" is a folder; expected the metrics file"));
}

// The probe of a busy machine said 0.03 TFLOP/s; the run then achieved 0.05.
TEST_F(MetricsLogTest, AnMfuAbove100PercentIsNotAFactButABadPeak) {
  const PeakFlops peak = ChoosePeak(0, std::nullopt, [] { return 0.03; });
  const Throughput rate = RankThroughput(5000, 1.0, 1, 1e7, peak.tflops);
  ASSERT_GT(rate.mfu, 100);
  absl::StatusOr<MetricsLog> log = MetricsLog::Open(dir_.string(), peak);
  ASSERT_TRUE(log.ok()) << log.status();
  StepMetrics m = Row(1, rate.mfu);
  m.tflops = rate.tflops;
  log->Log(m);
  log->Log(Row(2, rate.mfu));
  log->Log(Row(3, 40));
  const std::string said = said_.str();
  EXPECT_THAT(said, HasSubstr("0.0500 TFLOP/s achieved is above the peak of 0.0300 TFLOP/s "
                              "(measured: the best of"));
  EXPECT_EQ(said.find("is above the peak"), said.rfind("is above the peak")) << "warned once";
  EXPECT_EQ(said.find("mfu n/a (peak too low)"), said.find("mfu n/a (peak too low)  mem"));
  EXPECT_NE(said.find("mfu n/a (peak too low)", said.find("mfu n/a") + 1), std::string::npos);
  EXPECT_THAT(said, HasSubstr("mfu 40.0%  mem"));
  const std::string jsonl = ReadAll(dir_ / "metrics.jsonl");
  EXPECT_THAT(jsonl, HasSubstr("{\"step\": 1, \"loss\": 1.000000, \"grad_norm\": 0.000000, "
                               "\"lr\": 0.000000e+00, \"tps\": 0.0, \"tflops\": 0.0500, "
                               "\"mfu\": null,"));
  EXPECT_THAT(jsonl, HasSubstr("\"mfu\": 40.000,"));
}

// An accelerator's peaks, from its device plugin; the CPU's, the process's resident peak.
class PeaksDevice : public testing_support::ScrambledDevice {
 public:
  absl::StatusOr<DeviceMemoryInfo> MemoryInfo() override {
    DeviceMemoryInfo info;
    info.peak_allocated_bytes = size_t{3} << 29;  // 1.5 GiB
    info.peak_reserved_bytes = size_t{2} << 30;   // 2 GiB
    return info;
  }
};

TEST_F(MetricsLogTest, DeviceMemoryIsTheDevicesAllocatedAndReservedPeaks) {
  PeaksDevice device;
  StepMetrics m = Row(1, 10);
  SetPeakMemory(device, m);
  EXPECT_TRUE(m.device_memory);
  EXPECT_DOUBLE_EQ(m.mem_gib, 1.5);
  EXPECT_DOUBLE_EQ(m.mem_reserved_gib, 2.0);
  absl::StatusOr<MetricsLog> log = MetricsLog::Open(dir_.string(), {1.0, "test"});
  ASSERT_TRUE(log.ok()) << log.status();
  log->Log(m);
  EXPECT_THAT(ReadAll(dir_ / "metrics.jsonl"),
              HasSubstr("\"mem_gib\": 1.5000, \"data_s\": 0.0000, \"mem_reserved_gib\": 2.0000}"));
  EXPECT_THAT(said_.str(), HasSubstr("mem 1.50GiB (reserved 2.00GiB)"));

  StepMetrics host = Row(2, 10);
  SetPeakMemory(CpuDevice::Host(), host);
  EXPECT_FALSE(host.device_memory);
  EXPECT_GT(host.mem_gib, 0.0);
  EXPECT_LE(host.mem_gib, PeakMemoryGib());  // the resident peak only grows
}

// Async tensor parallelism under profiling: the step's hidden and exposed communication, in the
// row and on the console; absent otherwise.
TEST_F(MetricsLogTest, AsyncTensorParallelCommunicationIsLoggedWhenProfiled) {
  absl::StatusOr<MetricsLog> log = MetricsLog::Open(dir_.string(), {1.0, "test"});
  ASSERT_TRUE(log.ok()) << log.status();
  log->Log(Row(1, 10));
  StepMetrics m = Row(2, 10);
  m.tp_overlap = true, m.tp_hidden_s = 0.0125, m.tp_exposed_s = 0.002;
  log->Log(m);
  const std::string rows = ReadAll(dir_ / "metrics.jsonl");
  EXPECT_THAT(rows, HasSubstr("\"tp_comm_hidden_s\": 0.012500, \"tp_comm_exposed_s\": 0.002000"));
  EXPECT_LT(rows.find('\n'), rows.find("tp_comm"));  // not in step 1's row
  EXPECT_THAT(said_.str(), HasSubstr("tp comm hidden 12.5ms exposed 2.0ms"));
}

// Two tp ranks work on the same tokens, each on half the model: each counts half the tokens.
TEST(RankThroughput, DividesTheTokensAmongTheRanksOfAReplica) {
  const Throughput one = RankThroughput(4096, 2.0, 1, 3e8, 10.0);
  EXPECT_DOUBLE_EQ(one.tps, 2048);
  EXPECT_DOUBLE_EQ(one.tflops, 2048 * 3e8 / 1e12);
  EXPECT_DOUBLE_EQ(one.mfu, 100 * 2048 * 3e8 / 1e12 / 10.0);
  const Throughput tp2 = RankThroughput(4096, 2.0, 2, 3e8, 10.0);
  EXPECT_DOUBLE_EQ(tp2.tps, 1024);
  EXPECT_DOUBLE_EQ(tp2.tflops, one.tflops / 2);
  EXPECT_DOUBLE_EQ(tp2.mfu, one.mfu / 2);
  EXPECT_DOUBLE_EQ(RankThroughput(4096, 2.0, 8, 3e8, 10.0).tps, 256);  // tp 4 x pp 2, say
}

TEST(FlopPerToken, CountsNonEmbeddingParametersAndCausalAttention) {
  const LlamaConfig debug;  // dim 256, 6 layers, 16 heads, vocab 2048, hidden 768
  // Per layer: wq, wk, wv, wo 4 x 256 x 256, w1, w2, w3 3 x 256 x 768, two norms of 256.
  const double per_layer = 4.0 * 256 * 256 + 3.0 * 256 * 768 + 2 * 256;
  const double non_embedding = 6 * per_layer + 2048.0 * 256 + 256;  // + output and final norm
  EXPECT_DOUBLE_EQ(FlopPerToken(debug, 256), 6 * non_embedding + 6.0 * 6 * 256 * 256);
  // Attention's share grows with the sequence; the parameters' does not.
  EXPECT_DOUBLE_EQ(FlopPerToken(debug, 512) - FlopPerToken(debug, 256), 6.0 * 6 * 256 * 256);
  // Tied, the one table is both the lookup and the output matmul: the count stays the same.
  LlamaConfig tied = debug;
  tied.tie_embeddings = true;
  EXPECT_DOUBLE_EQ(FlopPerToken(tied, 256), FlopPerToken(debug, 256));
}

}  // namespace
}  // namespace titan
