// The rotation budget's certified thresholds (docs/decision.md, Rotation
// budget): what CalibrateAdaptive found per question key, read by later
// calls' stop rules. Safe under concurrent callers.
#pragma once

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/decision/stopping.h"

namespace mesa_anyjev::decision {

class StopCertificates {
 public:
  void Put(const std::string& key, StopCertificate certificate) {
    absl::MutexLock lock(&mu_);
    certificates_[key] = std::move(certificate);
  }
  std::optional<StopCertificate> Get(const std::string& key) const {
    absl::MutexLock lock(&mu_);
    const auto it = certificates_.find(key);
    if (it == certificates_.end()) return std::nullopt;
    return it->second;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, StopCertificate> certificates_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace mesa_anyjev::decision
