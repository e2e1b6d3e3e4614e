// RETURN_IF_ERROR / ASSIGN_OR_RETURN: Debian 12's Abseil (20220623) has
// absl::Status but not its status macros, so the project keeps its own here.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MESA_STATUS_CONCAT_INNER_(a, b) a##b
#define MESA_STATUS_CONCAT_(a, b) MESA_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)             \
  do {                                    \
    ::absl::Status mesa_status_ = (expr); \
    if (!mesa_status_.ok()) {             \
      return mesa_status_;                \
    }                                     \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr)                                          \
  MESA_ASSIGN_OR_RETURN_IMPL_(MESA_STATUS_CONCAT_(mesa_statusor_, __LINE__), \
                              lhs, expr)

#define MESA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) {                                  \
    return std::move(statusor).status();                 \
  }                                                      \
  lhs = std::move(statusor).value()
