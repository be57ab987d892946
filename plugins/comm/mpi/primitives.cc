#include "plugins/comm/mpi/primitives.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"

namespace titan::mpi {

absl::StatusOr<MPI_Datatype> ReductionType(DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32:
    case DType::kBF16:
      return MPI_FLOAT;
    case DType::kI32:
    case DType::kI64:
      if (op == ReduceOp::kAvg) {
        return absl::InvalidArgumentError(
            absl::StrCat("an average of ", DTypeName(dtype), " values is not an integer; use f32"));
      }
      return dtype == DType::kI32 ? MPI_INT32_T : MPI_INT64_T;
    default:
      return absl::InvalidArgumentError(absl::StrCat("cannot reduce ", DTypeName(dtype),
                                                     " values; the mpi backend reduces f32, bf16, "
                                                     "i32 and i64"));
  }
}

MPI_Op ReductionOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      break;
  }
  return MPI_SUM;
}

std::vector<float> Bf16ToF32(const TensorView& view) {
  const uint16_t* in = view.data_as<const uint16_t>();
  std::vector<float> out(static_cast<size_t>(view.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(&out[i], &bits, sizeof(bits));
  }
  return out;
}

void F32ToBf16(const std::vector<float>& values, TensorView& view) {
  uint16_t* out = view.data_as<uint16_t>();
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &values[i], sizeof(bits));
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      out[i] = static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN stays a quiet NaN
      continue;
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);
    out[i] = static_cast<uint16_t>(bits >> 16);
  }
}

absl::Status MpiStatus(int code) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return absl::InternalError(
      absl::StrCat("MPI error ", code, ": ", absl::string_view(text, static_cast<size_t>(length))));
}

WaitResult WaitUntil(MPI_Request& request, std::chrono::steady_clock::time_point deadline,
                     int& error_code, const std::function<void()>& between_polls) {
  // Spin briefly for small fast collectives, then back off so a waiting rank leaves the
  // cores to the ones still computing.
  auto pause = std::chrono::microseconds(1);
  for (int polls = 0;; ++polls) {
    int done = 0;
    MPI_Status status;
    error_code = MPI_Test(&request, &done, &status);
    if (error_code != MPI_SUCCESS) return WaitResult::kFailed;
    if (done) return WaitResult::kDone;
    if (std::chrono::steady_clock::now() >= deadline) return WaitResult::kTimedOut;
    if (between_polls) between_polls();
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
}

// MPI_Init waits for every rank of the job to start, for ever if one never does: it runs on
// a thread of its own so the wait is bounded by the init timeout.
absl::Status InitializeMpi(std::chrono::seconds timeout) {
  struct Result {
    int code = MPI_SUCCESS;
    int provided = MPI_THREAD_SINGLE;
  };
  auto result = std::make_shared<std::promise<Result>>();
  std::future<Result> done = result->get_future();
  std::thread([result] {
    Result r;
    r.code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &r.provided);
    result->set_value(r);
  }).detach();
  if (done.wait_for(timeout) != std::future_status::ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("MPI_Init did not complete within ", timeout.count(),
                     "s: not every rank of the job started (comm.init_timeout_seconds)"));
  }
  Result r = done.get();
  absl::Status init = MpiStatus(r.code);
  if (!init.ok()) return absl::InternalError(absl::StrCat("MPI_Init_thread: ", init.message()));
  if (r.provided < MPI_THREAD_MULTIPLE) {
    return absl::FailedPreconditionError(
        "MPI_Init_thread: this MPI library does not provide MPI_THREAD_MULTIPLE, which "
        "titan's communication threads need");
  }
  return absl::OkStatus();
}

std::shared_ptr<const std::vector<int>> WorldRanks(MPI_Comm comm, int size) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> local(static_cast<size_t>(size)), global(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) local[static_cast<size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, local.data(), world, global.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return std::make_shared<const std::vector<int>>(std::move(global));
}

}  // namespace titan::mpi
