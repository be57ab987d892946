// Runs under `mpirun -np N` (N = 1, 2, 4): every rank runs every test, and each result is
// checked against values computed by hand from the rank numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/runtime/device_mesh.h"
#include "core/runtime/plugin_registry.h"
#include "tests/support/scrambled_device.h"
#include "titan/comm.h"

namespace titan {
namespace {

using testing_support::Scrambled;
using testing_support::ScrambledDevice;

constexpr int kTimeoutSeconds = 2;

// Every rank of one mpirun shares the launcher as parent, so they agree on this folder.
std::string TraceFolder() {
  return testing::TempDir() + "titan_mpi_trace_" + std::to_string(getppid());
}

// One plugin instance for the whole binary: MPI is initialised once per process.
CommPlugin& Mpi() {
  static PluginRegistry* registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})->release();
  static CommPlugin* plugin = [] {
    CommPlugin* comm = registry->Create<CommPlugin>("mpi")->release();
    std::map<std::string, ConfigView::Entry> entries = {
        {"init_timeout_seconds", {int64_t{kTimeoutSeconds}, "test"}},
        {"train_timeout_seconds", {int64_t{kTimeoutSeconds}, "test"}},
        {"trace_buf_size", {int64_t{8}, "test"}},
        {"trace_folder", {TraceFolder(), "test"}}};
    EXPECT_TRUE(comm->Configure(ConfigView("comm", entries)).ok());
    return comm;
  }();
  return *plugin;
}

std::unique_ptr<Communicator> World() { return std::move(Mpi().ConnectWorld({})).value(); }

TensorView View(std::vector<float>& v) { return FlatF32(v.data(), static_cast<int64_t>(v.size())); }
template <typename T>
TensorView View(std::vector<T>& v, DType dtype) {
  return TensorView{v.data(), dtype, Device{}, {static_cast<int64_t>(v.size())}, {}};
}

uint16_t ToBf16(float f) {  // round to nearest even, independent of the plugin's code
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t lower = bits & 0xffffu, upper = bits >> 16;
  if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) ++upper;
  return static_cast<uint16_t>(upper);
}
float FromBf16(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(MpiCommTest, AllReduceF32EveryOp) {
  auto world = World();
  int n = world->size(), r = world->rank();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    std::vector<float> v = {float(r + 1), float(10 * r)};
    ASSERT_TRUE(world->AllReduce(View(v), op).ok());
    float sum0 = n * (n + 1) / 2.0f, sum1 = 10.0f * n * (n - 1) / 2;
    std::vector<float> expected = {sum0, sum1};
    if (op == ReduceOp::kAvg) expected = {sum0 / n, sum1 / n};
    if (op == ReduceOp::kMax) expected = {float(n), 10.0f * (n - 1)};
    if (op == ReduceOp::kMin) expected = {1.0f, 0.0f};
    EXPECT_EQ(v, expected) << "op " << static_cast<int>(op);
  }
}

TEST(MpiCommTest, AllReduceIntegers) {
  auto world = World();
  int n = world->size(), r = world->rank();
  std::vector<int32_t> i32 = {r, -r};
  ASSERT_TRUE(world->AllReduce(View(i32, DType::kI32), ReduceOp::kMax).ok());
  EXPECT_EQ(i32, (std::vector<int32_t>{n - 1, 0}));
  std::vector<int64_t> i64 = {int64_t{1} << 40, r};
  ASSERT_TRUE(world->AllReduce(View(i64, DType::kI64), ReduceOp::kSum).ok());
  EXPECT_EQ(i64, (std::vector<int64_t>{n * (int64_t{1} << 40), n * (n - 1) / 2}));
  absl::Status avg = world->AllReduce(View(i64, DType::kI64), ReduceOp::kAvg);
  EXPECT_EQ(avg.code(), absl::StatusCode::kInvalidArgument);
}

