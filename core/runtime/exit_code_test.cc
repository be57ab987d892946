#include "core/runtime/exit_code.h"

#include <gtest/gtest.h>

namespace titan {
namespace {

TEST(ExitCode, ByKindOfOutcome) {
  EXPECT_EQ(ExitCodeOf(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeOf(absl::CancelledError("stopped by SIGTERM after step 3")), 3);
  for (const absl::Status& usage :
       {absl::InvalidArgumentError("x"), absl::NotFoundError("x"),
        absl::FailedPreconditionError("x"), absl::UnimplementedError("x"),
        absl::OutOfRangeError("x"), absl::AlreadyExistsError("x")}) {
    EXPECT_EQ(ExitCodeOf(usage), 2) << usage;
  }
  for (const absl::Status& failure :
       {absl::DeadlineExceededError("collective timeout"), absl::InternalError("x"),
        absl::AbortedError("communicator unusable"), absl::DataLossError("x"),
        absl::ResourceExhaustedError("x"), absl::UnavailableError("x"), absl::UnknownError("x"),
        absl::PermissionDeniedError("x")}) {
    EXPECT_EQ(ExitCodeOf(failure), 1) << failure;
  }
}

}  // namespace
}  // namespace titan
