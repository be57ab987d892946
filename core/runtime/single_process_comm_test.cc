#include "core/runtime/single_process_comm.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace titan {
namespace {

TEST(SingleProcessComm, CollectivesOnOneRankAreIdentities) {
  SingleProcessComm plugin;
  auto world = plugin.ConnectWorld({});
  ASSERT_TRUE(world.ok());
  Communicator& comm = **world;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);

  std::vector<float> input = {1, 2, 3, 4};
  std::vector<float> output(4, 0.0f);
  ASSERT_TRUE(comm.AllReduce(FlatF32(input.data(), 4), ReduceOp::kSum).ok());
  EXPECT_EQ(input, (std::vector<float>{1, 2, 3, 4}));
  ASSERT_TRUE(
      comm.ReduceScatter(FlatF32(input.data(), 4), FlatF32(output.data(), 4), ReduceOp::kAvg).ok());
  EXPECT_EQ(output, input);
  std::fill(output.begin(), output.end(), 0.0f);
  ASSERT_TRUE(comm.AllGather(FlatF32(input.data(), 4), FlatF32(output.data(), 4)).ok());
  EXPECT_EQ(output, input);
  EXPECT_TRUE(comm.Broadcast(FlatF32(input.data(), 4), 0).ok());
  EXPECT_TRUE(comm.Barrier().ok());
  auto sub = comm.Split(0, 0);
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ((*sub)->size(), 1);
}

TEST(SingleProcessComm, MisuseIsAnError) {
  SingleProcessCommunicator comm;
  std::vector<float> a(4), b(3);
  auto status = comm.AllGather(FlatF32(a.data(), 4), FlatF32(b.data(), 3));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("must match"), absl::string_view::npos);
  EXPECT_FALSE(comm.Broadcast(FlatF32(a.data(), 4), 1).ok());
  EXPECT_EQ(comm.Send(FlatF32(a.data(), 4), 1, 0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(comm.Recv(FlatF32(a.data(), 4), 1, 0).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SingleProcessComm, OnlyTheEmptyExchangeSucceeds) {
  SingleProcessCommunicator comm;
  auto nothing = comm.Exchange({});
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_TRUE((*nothing)->Wait().ok());
  std::vector<float> a(4);
  const PeerMessage send{PeerMessage::Kind::kSend, FlatF32(a.data(), 4), 1, 0};
  auto refused = comm.Exchange({&send, 1});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(
                "exchange with rank 1 (1 messages): a group of one rank has no peer"),
            absl::string_view::npos)
      << refused.status();
}

TEST(SingleProcessComm, WritesAFlightRecordWithNoCollectivesUnderTheDumpFolder) {
  const std::filesystem::path dump =
      std::filesystem::path(::testing::TempDir()) / "single_process_flight_record";
  std::filesystem::remove_all(dump);
  SingleProcessComm plugin;
  auto world = plugin.ConnectWorld({.dump_folder = dump.string()});
  ASSERT_TRUE(world.ok()) << world.status();
  auto written = (*world)->DumpFlightRecord("asked by the test");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, (dump / "flight_recorder" / "flight_recorder_rank0.json").string());
  const nlohmann::json record = nlohmann::json::parse(std::ifstream(*written));
  EXPECT_EQ(record.at("rank"), 0);
  EXPECT_EQ(record.at("reason"), "asked by the test");
  EXPECT_EQ(record.at("collectives"), nlohmann::json::array());
  // A communicator made without a folder keeps no record, and says so.
  EXPECT_EQ(SingleProcessCommunicator().DumpFlightRecord("x").status().code(),
            absl::StatusCode::kUnimplemented);
  std::filesystem::remove_all(dump);
}

}  // namespace
}  // namespace titan