TEST(MpiCommTest, Bf16IsReducedInF32) {
  auto world = World();
  int n = world->size(), r = world->rank();
  // 1 + 2^-8 + ... : summed in bf16 each 2^-8 rounds away; summed in f32 they add up.
  std::vector<uint16_t> v = {ToBf16(r == 0 ? 1.0f : 0.00390625f), ToBf16(0.5f * (r + 1))};
  ASSERT_TRUE(world->AllReduce(View(v, DType::kBF16), ReduceOp::kSum).ok());
  EXPECT_EQ(v[0], ToBf16(1.0f + 0.00390625f * (n - 1)));
  EXPECT_EQ(FromBf16(v[1]), 0.25f * n * (n + 1));
}

TEST(MpiCommTest, ReduceScatterF32AndBf16) {
  auto world = World();
  int n = world->size(), r = world->rank();
  std::vector<float> in(2 * n), out(2);
  for (int i = 0; i < 2 * n; ++i) in[i] = float(100 * r + i);
  ASSERT_TRUE(world->ReduceScatter(View(in), View(out), ReduceOp::kSum).ok());
  float ranks = 100.0f * n * (n - 1) / 2;
  EXPECT_EQ(out, (std::vector<float>{ranks + n * float(2 * r), ranks + n * float(2 * r + 1)}));

  std::vector<uint16_t> in16(n), out16(1);
  for (int i = 0; i < n; ++i) in16[i] = ToBf16(float(i + r));
  ASSERT_TRUE(
      world->ReduceScatter(View(in16, DType::kBF16), View(out16, DType::kBF16), ReduceOp::kAvg)
          .ok());
  EXPECT_EQ(FromBf16(out16[0]), float(r) + (n - 1) / 2.0f);
}

