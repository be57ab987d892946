#include "core/runtime/plugin_registry.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "core/runtime/guarded_communicator.h"
#include "titan/optimizer.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

const fs::path kTestPlugins = TITAN_TEST_PLUGIN_DIR;

std::string DiscoveryError(const std::vector<fs::path>& dirs) {
  auto registry = PluginRegistry::Discover(dirs);
  EXPECT_FALSE(registry.ok());
  return registry.ok() ? "" : std::string(registry.status().message());
}

// Discovery of `dir` goes on past its bad file; asking for that plugin is the error.
std::string RejectionOf(const fs::path& dir, absl::string_view name) {
  auto registry = PluginRegistry::Discover({dir, kTestPlugins / "good"});
  EXPECT_TRUE(registry.ok()) << registry.status();
  if (!registry.ok()) return "";
  EXPECT_TRUE((*registry)->Find("optimizer", "testgood").ok());
  EXPECT_EQ((*registry)->rejected().size(), 1u);
  auto found = (*registry)->Find("optimizer", name);
  EXPECT_FALSE(found.ok());
  return found.ok() ? "" : std::string(found.status().message());
}

TEST(PluginRegistry, LoadsAWellFormedPluginAndCreatesIt) {
  auto registry = PluginRegistry::Discover({kTestPlugins / "good"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto info = (*registry)->Find("optimizer", "testgood");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((*info)->path, kTestPlugins / "good" / "titan_optimizer_testgood.so");
  EXPECT_STREQ((*info)->descriptor->version, "0.0.1");
  EXPECT_EQ((*info)->descriptor->abi_version, static_cast<uint32_t>(TITAN_ABI_VERSION));

  auto optimizer = (*registry)->Create<OptimizerPlugin>("testgood");
  ASSERT_TRUE(optimizer.ok());
  std::vector<float> params = {1.0f, 2.0f}, grads = {0.5f, -1.0f};
  std::vector<ParamSegment> segments = {{0, 2, true}};
  OptimizerStep step{
      FlatF32(params.data(), 2), FlatF32(grads.data(), 2), FlatF32(nullptr, 0), segments, 0.1, 1};
  ASSERT_TRUE((*optimizer)->Step(step).ok());
  EXPECT_FLOAT_EQ(params[0], 0.95f);
  EXPECT_FLOAT_EQ(params[1], 2.1f);
}

TEST(PluginRegistry, BuiltinsAreAlwaysThere) {
  auto registry = PluginRegistry::Discover({});
  ASSERT_TRUE(registry.ok());
  EXPECT_TRUE((*registry)->Find("device", "cpu").ok());
  EXPECT_TRUE((*registry)->Find("comm", "single").ok());
  EXPECT_EQ((*registry)->Find("device", "cpu").value()->location(), "<built-in>");
}

TEST(PluginRegistry, RefusesAnotherAbiNamingBothVersionsAndTheFile) {
  fs::path file = kTestPlugins / "bad_abi" / "titan_optimizer_badabi.so";
  auto abi = ReadPluginAbi(file);
  ASSERT_FALSE(abi.ok());
  std::string message(abi.status().message());
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  EXPECT_NE(message.find("built for titan plugin ABI 999"), std::string::npos) << message;
  EXPECT_NE(message.find("this titan uses ABI " + std::to_string(TITAN_ABI_VERSION)),
            std::string::npos)
      << message;
  EXPECT_EQ(RejectionOf(kTestPlugins / "bad_abi", "badabi"),
            "the optimizer plugin 'badabi' cannot be used: " + message);
}

TEST(PluginRegistry, RefusesANewerAbiSayingTitanIsOlderThanThePlugin) {
  auto abi = ReadPluginAbi(kTestPlugins / "bad_abi" / "titan_optimizer_badabi.so");
  ASSERT_FALSE(abi.ok());
  EXPECT_NE(abi.status().message().find(absl::StrCat(
                "this titan uses ABI ", TITAN_ABI_VERSION, " (titan ", TITAN_VERSION,
                "); the plugin is newer than this titan: install a titan whose plugin ABI is 999")),
            absl::string_view::npos)
      << abi.status();
}

TEST(PluginRegistry, RefusesAnOlderAbiAskingForARebuild) {
  fs::path file = kTestPlugins / "old_abi" / "titan_optimizer_oldabi.so";
  auto abi = ReadPluginAbi(file);
  ASSERT_FALSE(abi.ok());
  EXPECT_EQ(
      abi.status().message(),
      absl::StrCat(file.string(), ": plugin built for titan plugin ABI ", TITAN_ABI_VERSION - 1,
                   ", but this titan uses ABI ", TITAN_ABI_VERSION, " (titan ", TITAN_VERSION,
                   "); rebuild the plugin against the installed titan SDK "
                   "(find_package(TitanSDK))"));
}

TEST(PluginRegistry, RefusesAPluginBuiltAgainstAnotherKernelTableNamingBoth) {
  const fs::path file = kTestPlugins / "other_kernel_table" / "titan_device_othertable.so";
  auto registry = PluginRegistry::Discover({file.parent_path()});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto found = (*registry)->Find("device", "othertable");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().message(),
            absl::StrCat("the device plugin 'othertable' cannot be used: ", file.string(),
                         ": plugin built against another compute kernel table (fingerprint ",
                         kKernelTableFingerprint + 1, ", this titan's is ", kKernelTableFingerprint,
                         ", both at plugin ABI ", TITAN_ABI_VERSION,
                         "); rebuild the plugin against the installed titan SDK "
                         "(find_package(TitanSDK))"));
}

TEST(PluginRegistry, LoadsAPluginStrippedToItsDynamicSymbols) {
  fs::path file = kTestPlugins / "stripped" / "titan_optimizer_testgood.so";
  auto abi = ReadPluginAbi(file);
  ASSERT_TRUE(abi.ok()) << abi.status();
  EXPECT_EQ(*abi, static_cast<uint32_t>(TITAN_ABI_VERSION));
  auto registry = PluginRegistry::Discover({kTestPlugins / "stripped"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto info = (*registry)->Find("optimizer", "testgood");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ((*info)->path, file);
}

TEST(PluginRegistry, RefusesAFileThatIsNotALibrary) {
  std::string message = RejectionOf(kTestPlugins / "not_a_library", "text");
  EXPECT_NE(message.find("the optimizer plugin 'text' cannot be used: " +
                         (kTestPlugins / "not_a_library").string() +
                         "/titan_optimizer_text.so: not a titan plugin: not a shared library"),
            std::string::npos)
      << message;
}

TEST(PluginRegistry, RefusesALibraryWithoutTheEntryPoint) {
  std::string message = RejectionOf(kTestPlugins / "no_entry", "noentry");
  EXPECT_NE(message.find("titan_optimizer_noentry.so: not a titan plugin: no entry point"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("titan_plugin_abi_" + std::to_string(TITAN_ABI_VERSION)),
            std::string::npos);
}

TEST(PluginRegistry, RefusesTwoPluginsOfTheSameKindAndName) {
  std::string message = DiscoveryError({kTestPlugins / "good", kTestPlugins / "duplicate"});
  EXPECT_NE(
      message.find("two optimizer plugins are named 'testgood': " +
                   (kTestPlugins / "good" / "titan_optimizer_testgood.so").string() + " and " +
                   (kTestPlugins / "duplicate" / "titan_optimizer_testgood.so").string()),
      std::string::npos)
      << message;
}

TEST(PluginRegistry, SkipsEveryBadFileAndLoadsTheRest) {
  auto registry = PluginRegistry::Discover({kTestPlugins / "bad_abi", kTestPlugins / "no_entry",
                                            kTestPlugins / "not_a_library", kTestPlugins / "good"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  EXPECT_TRUE((*registry)->Find("optimizer", "testgood").ok());
  std::vector<std::string> rejected;
  for (const RejectedPlugin& r : (*registry)->rejected()) {
    rejected.push_back(r.path.filename().string());
    EXPECT_NE(r.reason.find(r.path.string()), std::string::npos) << r.reason;
  }
  EXPECT_EQ(rejected,
            (std::vector<std::string>{"titan_optimizer_badabi.so", "titan_optimizer_noentry.so",
                                      "titan_optimizer_text.so"}));
  EXPECT_NE((*registry)->rejected()[0].reason.find("ABI 999"), std::string::npos);
  EXPECT_NE((*registry)->rejected()[1].reason.find("no entry point"), std::string::npos);
}

TEST(PluginRegistry, RefusesAFileNamedForAnotherPlugin) {
  // titan_optimizer_notgood.so holds the plugin 'testgood'.
  const fs::path file = kTestPlugins / "misnamed" / "titan_optimizer_notgood.so";
  EXPECT_EQ(RejectionOf(kTestPlugins / "misnamed", "notgood"),
            "the optimizer plugin 'notgood' cannot be used: " + file.string() +
                ": the file's name says the optimizer plugin 'notgood', but it holds the "
                "optimizer plugin 'testgood'; a plugin file is named titan_<kind>_<name>.so: "
                "rename it titan_optimizer_testgood.so");
}

// A communicator whose every call throws, as a comm plugin breaking the contract would.
class ThrowingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status AllReduce(TensorView, ReduceOp) override { throw std::runtime_error("boom"); }
  absl::Status ReduceScatter(const TensorView&, TensorView, ReduceOp) override {
    throw std::runtime_error("boom");
  }
  absl::Status AllGather(const TensorView&, TensorView) override {
    throw std::runtime_error("boom");
  }
  absl::Status Broadcast(TensorView, int) override { throw std::runtime_error("boom"); }
  absl::Status Send(const TensorView&, int, int) override { throw std::runtime_error("boom"); }
  absl::Status Recv(TensorView, int, int) override { throw std::runtime_error("boom"); }
  absl::Status Barrier() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Transfer>> StartSend(const TensorView&, int, int) override {
    struct ThrowingWait : Transfer {
      absl::Status Wait() override { throw 7; }
    };
    return std::unique_ptr<Transfer>(new ThrowingWait);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int) override {
    return std::unique_ptr<Communicator>(new ThrowingCommunicator);
  }
};

// Issue #39: an exception from a comm plugin's communicator names the plugin and the call, on the
// communicator, on a transfer it started and on a communicator split from it; calls that return
// pass their result through.
TEST(PluginRegistry, AnExceptionFromACommunicatorNamesItsPlugin) {
  auto registry = PluginRegistry::Discover({kTestPlugins / "faulty"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto made_by = (*registry)->Create<OptimizerPlugin>("throwingstep");  // stands for the maker
  ASSERT_TRUE(made_by.ok()) << made_by.status();
  const std::string plugin =
      "optimizer plugin 'throwingstep' (" +
      (kTestPlugins / "faulty" / "titan_optimizer_throwingstep.so").string() + "): ";
  std::unique_ptr<Communicator> world = GuardCommunication(
      std::make_unique<ThrowingCommunicator>(), dynamic_cast<const void*>(made_by->get()));
  float x = 1.0f;
  EXPECT_EQ(world->AllReduce(FlatF32(&x, 1), ReduceOp::kSum).message(),
            plugin +
                "AllReduce threw a C++ exception: boom (a plugin must return an error "
                "status instead)");
  EXPECT_TRUE(world->Barrier().ok());
  EXPECT_EQ(world->size(), 1);
  absl::StatusOr<std::unique_ptr<Communicator>> part = world->Split(0, 0);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ((*part)->Broadcast(FlatF32(&x, 1), 0).message(),
            plugin +
                "Broadcast threw a C++ exception: boom (a plugin must return an error status "
                "instead)");
  absl::StatusOr<std::unique_ptr<Communicator::Transfer>> sent =
      (*part)->StartSend(FlatF32(&x, 1), 0, 0);
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ((*sent)->Wait().message(),
            plugin +
                "Transfer::Wait threw a C++ exception of an unknown type (a plugin must "
                "return an error status instead)");
}

// Issue #39: "internal error: boom from plugin Step" named neither the plugin nor its file.
TEST(PluginRegistry, AnExceptionFromAPluginCallIsAnErrorNamingThePlugin) {
  auto registry = PluginRegistry::Discover({kTestPlugins / "faulty"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto optimizer = (*registry)->Create<OptimizerPlugin>("throwingstep");
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  std::vector<float> params = {1.0f}, grads = {0.5f};
  std::vector<ParamSegment> segments = {{0, 1, true}};
  OptimizerStep step{
      FlatF32(params.data(), 1), FlatF32(grads.data(), 1), FlatF32(nullptr, 0), segments, 0.1, 1};
  OptimizerPlugin& plugin = **optimizer;
  absl::Status stepped = CallPluginOf(plugin, "Step", [&] { return plugin.Step(step); });
  EXPECT_EQ(stepped.message(),
            "optimizer plugin 'throwingstep' (" +
                (kTestPlugins / "faulty" / "titan_optimizer_throwingstep.so").string() +
                "): Step threw a C++ exception: boom from plugin Step (a plugin must return an "
                "error status instead)");
  // A StatusOr's value comes back as the call returned it.
  absl::StatusOr<int> value = CallPluginOf(plugin, "StateNames", [&]() -> absl::StatusOr<int> {
    return static_cast<int>(plugin.StateNames().size());
  });
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, 0);
}

TEST(PluginRegistry, AFactoryReturningNullIsAnErrorNamingThePlugin) {
  auto registry = PluginRegistry::Discover({kTestPlugins / "faulty"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto created = (*registry)->Create<OptimizerPlugin>("nullfactory");
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().message(),
            "optimizer plugin 'nullfactory' (" +
                (kTestPlugins / "faulty" / "titan_optimizer_nullfactory.so").string() +
                "): its factory returned null instead of an instance");
}

TEST(PluginRegistry, AnExceptionFromAPluginIsAnErrorNamingIt) {
  auto registry = PluginRegistry::Discover({kTestPlugins / "faulty"});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto factory = (*registry)->Create<OptimizerPlugin>("throwingfactory");
  ASSERT_FALSE(factory.ok());
  EXPECT_EQ(factory.status().message(),
            "optimizer plugin 'throwingfactory' (" +
                (kTestPlugins / "faulty" / "titan_optimizer_throwingfactory.so").string() +
                "): its factory threw a C++ exception: constructor failed on purpose (a plugin "
                "must return an error status instead)");
  auto configured = (*registry)->CreateConfigured<OptimizerPlugin>("throwingconfigure",
                                                                   ConfigView("optimizer", {}));
  ASSERT_FALSE(configured.ok());
  EXPECT_NE(configured.status().message().find(
                "optimizer plugin 'throwingconfigure' (" +
                (kTestPlugins / "faulty" / "titan_optimizer_throwingconfigure.so").string() +
                "): Configure threw a C++ exception: Configure failed on purpose"),
            absl::string_view::npos)
      << configured.status();
}

TEST(PluginRegistry, UnknownNameListsTheAvailableAndSuggestsTheClosest) {
  auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto info = (*registry)->Find("optimizer", "adamx");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().message(),
            "no optimizer plugin named 'adamx'; available optimizer plugins: adam, adamw, sgd; "
            "did you mean 'adamw'?");
  EXPECT_TRUE((*registry)->Find("optimizer", "AdamW").ok());
  auto builtins_only = PluginRegistry::Discover({});
  ASSERT_TRUE(builtins_only.ok());
  auto none = (*builtins_only)->Find("optimizer", "adamw");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("available optimizer plugins: (none)"),
            absl::string_view::npos);
}

// Library names allow '-' only, TorchTitan's recipe names use '_': the two match.
TEST(PluginRegistry, AnUnderscoreInTheNameMatchesADash) {
  auto registry = PluginRegistry::Discover({TITAN_BUILD_PLUGIN_DIR});
  ASSERT_TRUE(registry.ok()) << registry.status();
  auto info = (*registry)->Find("float8", "Rowwise_With_GW_HP");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_STREQ((*info)->descriptor->name, "rowwise-with-gw-hp");
  EXPECT_FALSE((*registry)->Find("float8", "rowwise_with_gw").ok());
}

TEST(PluginSearchDirs, FlagsThenEnvironmentThenBesideTheExecutable) {
  fs::path a = kTestPlugins / "good", b = kTestPlugins / "duplicate", c = kTestPlugins / "no_entry";
  fs::path executable = kTestPlugins / "bin" / "titan-run";
  auto dirs =
      PluginSearchDirs({a.string()}, b.string() + ":" + c.string() + ":" + a.string(), executable);
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  ASSERT_GE(dirs->size(), 3u);
  EXPECT_EQ((*dirs)[0], fs::canonical(a));
  EXPECT_EQ((*dirs)[1], fs::canonical(b));
  EXPECT_EQ((*dirs)[2], fs::canonical(c));
  EXPECT_EQ(dirs->size(), 3u);  // a repeated is dropped; the executable's folder does not exist
}

TEST(PluginSearchDirs, MissingFoldersAreErrors) {
  auto flag = PluginSearchDirs({"/no/such/dir"}, "", "/bin/titan-run");
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(flag.status().message(), "--plugin-dir /no/such/dir: no such directory");
  auto env = PluginSearchDirs({}, "/no/such/env", "/bin/titan-run");
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().message(), "TITAN_PLUGIN_PATH entry /no/such/env: no such directory");
}

}  // namespace
}  // namespace titan
