#include "tools/checkpoint/checkpoint_tool.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/runtime/plugin_registry.h"
#include "core/runtime/single_process_comm.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

constexpr char kModelPrefix[] = "model/";

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Numbers within names compare by value, so "layers.10" follows "layers.9".
bool NaturalLess(absl::string_view a, absl::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (absl::ascii_isdigit(a[i]) && absl::ascii_isdigit(b[j])) {
      size_t i_end = i, j_end = j;
      while (i_end < a.size() && absl::ascii_isdigit(a[i_end])) ++i_end;
      while (j_end < b.size() && absl::ascii_isdigit(b[j_end])) ++j_end;
      absl::string_view x = a.substr(i, i_end - i);
      absl::string_view y = b.substr(j, j_end - j);
      while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
      while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = i_end, j = j_end;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i, ++j;
  }
  return a.size() - i < b.size() - j;
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::string HumanBytes(int64_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) value /= 1024, ++unit;
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

absl::StatusOr<std::unique_ptr<CheckpointPlugin>> MakeCheckpointPlugin(
    const PluginRegistry& registry, absl::string_view name) {
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointPlugin> plugin,
                         registry.Create<CheckpointPlugin>(name));
  std::map<std::string, ConfigView::Entry> entries;
  for (const ConfigKey& key : plugin->ConfigKeys()) {
    if (!key.default_value) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint plugin '", name, "' needs checkpoint.", key.name,
                       ", which has no default; titan-checkpoint cannot set it"));
    }
    entries[key.name] = {*key.default_value, "default"};
  }
  TITAN_RETURN_IF_ERROR(plugin->Configure(ConfigView("checkpoint", std::move(entries))));
  return plugin;
}

absl::StatusOr<std::string> DetectFormat(const PluginRegistry& registry,
                                         const std::string& folder) {
  std::error_code error;
  if (!fs::exists(folder, error))
    return absl::NotFoundError(absl::StrCat(folder, ": no such folder"));
  if (!fs::is_directory(folder, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(folder, ": not a folder; a checkpoint is a folder"));
  }
  if (fs::exists(fs::path(folder) / "model.safetensors", error) ||
      fs::exists(fs::path(folder) / "model.safetensors.index.json", error)) {
    return std::string("safetensors");
  }
  std::vector<std::string> names;
  for (const PluginInfo& info : registry.plugins()) {
    if (absl::string_view(info.descriptor->kind) == "checkpoint") {
      names.push_back(info.descriptor->name);
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) {
    return absl::NotFoundError("no checkpoint plugins were found; see --plugin-dir");
  }
  std::string refusals;
  for (const std::string& name : names) {
    TITAN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointPlugin> plugin,
                           MakeCheckpointPlugin(registry, name));
    absl::StatusOr<CheckpointContents> contents =
        CallPluginOf(*plugin, "Read", [&] { return plugin->Read(folder); });
    if (contents.ok()) return name;
    absl::StrAppend(&refusals, "\n  ", name, ": ", contents.status().message());
  }
  return absl::InvalidArgumentError(
      absl::StrCat(folder, ": no checkpoint format reads it (name one with --format):", refusals));
}