TEST(MpiCommTest, AllGatherOutOfPlaceAndInPlace) {
  auto world = World();
  int n = world->size(), r = world->rank();
  std::vector<int32_t> in = {r, 7 * r}, out(2 * n, -1), expected;
  for (int i = 0; i < n; ++i) expected.insert(expected.end(), {i, 7 * i});
  ASSERT_TRUE(world->AllGather(View(in, DType::kI32), View(out, DType::kI32)).ok());
  EXPECT_EQ(out, expected);

  std::vector<int32_t> shared(2 * n, -1);
  shared[2 * r] = r;
  shared[2 * r + 1] = 7 * r;
  TensorView chunk{shared.data() + 2 * r, DType::kI32, Device{}, {2}, {}};
  ASSERT_TRUE(world->AllGather(chunk, View(shared, DType::kI32)).ok());
  EXPECT_EQ(shared, expected);

  std::vector<int32_t> wrong(2 * n + 1);
  absl::Status status = world->AllGather(View(in, DType::kI32), View(wrong, DType::kI32));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(MpiCommTest, BroadcastFromLastRank) {
  auto world = World();
  int n = world->size(), r = world->rank();
  std::vector<float> v = {float(r), float(r) + 0.5f};
  ASSERT_TRUE(world->Broadcast(View(v), n - 1).ok());
  EXPECT_EQ(v, (std::vector<float>{float(n - 1), n - 0.5f}));
  EXPECT_EQ(world->Broadcast(View(v), n).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MpiCommTest, SendRecvBetweenPairs) {
  auto world = World();
  int r = world->rank();
  if (world->size() == 1) {
    std::vector<float> v(1);
    EXPECT_EQ(world->Send(View(v), 0, 0).code(), absl::StatusCode::kInvalidArgument);
    return;
  }
  int peer = r ^ 1;  // 0<->1, 2<->3; even sends first so the pair never waits on itself
  std::vector<float> mine = {float(r), 3.0f}, theirs(2);
  if (r % 2 == 0) {
    ASSERT_TRUE(world->Send(View(mine), peer, 5).ok());
    ASSERT_TRUE(world->Recv(View(theirs), peer, 5).ok());
  } else {
    ASSERT_TRUE(world->Recv(View(theirs), peer, 5).ok());
    ASSERT_TRUE(world->Send(View(mine), peer, 5).ok());
  }
  EXPECT_EQ(theirs, (std::vector<float>{float(peer), 3.0f}));
  EXPECT_TRUE(world->Barrier().ok());
}

// Every rank sends to both neighbours before it receives from them, in one exchange. The
// messages (4 MB) are past MPI's eager limit, so a send completes only once its receive is
// posted: sends and receives issued one blocking call at a time would wait on each other round
// the ring until the timeout.
TEST(MpiCommTest, GroupedExchangeWithBothNeighboursCompletesTogether) {
  auto world = World();
  const int n = world->size(), r = world->rank();
  if (n == 1) {
    auto empty = world->Exchange({});
    ASSERT_TRUE(empty.ok()) << empty.status();
    EXPECT_TRUE((*empty)->Wait().ok());
    return;
  }
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  constexpr size_t kFloats = size_t{1} << 20;
  std::vector<float> to_right(kFloats, float(r) + 0.25f), to_left(kFloats, float(r) + 0.5f);
  std::vector<float> from_left(kFloats), from_right(kFloats);
  using Kind = PeerMessage::Kind;
  const std::vector<PeerMessage> messages = {{Kind::kSend, View(to_right), right, 1},
                                             {Kind::kSend, View(to_left), left, 2},
                                             {Kind::kRecv, View(from_left), left, 1},
                                             {Kind::kRecv, View(from_right), right, 2}};
  auto sends = world->Exchange(messages);
  ASSERT_TRUE(sends.ok()) << sends.status();
  // The receives are in when Exchange returns; the sends once their transfer is waited for.
  EXPECT_EQ(from_left, std::vector<float>(kFloats, float(left) + 0.25f));
  EXPECT_EQ(from_right, std::vector<float>(kFloats, float(right) + 0.5f));
  EXPECT_TRUE((*sends)->Wait().ok());
  EXPECT_TRUE(world->Barrier().ok());
}

// Rank r sends rank j (r + 1) x (j + 1) values r * 100 + j + 0.5, so every count differs and
// each value names its sender and receiver.
void CheckAllToAll(Communicator& comm, Communicator& caller) {
  const int n = comm.size(), r = comm.rank();
  std::vector<int64_t> send_counts, recv_counts;
  std::vector<float> input, expected;
  for (int j = 0; j < n; ++j) {
    send_counts.push_back(int64_t{r + 1} * (j + 1));
    recv_counts.push_back(int64_t{j + 1} * (r + 1));
    for (int i = 0; i < (r + 1) * (j + 1); ++i) input.push_back(float(r * 100 + j) + 0.5f);
    for (int i = 0; i < (j + 1) * (r + 1); ++i) expected.push_back(float(j * 100 + r) + 0.5f);
  }
  std::vector<float> output(expected.size() + 3, -1.0f);  // room to spare, left alone
  ASSERT_TRUE(caller.AllToAll(View(input), send_counts, View(output), recv_counts).ok());
  expected.resize(output.size(), -1.0f);
  EXPECT_EQ(output, expected);
}

TEST(MpiCommTest, AllToAllWithUnevenCounts) {
  auto world = World();
  CheckAllToAll(*world, *world);
}

// Communicator's own AllToAll (one Exchange and a host copy), which communicators without a
// native one inherit, against the same expectations.
TEST(MpiCommTest, TheDefaultAllToAllThroughExchange) {
  auto world = World();
  struct Inherited : Communicator {
    explicit Inherited(Communicator& c) : c(c) {}
    int rank() const override { return c.rank(); }
    int size() const override { return c.size(); }
    absl::Status AllReduce(TensorView b, ReduceOp op) override { return c.AllReduce(b, op); }
    absl::Status ReduceScatter(const TensorView& i, TensorView o, ReduceOp op) override {
      return c.ReduceScatter(i, o, op);
    }
    absl::Status AllGather(const TensorView& i, TensorView o) override { return c.AllGather(i, o); }
    absl::Status Broadcast(TensorView b, int root) override { return c.Broadcast(b, root); }
    absl::Status Send(const TensorView& b, int p, int t) override { return c.Send(b, p, t); }
    absl::Status Recv(TensorView b, int p, int t) override { return c.Recv(b, p, t); }
    absl::Status Barrier() override { return c.Barrier(); }
    absl::StatusOr<std::unique_ptr<Transfer>> Exchange(std::span<const PeerMessage> m) override {
      return c.Exchange(m);
    }
    absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
      return c.Split(color, key);
    }
    Communicator& c;
  } inherited(*world);
  CheckAllToAll(*world, inherited);
}

TEST(MpiCommTest, AllToAllCountsBeyondTheBufferAreRefused) {
  auto world = World();
  std::vector<float> input(1), output(1);
  const std::vector<int64_t> counts(world->size(), 2);
  const absl::Status refused = world->AllToAll(View(input), counts, View(output), counts);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("exceed"), std::string::npos) << refused;
}

