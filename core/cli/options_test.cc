#include "core/cli/options.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

TEST(Options, ParsesFlagsAndOverrides) {
  auto options = ParseOptions({"--recipe", "r.toml", "--plugin-dir=/a", "--plugin-dir", "/b.c",
                               "--training.steps=20", "--print-recipe", "--log-level=debug"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->recipe, "r.toml");
  EXPECT_EQ(options->plugin_dirs, (std::vector<std::string>{"/a", "/b.c"}));
  EXPECT_EQ(options->overrides, (std::vector<std::string>{"training.steps=20"}));
  EXPECT_TRUE(options->print_recipe);
  EXPECT_EQ(options->log_level, "debug");
}

TEST(Options, RecipeWithDotsInItsPathIsNotAnOverride) {
  auto options = ParseOptions({"--recipe=recipes/llama3_debug.toml"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->recipe, "recipes/llama3_debug.toml");
  EXPECT_TRUE(options->overrides.empty());
}

TEST(Options, ExplainsMistakes) {
  auto unknown = ParseOptions({"--list-plugin"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("did you mean '--list-plugins'"),
            absl::string_view::npos);
  auto no_value = ParseOptions({"--training.steps"});
  ASSERT_FALSE(no_value.ok());
  EXPECT_NE(no_value.status().message().find("--section.key=value"), absl::string_view::npos);
  auto missing = ParseOptions({"--recipe"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--recipe needs a value"), absl::string_view::npos);
}

}  // namespace
}  // namespace titan
