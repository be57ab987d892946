#include "core/fault_tolerance/curl_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace titan {
namespace {

constexpr char kLibrary[] = "libcurl.so.4";

template <typename Function>
bool Bind(void* library, const char* name, Function& function, std::string& missing) {
  function = reinterpret_cast<Function>(dlsym(library, name));
  if (function == nullptr) missing = name;
  return function != nullptr;
}

absl::StatusOr<CurlLibrary> Load() {
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fault_tolerance.etcd_endpoints: titan talks to etcd through libcurl, and ", kLibrary,
        " cannot be loaded (", dlerror(), "): install it (Debian: libcurl4, Fedora: libcurl)"));
  }
  CurlLibrary curl{};
  std::string missing;
  const bool bound = Bind(library, "curl_global_init", curl.global_init, missing) &&
                     Bind(library, "curl_easy_init", curl.easy_init, missing) &&
                     Bind(library, "curl_easy_cleanup", curl.easy_cleanup, missing) &&
                     Bind(library, "curl_easy_reset", curl.easy_reset, missing) &&
                     Bind(library, "curl_easy_setopt", curl.easy_setopt, missing) &&
                     Bind(library, "curl_easy_perform", curl.easy_perform, missing) &&
                     Bind(library, "curl_easy_getinfo", curl.easy_getinfo, missing) &&
                     Bind(library, "curl_easy_strerror", curl.easy_strerror, missing) &&
                     Bind(library, "curl_slist_append", curl.slist_append, missing) &&
                     Bind(library, "curl_slist_free_all", curl.slist_free_all, missing);
  if (!bound) {
    return absl::FailedPreconditionError(
        absl::StrCat(kLibrary, " has no ", missing, ": not the libcurl titan was built for"));
  }
  if (curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
    return absl::InternalError(absl::StrCat(kLibrary, ": curl_global_init failed"));
  }
  return curl;  // the library stays loaded for the process's life
}

}  // namespace

absl::StatusOr<const CurlLibrary*> Curl() {
  static const absl::StatusOr<CurlLibrary> loaded = Load();
  if (!loaded.ok()) return loaded.status();
  return &*loaded;
}

}  // namespace titan