TEST(MpiCommTest, AnExchangeWithItselfIsRefusedNamingThePeer) {
  auto world = World();
  std::vector<float> v(1);
  const PeerMessage to_self{PeerMessage::Kind::kSend, View(v), world->rank(), 0};
  auto refused = world->Exchange({&to_self, 1});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("is not a peer of rank"), std::string::npos)
      << refused.status();
}

// Device buffers go through host copies made by the device's own copies: the scrambled
// device's bytes are wrong unless unscrambled, so a communicator that read them in place, or
// wrote results without the device's copy, would fail these.
std::unique_ptr<Communicator> DeviceWorld(ScrambledDevice& device) {
  JoinOptions options;
  options.device = &device;
  return std::move(Mpi().ConnectWorld(options)).value();
}
TensorView OnDevice(TensorView view) {
  view.device = Device{DeviceType::kCuda, 0};
  return view;
}

TEST(MpiCommTest, DeviceBuffersAreStagedThroughTheDevicesCopies) {
  ScrambledDevice device;
  auto world = DeviceWorld(device);
  int n = world->size(), r = world->rank();
  std::vector<float> v = Scrambled(std::vector<float>{float(r + 1), -2.0f});
  ASSERT_TRUE(world->AllReduce(OnDevice(View(v)), ReduceOp::kSum).ok());
  EXPECT_EQ(Scrambled(v), (std::vector<float>{n * (n + 1) / 2.0f, -2.0f * n}));

  std::vector<float> in(2 * n), out(2);
  for (int i = 0; i < 2 * n; ++i) in[i] = float(100 * r + i);
  in = Scrambled(in);
  ASSERT_TRUE(world->ReduceScatter(OnDevice(View(in)), OnDevice(View(out)), ReduceOp::kAvg).ok());
  float ranks = 100.0f * (n - 1) / 2;
  EXPECT_EQ(Scrambled(out), (std::vector<float>{ranks + float(2 * r), ranks + float(2 * r + 1)}));

  // In place, as fsdp gathers: this rank's chunk is a slice of the output.
  std::vector<int32_t> gathered(2 * n, 0), expected;
  for (int i = 0; i < n; ++i) expected.insert(expected.end(), {i, -i});
  std::vector<int32_t> mine = Scrambled(std::vector<int32_t>{r, -r});
  std::copy(mine.begin(), mine.end(), gathered.begin() + 2 * r);
  TensorView chunk = OnDevice(View(gathered, DType::kI32));
  chunk.data = gathered.data() + 2 * r;
  chunk.shape = {2};
  ASSERT_TRUE(world->AllGather(chunk, OnDevice(View(gathered, DType::kI32))).ok());
  EXPECT_EQ(Scrambled(gathered), expected);

  std::vector<float> b = Scrambled(std::vector<float>{float(r), 0.25f});
  ASSERT_TRUE(world->Broadcast(OnDevice(View(b)), n - 1).ok());
  EXPECT_EQ(Scrambled(b), (std::vector<float>{float(n - 1), 0.25f}));
  EXPECT_GT(device.scrambled_compute().copies, 0);

  // Host buffers beside it go straight through: no copy, no staging memory.
  const int copies = device.scrambled_compute().copies, blocks = device.host_allocations;
  std::vector<float> host = {1.0f};
  ASSERT_TRUE(world->AllReduce(View(host), ReduceOp::kSum).ok());
  EXPECT_EQ(host[0], float(n));
  EXPECT_EQ(device.scrambled_compute().copies, copies);
  EXPECT_EQ(device.host_allocations, blocks);
}

