// Errors cross the plugin boundary as values, never as exceptions.
#ifndef TITAN_STATUS_H_
#define TITAN_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TITAN_CONCAT_INNER_(a, b) a##b
#define TITAN_CONCAT_(a, b) TITAN_CONCAT_INNER_(a, b)

#define TITAN_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status titan_status_ = (expr);         \
    if (!titan_status_.ok()) return titan_status_; \
  } while (0)

#define TITAN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

#define TITAN_ASSIGN_OR_RETURN(lhs, expr) \
  TITAN_ASSIGN_OR_RETURN_IMPL_(TITAN_CONCAT_(titan_statusor_, __LINE__), lhs, expr)

#endif  // TITAN_STATUS_H_
