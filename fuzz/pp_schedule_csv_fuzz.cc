// A pipeline schedule CSV (parallelism.pipeline_parallel_schedule_csv), read for as many ranks
// as it has action lines and 4 microbatches: a schedule that reads passes the checker, and
// writing it out and reading it back gives the same schedule.
#include <algorithm>

#include "fuzz/fuzz_support.h"
#include "plugins/parallel/pp/schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes = titan::fuzz::Bytes(data, size);
  const int lines = 1 + static_cast<int>(std::count(bytes.begin(), bytes.end(), '\n'));
  const std::string path = titan::fuzz::WriteInput("schedule.csv", bytes);
  for (int ranks : {1, 2, std::min(lines, 8)}) {
    auto schedule = titan::pp::ReadCsv(path, ranks, 4);
    if (!schedule.ok()) continue;
    TITAN_FUZZ_CHECK(titan::pp::Check(*schedule).ok(), "a schedule read from CSV fails Check");
    const std::string again = titan::fuzz::WriteInput("again.csv", titan::pp::WriteCsv(*schedule));
    auto reread = titan::pp::ReadCsv(again, ranks, 4);
    TITAN_FUZZ_CHECK(reread.ok(), reread.status().ToString());
    TITAN_FUZZ_CHECK(reread->actions == schedule->actions, "the CSV round trip changed it");
    TITAN_FUZZ_CHECK(reread->stage_rank == schedule->stage_rank, "stages moved in the round trip");
  }
  return 0;
}