TEST(MpiCommTest, DeviceSendRecvBlockingAndStarted) {
  ScrambledDevice device;
  auto world = DeviceWorld(device);
  int r = world->rank();
  if (world->size() == 1) return;
  int peer = r ^ 1;
  std::vector<float> mine = Scrambled(std::vector<float>{float(r), 3.0f}), theirs(2);
  if (r % 2 == 0) {
    ASSERT_TRUE(world->Send(OnDevice(View(mine)), peer, 6).ok());
    ASSERT_TRUE(world->Recv(OnDevice(View(theirs)), peer, 6).ok());
  } else {
    ASSERT_TRUE(world->Recv(OnDevice(View(theirs)), peer, 6).ok());
    ASSERT_TRUE(world->Send(OnDevice(View(mine)), peer, 6).ok());
  }
  EXPECT_EQ(Scrambled(theirs), (std::vector<float>{float(peer), 3.0f}));

  // Both started before either is waited for: the receive is copied back on Wait.
  std::vector<float> received(2, 0.0f);
  auto send = world->StartSend(OnDevice(View(mine)), peer, 7);
  auto recv = world->StartRecv(OnDevice(View(received)), peer, 7);
  ASSERT_TRUE(send.ok() && recv.ok());
  ASSERT_TRUE((*recv)->Wait().ok());
  ASSERT_TRUE((*send)->Wait().ok());
  EXPECT_EQ(Scrambled(received), (std::vector<float>{float(peer), 3.0f}));
  EXPECT_TRUE(world->Barrier().ok());
}

TEST(MpiCommTest, DeviceBuffersWithoutADeviceAreRefused) {
  auto world = World();
  std::vector<float> v(1);
  absl::Status refused = world->AllReduce(OnDevice(View(v)), ReduceOp::kSum);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("was given no device"), std::string::npos) << refused;
}

TEST(MpiCommTest, SplitByParityOrderedByKey) {
  auto world = World();
  int n = world->size(), r = world->rank();
  auto half = world->Split(r % 2, -r);  // descending key: the highest rank comes first
  ASSERT_TRUE(half.ok()) << half.status();
  int members = (n + 1 - r % 2) / 2;
  EXPECT_EQ((*half)->size(), members);
  std::vector<int32_t> sum = {r};
  ASSERT_TRUE((*half)->AllReduce(View(sum, DType::kI32), ReduceOp::kSum).ok());
  int expected = 0, position = 0;
  for (int i = r % 2; i < n; i += 2) {
    expected += i;
    if (i > r) ++position;
  }
  EXPECT_EQ(sum[0], expected);
  EXPECT_EQ((*half)->rank(), position);
}

