// The names of the symbols an ELF file defines in one of its sections, read from the file
// without loading it (the plugin loader checks a plugin's ABI this way before running its code).
#ifndef TITAN_CORE_RUNTIME_ELF_SYMBOLS_H_
#define TITAN_CORE_RUNTIME_ELF_SYMBOLS_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace titan {

// Reads both the static and the dynamic symbol table: distributions strip shared libraries
// down to the dynamic one (strip --strip-unneeded). An error when `file` is not ELF.
absl::StatusOr<std::vector<std::string>> SymbolsInSection(const std::filesystem::path& file,
                                                          absl::string_view section);

}  // namespace titan

#endif  // TITAN_CORE_RUNTIME_ELF_SYMBOLS_H_
