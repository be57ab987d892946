#include "tools/gpu_proof/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tools/gpu_proof/test_folder.h"

namespace titan::gpu_proof {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseFlags, TakesValuesAfterEqualsOrAsTheNextArgument) {
  absl::StatusOr<Flags> flags =
      ParseFlags({"--bundle", "/b", "--report=/r.json", "--deadline-s=240", "--work", "/w"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->bundle, "/b");
  EXPECT_EQ(flags->report, "/r.json");
  EXPECT_EQ(flags->deadline_s, 240);
  EXPECT_EQ(flags->work, "/w");
  EXPECT_FALSE(flags->make_reference);
}

TEST(ParseFlags, Defaults) {
  absl::StatusOr<Flags> flags = ParseFlags({"--bundle=/b", "--make-reference"});
  ASSERT_TRUE(flags.ok()) << flags.status();
  EXPECT_EQ(flags->report, "gpu-check-report.json");
  EXPECT_EQ(flags->deadline_s, 600);
  EXPECT_TRUE(flags->work.empty());
  EXPECT_TRUE(flags->make_reference);
}

TEST(ParseFlags, TheBundleIsRequired) {
  absl::StatusOr<Flags> flags = ParseFlags({"--report", "x.json"});
  ASSERT_FALSE(flags.ok());
  EXPECT_THAT(flags.status().message(), HasSubstr("--bundle DIR is required"));
}

TEST(ParseFlags, RefusesUnknownArgumentsAndBadValuesNamingThem) {
  EXPECT_THAT(ParseFlags({"--bundle=/b", "--deadline=3"}).status().message(),
              HasSubstr("unknown argument '--deadline=3'"));
  EXPECT_THAT(ParseFlags({"--bundle=/b", "--deadline-s=soon"}).status().message(),
              HasSubstr("found 'soon'"));
  EXPECT_THAT(ParseFlags({"--bundle=/b", "--deadline-s=-4"}).status().message(),
              HasSubstr("positive"));
  EXPECT_THAT(ParseFlags({"--bundle"}).status().message(), HasSubstr("--bundle needs a value"));
}

TEST(MissingFromBundle, NamesEachMissingPiece) {
  TestFolder bundle;
  EXPECT_THAT(MissingFromBundle(bundle.path(), false),
              ElementsAre("bin/titan-run", "recipes/llama3_debug.toml", "data/fortunes",
                          "reference/cpu_f32/metrics.jsonl"));
  // Making the reference does not need one.
  EXPECT_THAT(MissingFromBundle(bundle.path(), true),
              ElementsAre("bin/titan-run", "recipes/llama3_debug.toml", "data/fortunes"));
}

TEST(MissingFromBundle, NothingForACompleteBundleButTitanRunMustBeExecutable) {
  TestFolder bundle;
  const std::string titan_run = bundle.Write("bin/titan-run", "#!/bin/sh\n");
  bundle.Write("recipes/llama3_debug.toml");
  bundle.Write("data/fortunes/fortunes");
  bundle.Write("reference/cpu_f32/metrics.jsonl");
  EXPECT_THAT(MissingFromBundle(bundle.path(), false), ElementsAre("bin/titan-run"));
  std::filesystem::permissions(titan_run, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  EXPECT_TRUE(MissingFromBundle(bundle.path(), false).empty());
}

}  // namespace
}  // namespace titan::gpu_proof