TEST(MpiCommTest, MeshGroupsHoldTheRanksDifferingAlongOneDim) {
  auto world = World();
  int n = world->size(), r = world->rank();
  MeshShape shape;  // 2x2 (dp_replicate x dp_shard) at 4 ranks, else dp_shard = n
  shape.degrees = {1, n == 4 ? 2 : 1, n == 4 ? 2 : n, 1, 1};
  auto mesh = BuildDeviceMesh(std::move(world), shape);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  DeviceMesh& m = **mesh;
  int shard = shape.degree(MeshDim::kDpShard);
  EXPECT_EQ(m.coordinate(MeshDim::kDpReplicate), r / shard);
  EXPECT_EQ(m.coordinate(MeshDim::kDpShard), r % shard);
  EXPECT_EQ(m.coordinate(MeshDim::kPp), 0);
  EXPECT_EQ(m.group(MeshDim::kPp).size(), 1);
  EXPECT_EQ(m.group(MeshDim::kTp).size(), 1);
  EXPECT_EQ(m.group(MeshDim::kDpShard).rank(), r % shard);
  EXPECT_EQ(m.group(MeshDim::kDpReplicate).rank(), r / shard);

  // The world ranks in each group, gathered in the group's order.
  for (MeshDim dim : {MeshDim::kDpShard, MeshDim::kDpReplicate}) {
    Communicator& group = m.group(dim);
    std::vector<int32_t> me = {r}, all(group.size());
    ASSERT_TRUE(group.AllGather(View(me, DType::kI32), View(all, DType::kI32)).ok());
    std::vector<int32_t> expected;
    for (int i = 0; i < group.size(); ++i) {
      expected.push_back(dim == MeshDim::kDpShard ? r - r % shard + i : r % shard + i * shard);
    }
    EXPECT_EQ(all, expected) << MeshDimName(dim);
  }
}

// Expert parallelism borrows dp_shard's ranks: runs of ep consecutive ones (group(kEp)), and the
// ranks at the same place in every run (expert_shard_group).
TEST(MpiCommTest, ExpertGroupsSplitDpShardIntoRuns) {
  auto world = World();
  const int n = world->size(), r = world->rank();
  MeshShape shape;
  shape.degrees = {1, 1, n, 1, 1};
  shape.expert_degree = n >= 2 ? 2 : 1;
  auto mesh = BuildDeviceMesh(std::move(world), shape);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  DeviceMesh& m = **mesh;
  const int ep = shape.expert_degree;
  EXPECT_EQ(m.group(MeshDim::kEp).size(), ep);
  EXPECT_EQ(m.coordinate(MeshDim::kEp), r % ep);
  EXPECT_EQ(m.expert_shard_group().size(), n / ep);
  EXPECT_EQ(m.expert_shard_group().rank(), r / ep);
  std::vector<int32_t> me = {r}, run(ep);
  ASSERT_TRUE(m.group(MeshDim::kEp).AllGather(View(me, DType::kI32), View(run, DType::kI32)).ok());
  for (int i = 0; i < ep; ++i) EXPECT_EQ(run[i], r - r % ep + i);
}

TEST(MpiCommTest, FlightRecordOnRequest) {
  auto world = World();
  ASSERT_TRUE(world->Barrier().ok());
  auto path = world->DumpFlightRecord("asked by the test");
  ASSERT_TRUE(path.ok()) << path.status();
  nlohmann::json record = nlohmann::json::parse(std::ifstream(*path));
  EXPECT_EQ(record["rank"], world->rank());
  EXPECT_EQ(record["reason"], "asked by the test");
  ASSERT_FALSE(record["collectives"].empty());
  EXPECT_LE(record["collectives"].size(), 8u);  // trace_buf_size
  const nlohmann::json& last = record["collectives"].back();
  EXPECT_EQ(last["op"], "barrier");
  EXPECT_EQ(last["state"], "completed");
  EXPECT_EQ(last["peers"].size(), static_cast<size_t>(world->size()));
  EXPECT_LE(last["start_us"].get<int64_t>(), last["end_us"].get<int64_t>());
}

