// A safetensors file's header. A header that parses describes tensors whose byte ranges hold
// exactly their elements and tile the data section to the end of the file.
#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_support.h"
#include "plugins/checkpoint/safetensors/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view file = titan::fuzz::Bytes(data, size);
  auto header = titan::safetensors::ParseHeader(file, "fuzz.safetensors");
  if (!header.ok()) return 0;
  TITAN_FUZZ_CHECK(header->data_start >= 8 && header->data_start <= size,
                   absl::StrCat(header->data_start));
  uint64_t next = 0;
  for (const titan::safetensors::TensorEntry& t : header->tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) {
      TITAN_FUZZ_CHECK(d >= 0, t.name);
      elements *= static_cast<uint64_t>(d);
    }
    TITAN_FUZZ_CHECK(t.begin == next && t.end >= t.begin, t.name);
    TITAN_FUZZ_CHECK(t.end - t.begin == elements * titan::DTypeSize(t.dtype), t.name);
    next = t.end;
  }
  TITAN_FUZZ_CHECK(header->data_start + next == size, "the ranges end before the file does");
  return 0;
}
