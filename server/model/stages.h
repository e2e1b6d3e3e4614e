// Names the stages of a forward pass for libtorch's profiler: the pass
// anatomy (tests/tools/pass_anatomy.h) gives each kernel or operator to the
// innermost stage open when the host launched it. A stage is a user-scope
// RecordFunction named "mesa.<stage>"; with no profiler listening, opening
// one reads a thread-local flag and does nothing else.
#pragma once

#include <ATen/record_function.h>

#include <optional>

namespace mesa_anyjev::model {

// One stage open at a time: Next ends the stage before and opens the next,
// so the forward names its stages one line each; the destructor ends the
// last.
class Stages {
 public:
  Stages() = default;
  explicit Stages(const char* first) { Next(first); }
  Stages(const Stages&) = delete;
  Stages& operator=(const Stages&) = delete;

  void Next(const char* name) {
    open_.reset();
    open_.emplace(at::RecordScope::USER_SCOPE);
    if (open_->isActive()) open_->before(name);
  }
  void End() { open_.reset(); }

 private:
  std::optional<at::RecordFunction> open_;
};

}  // namespace mesa_anyjev::model