// Last: the world it breaks is not used again. The last rank arrives after the timeout;
// every other rank must give up within it, naming itself, the collective and its number.
TEST(MpiCommTest, ZzStalledRankTimesOutEverySurvivor) {
  auto world = World();
  int n = world->size(), r = world->rank();
  if (n == 1) GTEST_SKIP() << "needs a peer to wait for";
  ASSERT_TRUE(world->Barrier().ok());  // #1
  // Never freed: MPI may complete the abandoned all-reduce into it as late as MPI_Finalize,
  // which runs after static destructors would have.
  std::vector<float>& v = *new std::vector<float>{1.0f};
  if (r == n - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500 * kTimeoutSeconds));
    (void)world->AllReduce(View(v), ReduceOp::kSum);  // lets the others' requests finish
    return;
  }
  auto start = std::chrono::steady_clock::now();
  absl::Status status = world->AllReduce(View(v), ReduceOp::kSum);  // #2
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_LT(waited, 2.0 * kTimeoutSeconds);  // loose: the machine may be busy
  std::string message(status.message());
  EXPECT_NE(message.find("rank " + std::to_string(r) + ": all-reduce #2 on world"),
            std::string::npos)
      << message;
  std::string file = TraceFolder() + "/flight_recorder_rank" + std::to_string(r) + ".json";
  EXPECT_NE(message.find(file), std::string::npos) << message;
  nlohmann::json record = nlohmann::json::parse(std::ifstream(file));
  const nlohmann::json& last = record["collectives"].back();
  EXPECT_EQ(last["op"], "all-reduce");
  EXPECT_EQ(last["sequence"], 2);
  EXPECT_EQ(last["state"], "timed out");
  // A broken communicator refuses further work at once instead of waiting again.
  EXPECT_EQ(world->Barrier().code(), absl::StatusCode::kAborted);
}

// Run alone in its own process (the filter *SlowStart*): a rank that starts later than the train
// timeout but within the init timeout is waited for until UseTrainTimeout; after it, a rank as
// late makes the others give up within the train timeout.
TEST(MpiCommTest, SlowStartWaitsTheInitTimeoutUntilTraining) {
  constexpr int kInit = 120, kTrain = 1, kLateMs = 4000;  // late: well past kTrain, within kInit
  static PluginRegistry* registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR})->release();
  std::map<std::string, ConfigView::Entry> entries = {
      {"init_timeout_seconds", {int64_t{kInit}, "test"}},
      {"train_timeout_seconds", {int64_t{kTrain}, "test"}},
      {"trace_folder", {TraceFolder(), "test"}}};
  CommPlugin* plugin =
      registry->CreateConfigured<CommPlugin>("mpi", ConfigView("comm", entries))->release();
  std::unique_ptr<Communicator> world = std::move(plugin->ConnectWorld({})).value();
  const int n = world->size(), r = world->rank();
  if (n == 1) GTEST_SKIP() << "needs a late peer";
  std::vector<float>& v = *new std::vector<float>{1.0f};  // never freed: see ZzStalledRank
  if (r == n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(kLateMs));
  absl::Status start_up = world->AllReduce(View(v), ReduceOp::kSum);
  ASSERT_TRUE(start_up.ok()) << start_up;
  EXPECT_EQ(v[0], static_cast<float>(n));
  world->UseTrainTimeout();
  if (r == n - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kLateMs));
    (void)world->AllReduce(View(v), ReduceOp::kSum);  // lets the others' requests finish
    return;
  }
  absl::Status training = world->AllReduce(View(v), ReduceOp::kSum);
  EXPECT_EQ(training.code(), absl::StatusCode::kDeadlineExceeded) << training;
  EXPECT_NE(training.message().find("did not complete within 1s"), absl::string_view::npos)
      << training;
}

// Run alone in its own process (the filter *LateRankJoin*): the last rank starts after the
// init timeout, and every other rank must give up joining within it instead of waiting.
TEST(MpiCommTest, LateRankJoinTimesOut) {
  const int n =
      std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE") ? std::getenv("OMPI_COMM_WORLD_SIZE") : "1");
  const int r =
      std::atoi(std::getenv("OMPI_COMM_WORLD_RANK") ? std::getenv("OMPI_COMM_WORLD_RANK") : "0");
  if (n == 1) GTEST_SKIP() << "needs a late peer";
  if (r == n - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500 * kTimeoutSeconds));
    return;  // never joins: the launcher ends it once the others have given up
  }
  absl::StatusOr<std::unique_ptr<Communicator>> world = Mpi().ConnectWorld({});
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), absl::StatusCode::kDeadlineExceeded) << world.status();
  EXPECT_NE(world.status().message().find("did not complete within 2s"), std::string::npos)
      << world.status();
}

}  // namespace
}  // namespace titan
