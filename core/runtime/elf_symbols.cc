#include "core/runtime/elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace titan {

absl::StatusOr<std::vector<std::string>> SymbolsInSection(const std::filesystem::path& file,
                                                          absl::string_view section) {
  if (elf_version(EV_CURRENT) == EV_NONE) {
    return absl::InternalError(absl::StrCat("libelf: ", elf_errmsg(-1)));
  }
  int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(file.string(), ": ", std::strerror(errno)));
  }
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  auto close_all = [&] {
    if (elf != nullptr) elf_end(elf);
    close(fd);
  };
  size_t names_index = 0;
  if (elf == nullptr || elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &names_index) != 0) {
    std::string why = elf == nullptr ? elf_errmsg(-1) : "not an ELF file";
    close_all();
    return absl::InvalidArgumentError(absl::StrCat(file.string(), ": ", why));
  }
  size_t wanted = 0;  // the section's index; 0 (SHN_UNDEF) until found
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    const char* name = gelf_getshdr(scn, &header) != nullptr
                           ? elf_strptr(elf, names_index, header.sh_name)
                           : nullptr;
    if (name != nullptr && section == name) wanted = elf_ndxscn(scn);
  }
  std::vector<std::string> symbols;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); wanted != 0 && scn != nullptr;
       scn = elf_nextscn(elf, scn)) {
    GElf_Shdr header;
    if (gelf_getshdr(scn, &header) == nullptr ||
        (header.sh_type != SHT_SYMTAB && header.sh_type != SHT_DYNSYM) || header.sh_entsize == 0) {
      continue;
    }
    Elf_Data* data = elf_getdata(scn, nullptr);
    for (size_t i = 0; data != nullptr && i < header.sh_size / header.sh_entsize; ++i) {
      GElf_Sym symbol;
      if (gelf_getsym(data, static_cast<int>(i), &symbol) == nullptr || symbol.st_shndx != wanted) {
        continue;
      }
      const char* name = elf_strptr(elf, header.sh_link, symbol.st_name);
      if (name == nullptr || *name == '\0') continue;
      if (std::find(symbols.begin(), symbols.end(), name) == symbols.end()) {
        symbols.emplace_back(name);
      }
    }
  }
  close_all();
  return symbols;
}

}  // namespace titan
