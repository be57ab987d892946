#include "core/data/documents.h"

#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/data/input_file.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

enum class Format { kText, kJsonl, kJsonlZst, kIgnored };

Format FormatOf(const fs::path& path) {
  const std::string name = path.filename().string();
  if (absl::EndsWith(name, ".jsonl.zst")) return Format::kJsonlZst;
  if (absl::EndsWith(name, ".jsonl")) return Format::kJsonl;
  if (absl::EndsWith(name, ".txt") || path.extension().empty()) return Format::kText;
  return Format::kIgnored;
}

class JsonlParser {
 public:
  JsonlParser(const std::string& file, const DocumentOptions& options,
              const std::function<void(absl::string_view)>& sink, DocumentReport* report)
      : file_(file), options_(options), sink_(sink), report_(report) {}

  absl::Status Line(absl::string_view line) {
    ++line_no_;
    if (line.empty()) return absl::OkStatus();
    nlohmann::json record = nlohmann::json::parse(line.begin(), line.end(), nullptr, false);
    std::string problem;
    if (record.is_discarded()) {
      problem = "malformed JSON";
    } else if (!record.is_object() || !record.contains(options_.text_field) ||
               !record[options_.text_field].is_string()) {
      problem =
          absl::StrCat("expected an object with a string field \"", options_.text_field, "\"");
    }
    if (problem.empty()) {
      const std::string& text = record[options_.text_field].get_ref<const std::string&>();
      if (!text.empty()) ++report_->documents, sink_(text);
      return absl::OkStatus();
    }
    std::string where = absl::StrCat(file_, ":", line_no_, ": ", problem);
    if (!options_.skip_bad_records) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " (data.on_bad_record = \"skip\" skips such lines)"));
    }
    if (report_->skipped++ == 0) report_->first_skip = where;
    return absl::OkStatus();
  }

  // Feeds bytes; complete lines are parsed, the rest waits for more.
  absl::Status Bytes(absl::string_view bytes) {
    pending_.append(bytes.data(), bytes.size());
    size_t start = 0;
    for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
      TITAN_RETURN_IF_ERROR(Line(absl::string_view(pending_).substr(start, nl - start)));
    }
    pending_.erase(0, start);
    return absl::OkStatus();
  }
  absl::Status Finish() {
    std::string rest = std::move(pending_);
    pending_.clear();
    return Line(rest);
  }

 private:
  std::string file_;
  const DocumentOptions& options_;
  const std::function<void(absl::string_view)>& sink_;
  DocumentReport* report_;
  std::string pending_;
  int64_t line_no_ = 0;
};

absl::Status ReadText(const std::string& file, const DocumentOptions& options,
                      const std::function<void(absl::string_view)>& sink, DocumentReport* report) {
  std::ifstream in(file, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat(file, ": read error"));
  if (absl::string_view(text).substr(0, 8192).find('\0') != absl::string_view::npos &&
      report->binary_files++ == 0) {
    report->first_binary = file;
  }
  auto emit = [&](absl::string_view doc) {
    if (doc.find_first_not_of(" \t\r\n") == absl::string_view::npos) return;
    ++report->documents;
    sink(doc);
  };
  if (options.text_separator.empty()) {
    emit(text);
    return absl::OkStatus();
  }
  size_t doc_start = 0;
  for (size_t line_start = 0; line_start < text.size();) {
    size_t nl = text.find('\n', line_start);
    size_t line_end = nl == std::string::npos ? text.size() : nl;
    size_t next = nl == std::string::npos ? text.size() : nl + 1;
    if (absl::string_view(text).substr(line_start, line_end - line_start) ==
        options.text_separator) {
      emit(absl::string_view(text).substr(doc_start, line_start - doc_start));
      doc_start = next;
    }
    line_start = next;
  }
  emit(absl::string_view(text).substr(doc_start));
  return absl::OkStatus();
}

absl::Status ReadJsonl(const std::string& file, bool compressed, JsonlParser& parser) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(file, ": cannot open"));
  // Left uninitialized: zeroing a megabyte per file would cost more than reading a small file
  // (the jsonl fuzz target reads thousands of them).
  const size_t input_size = compressed ? ZSTD_DStreamInSize() : 1 << 20;
  const size_t output_size = ZSTD_DStreamOutSize();
  const std::unique_ptr<char[]> input = std::make_unique_for_overwrite<char[]>(input_size);
  const std::unique_ptr<char[]> output = std::make_unique_for_overwrite<char[]>(output_size);
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  size_t last = 0;  // ZSTD's hint: 0 when a frame was completely decoded
  while (in) {
    in.read(input.get(), static_cast<std::streamsize>(input_size));
    size_t got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    if (!compressed) {
      TITAN_RETURN_IF_ERROR(parser.Bytes(absl::string_view(input.get(), got)));
      continue;
    }
    ZSTD_inBuffer in_buf{input.get(), got, 0};
    while (in_buf.pos < in_buf.size) {
      ZSTD_outBuffer out_buf{output.get(), output_size, 0};
      last = ZSTD_decompressStream(dctx.get(), &out_buf, &in_buf);
      if (ZSTD_isError(last)) {
        return absl::DataLossError(
            absl::StrCat(file, ": corrupt zstd data: ", ZSTD_getErrorName(last)));
      }
      TITAN_RETURN_IF_ERROR(parser.Bytes(absl::string_view(output.get(), out_buf.pos)));
    }
  }
  if (compressed && last != 0) {
    return absl::DataLossError(absl::StrCat(file, ": truncated zstd data"));
  }
  return parser.Finish();
}

}  // namespace

std::vector<std::string> DocumentWarnings(const DocumentReport& report) {
  std::vector<std::string> warnings;
  if (report.skipped > 0) {
    warnings.push_back(
        absl::StrCat("skipped ", report.skipped, " bad record(s); the first: ", report.first_skip));
  }
  if (report.binary_files > 0) {
    warnings.push_back(absl::StrCat(report.binary_files,
                                    " file(s) read as text look binary (NUL bytes in the first 8 "
                                    "KiB), the first: ",
                                    report.first_binary, "; is this the corpus you meant?"));
  }
  return warnings;
}

absl::Status ReadDocuments(const std::string& path, const DocumentOptions& options,
                           const std::function<void(absl::string_view)>& sink,
                           DocumentReport* report) {
  absl::StatusOr<InputKind> kind =
      InspectInput(path, /*folder_ok=*/true, "a text, .jsonl or .jsonl.zst file or folder");
  if (!kind.ok()) {
    return absl::Status(kind.status().code(),
                        absl::StrCat(options.path_name, " = ", kind.status().message()));
  }
  std::error_code error;
  std::vector<fs::path> files;
  if (*kind == InputKind::kFolder) {
    for (const auto& entry : fs::recursive_directory_iterator(path, error)) {
      if (entry.is_regular_file() && FormatOf(entry.path()) != Format::kIgnored) {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  for (const fs::path& file : files) {
    ++report->files;
    Format format = FormatOf(file);
    if (format == Format::kText) {
      TITAN_RETURN_IF_ERROR(ReadText(file.string(), options, sink, report));
    } else {
      JsonlParser parser(file.string(), options, sink, report);
      TITAN_RETURN_IF_ERROR(ReadJsonl(file.string(), format == Format::kJsonlZst, parser));
    }
  }
  if (report->documents == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no documents found in ", report->files,
                     " file(s); expected text, .jsonl or .jsonl.zst with non-empty text"));
  }
  return absl::OkStatus();
}

}  // namespace titan
