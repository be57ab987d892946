// titan-tokenize: a corpus (text, .jsonl, .jsonl.zst; file or folder) into pre-tokenized shards
// that recipes read with data.format = "tokens". Flags are documented in docs/data.md.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/tokenize/shard_writer.h"

namespace titan {
namespace {

constexpr char kUsage[] =
    R"(usage: titan-tokenize --input=PATH --tokenizer=PATH --output=DIR [flags]
  --input=PATH           corpus file or folder: text, .jsonl, .jsonl.zst
  --tokenizer=PATH       tiktoken rank file, Hugging Face tokenizer.json, or "byte"
  --output=DIR           folder for shard_00000.tok, ...
  --threads=N            encoding threads                    (default: the CPU count)
  --shard-tokens=N       tokens per shard                    (default 67108864)
  --text-field=NAME      JSON Lines field with the text      (default text)
  --text-separator=LINE  a line separating documents in text files (default: none)
  --skip-bad-records     skip malformed JSON lines, counting them (default: stop)
)";

struct Flags {
  std::string input, tokenizer;
  ShardOptions shards;
  DocumentOptions documents;
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags flags;
  flags.documents.path_name = "--input";
  flags.shards.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    auto number = [&](int64_t& out) -> absl::Status {
      if (!absl::SimpleAtoi(value, &out) || out < 1) {
        return absl::InvalidArgumentError(absl::StrCat(arg, ": expected a positive integer"));
      }
      return absl::OkStatus();
    };
    int64_t n = 0;
    if (name == "--input") {
      flags.input = value;
    } else if (name == "--tokenizer") {
      flags.tokenizer = value;
    } else if (name == "--output") {
      flags.shards.output = value;
    } else if (name == "--threads") {
      TITAN_RETURN_IF_ERROR(number(n));
      flags.shards.threads = static_cast<int>(std::min<int64_t>(n, 1024));
    } else if (name == "--shard-tokens") {
      TITAN_RETURN_IF_ERROR(number(flags.shards.shard_tokens));
    } else if (name == "--text-field") {
      flags.documents.text_field = value;
    } else if (name == "--text-separator") {
      flags.documents.text_separator = value;
    } else if (arg == "--skip-bad-records") {
      flags.documents.skip_bad_records = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg, "\n", kUsage));
    }
  }
  if (flags.input.empty() || flags.tokenizer.empty() || flags.shards.output.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input, --tokenizer and --output are required\n", kUsage));
  }
  return flags;
}

// Text bytes the corpus holds, for the bar's fraction; 0 when unknown (compressed input).
int64_t InputBytes(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  int64_t total = 0;
  auto add = [&](const fs::path& file) {
    if (file.extension() == ".zst") total = -1;
    if (total >= 0) total += static_cast<int64_t>(fs::file_size(file, error));
  };
  if (fs::is_directory(path, error)) {
    for (const auto& entry : fs::recursive_directory_iterator(path, error)) {
      if (entry.is_regular_file()) add(entry.path());
    }
  } else {
    add(path);
  }
  return std::max<int64_t>(total, 0);
}

class ProgressDisplay {
 public:
  explicit ProgressDisplay(int64_t total_bytes)
      : total_bytes_(total_bytes), terminal_(isatty(STDERR_FILENO) != 0) {}

  void Update(const ShardReport& r) {
    const double elapsed = Elapsed();
    const double rate = elapsed > 0 ? static_cast<double>(r.tokens) / elapsed : 0.0;
    if (terminal_) {
      std::string bar;
      if (total_bytes_ > 0) {
        const double fraction =
            std::min(1.0, static_cast<double>(r.bytes_read) / static_cast<double>(total_bytes_));
        const int filled = static_cast<int>(fraction * 30);
        bar = absl::StrFormat("[%s%s] %3.0f%%  ", std::string(filled, '#'),
                              std::string(30 - filled, '.'), 100 * fraction);
      }
      std::fprintf(stderr, "\r\033[K%s%ld documents  %ld tokens  %ld shards  %.0f tokens/s",
                   bar.c_str(), static_cast<long>(r.documents), static_cast<long>(r.tokens),
                   static_cast<long>(r.shards), rate);
      std::fflush(stderr);
    } else if (elapsed >= next_log_s_) {
      // Not a terminal (a log file, CI): a line every 10 seconds instead of a redrawn bar.
      std::fprintf(stderr, "titan-tokenize: %ld documents, %ld tokens, %.0f tokens/s\n",
                   static_cast<long>(r.documents), static_cast<long>(r.tokens), rate);
      next_log_s_ = elapsed + 10.0;
    }
  }
  void Finish() {
    if (terminal_) std::fputs("\n", stderr);
  }
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  int64_t total_bytes_;
  bool terminal_;
  double next_log_s_ = 10.0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

int Run(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "--help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  absl::StatusOr<Flags> flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "titan-tokenize: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(flags->tokenizer);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "titan-tokenize: --tokenizer: %s\n",
                 std::string(tokenizer.status().message()).c_str());
    return 2;
  }
  ProgressDisplay display(InputBytes(flags->input));
  absl::StatusOr<ShardReport> report =
      WriteShards(flags->input, flags->documents, **tokenizer, flags->shards,
                  [&](const ShardReport& r) { display.Update(r); });
  display.Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "titan-tokenize: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  for (const std::string& warning : DocumentWarnings(report->input)) {
    std::fprintf(stderr, "titan-tokenize: warning: %s\n", warning.c_str());
  }
  const double elapsed = display.Elapsed();
  std::printf(
      "titan-tokenize: %ld documents, %ld tokens in %ld shard(s) under %s; %.1fs, %.0f "
      "tokens/s with %d thread(s)\n",
      static_cast<long>(report->documents), static_cast<long>(report->tokens),
      static_cast<long>(report->shards), flags->shards.output.c_str(), elapsed,
      elapsed > 0 ? static_cast<double>(report->tokens) / elapsed : 0.0, flags->shards.threads);
  return 0;
}

}  // namespace
}  // namespace titan

int main(int argc, char** argv) { return titan::Run(argc, argv); }
