#include "core/fault_tolerance/etcd_store.h"

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/fault_tolerance/curl_library.h"
#include "titan/status.h"

namespace titan {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr long kConnectTimeoutMs = 500;
constexpr long kRequestTimeoutMs = 3000;
constexpr auto kRetryPause = std::chrono::milliseconds(50);

size_t AppendBody(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

// One connection cache per thread: the heartbeat thread and the training thread each keep theirs.
CURL* ThreadHandle(const CurlLibrary& curl) {
  thread_local std::unique_ptr<CURL, void (*)(CURL*)> handle(curl.easy_init(), curl.easy_cleanup);
  return handle.get();
}

// The end of the range of keys that start with `prefix`.
std::string RangeEnd(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

std::string B64(const std::string& text) { return absl::Base64Escape(text); }

class EtcdStore : public QuorumStore {
 public:
  EtcdStore(std::vector<std::string> endpoints, std::string prefix,
            std::chrono::milliseconds retry_for)
      : endpoints_(std::move(endpoints)), prefix_(std::move(prefix)), retry_for_(retry_for) {
    while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  }

  absl::Status Put(const std::string& key, const std::string& value) override {
    return Call("put", {{"key", B64(Key(key))}, {"value", B64(value)}}).status();
  }

  absl::Status PutIfAbsent(const std::string& key, const std::string& value) override {
    const std::string k = B64(Key(key));
    Json request = {
        {"compare", Json::array({{{"key", k}, {"target", "CREATE"}, {"create_revision", "0"}}})},
        {"success", Json::array({{{"request_put", {{"key", k}, {"value", B64(value)}}}}})}};
    TITAN_ASSIGN_OR_RETURN(Json reply, Call("txn", request));
    // proto3's JSON leaves false out.
    if (reply.value("succeeded", false)) return absl::OkStatus();
    return absl::AlreadyExistsError(Key(key));
  }

  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) override {
    const Json request = {{"key", B64(Key(key))}};
    TITAN_ASSIGN_OR_RETURN(Json reply, Call("range", request));
    if (!reply.contains("kvs") || reply["kvs"].empty()) return std::nullopt;
    return Decode(reply["kvs"][0].value("value", ""));  // an empty value is left out too
  }

  absl::StatusOr<std::vector<std::string>> List(const std::string& folder) override {
    const std::string under = Key(folder) + "/";
    const Json request = {
        {"key", B64(under)}, {"range_end", B64(RangeEnd(under))}, {"keys_only", true}};
    TITAN_ASSIGN_OR_RETURN(Json reply, Call("range", request));
    std::vector<std::string> names;
    for (const Json& kv : reply.value("kvs", Json::array())) {
      TITAN_ASSIGN_OR_RETURN(std::string key, Decode(kv.value("key", "")));
      const std::string name = key.substr(under.size());
      if (name.find('/') == std::string::npos) names.push_back(name);
    }
    return names;
  }

  absl::Status Delete(const std::string& key) override {
    return Call("deleterange", {{"key", B64(Key(key))}}).status();
  }
  absl::Status DeleteFolder(const std::string& folder) override {
    const std::string under = Key(folder) + "/";
    TITAN_RETURN_IF_ERROR(Delete(folder));
    return Call("deleterange", {{"key", B64(under)}, {"range_end", B64(RangeEnd(under))}}).status();
  }

  std::string Describe() const override {
    return absl::StrCat("etcd at ", absl::StrJoin(endpoints_, ","), " under ", prefix_);
  }

 private:
  std::string Key(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }

  absl::StatusOr<std::string> Decode(const std::string& base64) const {
    std::string text;
    if (!absl::Base64Unescape(base64, &text)) {
      return absl::DataLossError(absl::StrCat(Describe(), ": a value that is not base64"));
    }
    return text;
  }

  // POSTs `request` to /v3/kv/<method> of the endpoints in turn until one answers.
  absl::StatusOr<Json> Call(const std::string& method, const Json& request) {
    const std::string body = request.dump();
    const auto deadline = Clock::now() + retry_for_;
    std::string last_error;
    size_t at = current_.load();
    while (true) {
      const std::string& endpoint = endpoints_[at % endpoints_.size()];
      absl::StatusOr<Json> reply = Post(endpoint, method, body);
      if (absl::IsFailedPrecondition(reply.status())) return reply.status();  // no libcurl
      if (reply.ok()) {
        current_ = at % endpoints_.size();
        return reply;
      }
      last_error = std::string(reply.status().message());
      ++at;
      if (Clock::now() > deadline) break;
      if (at % endpoints_.size() == current_) std::this_thread::sleep_for(kRetryPause);
    }
    return absl::UnavailableError(
        absl::StrCat("fault tolerance: no member of etcd (fault_tolerance.etcd_endpoints = ",
                     absl::StrJoin(endpoints_, ","), ") answered ", method, " within ",
                     retry_for_.count(), " ms; last error: ", last_error));
  }

  static absl::StatusOr<Json> Post(const std::string& endpoint, const std::string& method,
                                   const std::string& body) {
    TITAN_ASSIGN_OR_RETURN(const CurlLibrary* library, Curl());
    const CurlLibrary& lib = *library;
    CURL* curl = ThreadHandle(lib);
    if (curl == nullptr) return absl::InternalError("libcurl could not make a handle");
    lib.easy_reset(curl);
    const std::string url = absl::StrCat(endpoint, "/v3/kv/", method);
    std::string response;
    curl_slist* headers = lib.slist_append(nullptr, "Content-Type: application/json");
    lib.easy_setopt(curl, CURLOPT_URL, url.c_str());
    lib.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    lib.easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    lib.easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    lib.easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendBody);
    lib.easy_setopt(curl, CURLOPT_WRITEDATA, &response);
    lib.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
    lib.easy_setopt(curl, CURLOPT_TIMEOUT_MS, kRequestTimeoutMs);
    lib.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    const CURLcode code = lib.easy_perform(curl);
    lib.slist_free_all(headers);
    long status = 0;
    lib.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (code != CURLE_OK) {
      return absl::UnavailableError(absl::StrCat(url, ": ", lib.easy_strerror(code)));
    }
    Json reply = Json::parse(response, nullptr, /*allow_exceptions=*/false);
    if (status != 200 || reply.is_discarded() || reply.contains("error")) {
      return absl::UnavailableError(absl::StrCat(url, ": HTTP ", status, ": ", response));
    }
    return reply;
  }

  const std::vector<std::string> endpoints_;
  std::string prefix_;
  const std::chrono::milliseconds retry_for_;
  std::atomic<size_t> current_{0};  // the endpoint that answered last
};

}  // namespace

absl::StatusOr<std::unique_ptr<QuorumStore>> EtcdQuorumStore(std::vector<std::string> endpoints,
                                                             std::string prefix,
                                                             std::chrono::milliseconds retry_for) {
  if (endpoints.empty()) {
    return absl::InvalidArgumentError("fault_tolerance.etcd_endpoints: give at least one URL");
  }
  auto store = std::make_unique<EtcdStore>(std::move(endpoints), std::move(prefix), retry_for);
  // One read at the start, so that an unreachable cluster is named before training.
  TITAN_RETURN_IF_ERROR(store->Get("started").status());
  return store;
}

}  // namespace titan
