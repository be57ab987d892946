// The plugin folder a test loads from: TITAN_PLUGIN_PATH when set (a test binary run from the
// GPU bundle, far from the build tree it was compiled in), else the build tree's.
#ifndef TITAN_TESTS_SUPPORT_PLUGIN_DIR_H_
#define TITAN_TESTS_SUPPORT_PLUGIN_DIR_H_

#include <cstdlib>
#include <string>

namespace titan::testing {

inline std::string TestPluginDir() {
  const char* path = std::getenv("TITAN_PLUGIN_PATH");
  return path != nullptr && *path != '\0' ? path : TITAN_BUILD_PLUGIN_DIR;
}

}  // namespace titan::testing

#endif  // TITAN_TESTS_SUPPORT_PLUGIN_DIR_H_