std::string FormatListing(const std::string& folder, const std::string& format,
                          const CheckpointContents& contents) {
  std::vector<CheckpointTensor> tensors = contents.tensors;
  std::sort(tensors.begin(), tensors.end(),
            [](const CheckpointTensor& a, const CheckpointTensor& b) {
              return NaturalLess(a.name, b.name);
            });
  auto step = contents.metadata.find("train.step");
  std::string out =
      absl::StrCat(folder, ": ", format, " checkpoint, ",
                   step == contents.metadata.end() ? std::string("no step recorded")
                                                   : absl::StrCat("step ", step->second),
                   "\n");
  size_t name_width = 6, shape_width = 5;
  for (const CheckpointTensor& t : tensors) {
    name_width = std::max(name_width, t.name.size());
    shape_width = std::max(shape_width, Shape(t.full_shape).size());
  }
  const auto row = [&](absl::string_view name, absl::string_view shape, absl::string_view dtype,
                       absl::string_view size) {
    return absl::StrFormat("%-*s  %-*s  %-5s  %s\n", static_cast<int>(name_width), name,
                           static_cast<int>(shape_width), shape, dtype, size);
  };
  absl::StrAppend(&out, row("tensor", "shape", "dtype", "size"));
  int64_t values = 0, bytes = 0;
  for (const CheckpointTensor& t : tensors) {
    const int64_t n = Numel(t.full_shape), size = n * static_cast<int64_t>(DTypeSize(t.dtype));
    values += n;
    bytes += size;
    absl::StrAppend(&out, row(t.name, Shape(t.full_shape), DTypeName(t.dtype), HumanBytes(size)));
  }
  absl::StrAppend(&out, contents.tensors.size(), " tensors, ", values, " values, ",
                  HumanBytes(bytes), " (", bytes, " bytes)\n");
  bool heading = false;
  for (const auto& [key, value] : contents.metadata) {
    if (key == "train.step") continue;
    if (!heading) absl::StrAppend(&out, "metadata:\n");
    heading = true;
    absl::StrAppend(&out, "  ", key, " = ", value, "\n");
  }
  return out;
}

absl::StatusOr<ConvertReport> ConvertCheckpoint(const PluginRegistry& registry,
                                                const std::string& source,
                                                const std::string& destination,
                                                const ConvertOptions& options) {
  std::error_code source_error, destination_error;
  const fs::path from = fs::weakly_canonical(source, source_error);
  if (!source_error && from == fs::weakly_canonical(destination, destination_error) &&
      !destination_error) {
    return absl::InvalidArgumentError(
        absl::StrCat(destination, ": the destination is the source; convert into another folder"));
  }
  ConvertReport report;
  report.from = options.from;
  if (report.from.empty()) {
    TITAN_ASSIGN_OR_RETURN(report.from, DetectFormat(registry, source));
  }
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointPlugin> reader,
                         MakeCheckpointPlugin(registry, report.from));
  TITAN_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointPlugin> writer,
                         MakeCheckpointPlugin(registry, options.to));
  TITAN_ASSIGN_OR_RETURN(CheckpointContents contents,
                         CallPluginOf(*reader, "Read", [&] { return reader->Read(source); }));

  // Whole tensors, one buffer each, in the dtype asked for.
  std::vector<std::vector<char>> buffers;
  std::vector<CheckpointPiece> pieces;
  for (const CheckpointTensor& t : contents.tensors) {
    if (!absl::StartsWith(t.name, kModelPrefix)) {
      if (report.skipped++ == 0) report.skipped_example = t.name;
      continue;
    }
    const DType dtype = options.dtype.value_or(t.dtype);
    const int64_t bytes = Numel(t.full_shape) * static_cast<int64_t>(DTypeSize(dtype));
    std::vector<char>& buffer = buffers.emplace_back(static_cast<size_t>(bytes));
    pieces.push_back({t.name, t.full_shape, std::vector<int64_t>(t.full_shape.size(), 0),
                      TensorView{buffer.data(), dtype, Device{}, t.full_shape, {}}});
    report.bytes += bytes;
  }
  report.tensors = static_cast<int64_t>(pieces.size());
  if (pieces.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": holds no model/ tensors to convert"));
  }
  SingleProcessCommunicator one_rank;
  TITAN_RETURN_IF_ERROR(
      CallPluginOf(*reader, "Load", [&] { return reader->Load(source, pieces, one_rank); }));
  // What titan-run reads to know a checkpoint restarts the weights only (core/train/checkpointer).
  contents.metadata["titan.model_only"] = "true";
  TITAN_RETURN_IF_ERROR(CallPluginOf(*writer, "Save", [&] {
    return writer->Save(destination, pieces, contents.metadata, one_rank);
  }));
  return report;
}

}  // namespace titan
