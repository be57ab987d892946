#include "core/fault_tolerance/quorum_store.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/fault_tolerance/etcd_store.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

class FileStore : public QuorumStore {
 public:
  explicit FileStore(std::string folder) : folder_(std::move(folder)) {}

  absl::Status Put(const std::string& key, const std::string& value) override {
    return Publish(key, value, /*exclusive=*/false);
  }
  absl::Status PutIfAbsent(const std::string& key, const std::string& value) override {
    return Publish(key, value, /*exclusive=*/true);
  }

  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) override {
    std::ifstream in(Path(key));
    if (!in) return std::nullopt;
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  absl::StatusOr<std::vector<std::string>> List(const std::string& folder) override {
    std::vector<std::string> names;
    std::error_code error;
    for (const fs::directory_entry& entry : fs::directory_iterator(Path(folder), error)) {
      const std::string name = entry.path().filename().string();
      std::error_code kind;
      // Keys, not folders of keys nor temporaries.
      if (entry.is_regular_file(kind) && name.find(".tmp.") == std::string::npos) {
        names.push_back(name);
      }
    }
    return names;
  }

  absl::Status Delete(const std::string& key) override {
    std::error_code error;
    fs::remove(Path(key), error);
    return absl::OkStatus();
  }
  absl::Status DeleteFolder(const std::string& folder) override {
    std::error_code error;
    fs::remove_all(Path(folder), error);
    return absl::OkStatus();
  }

  std::string Describe() const override { return absl::StrCat("store folder ", folder_); }

 private:
  std::string Path(const std::string& key) const { return (fs::path(folder_) / key).string(); }

  // Written to a temporary file first, so that a reader sees all or nothing.
  absl::Status Publish(const std::string& key, const std::string& content, bool exclusive) {
    const std::string path = Path(key);
    std::error_code error;
    fs::create_directories(fs::path(path).parent_path(), error);
    if (error) {
      return absl::UnavailableError(absl::StrCat("fault tolerance: cannot create the folder of ",
                                                 path, ": ", error.message()));
    }
    // Unique to this process and call: groups (and tests' threads) may publish the same name.
    static std::atomic<int64_t> calls{0};
    const std::string temporary = absl::StrCat(path, ".tmp.", getpid(), ".", calls++);
    {
      std::ofstream out(temporary, std::ios::trunc);
      out << content;
      out.close();
      if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", temporary));
    }
    const int result =
        exclusive ? link(temporary.c_str(), path.c_str()) : rename(temporary.c_str(), path.c_str());
    const int failure = errno;
    if (exclusive) unlink(temporary.c_str());
    if (result == 0) return absl::OkStatus();
    if (failure == EEXIST) return absl::AlreadyExistsError(path);
    return absl::UnavailableError(
        absl::StrCat("cannot publish ", path, ": ", std::strerror(failure)));
  }

  std::string folder_;
};

}  // namespace

std::unique_ptr<QuorumStore> FileQuorumStore(const std::string& folder) {
  return std::make_unique<FileStore>(folder);
}

absl::StatusOr<std::unique_ptr<QuorumStore>> OpenQuorumStore(
    const FaultToleranceSettings& settings) {
  if (!settings.etcd_endpoints.empty()) {
    return EtcdQuorumStore(settings.etcd_endpoints, settings.etcd_prefix,
                           settings.heartbeat_timeout);
  }
  std::error_code error;
  fs::create_directories(settings.store_folder, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("fault_tolerance.store_folder: cannot create ",
                                                   settings.store_folder, ": ", error.message()));
  }
  return FileQuorumStore(settings.store_folder);
}

}  // namespace titan
