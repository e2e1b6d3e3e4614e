#include "common/config/kernel_set.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/config/config_schema.h"

namespace mesa_anyjev::config {
namespace {

constexpr const char* kChoices =
    "aten, fused, or a comma list of add_rms_norm, qk_norm_rope, silu_mul";

struct Named {
  absl::string_view name;
  bool KernelSet::*flag;
};
constexpr Named kKernels[] = {
    {"add_rms_norm", &KernelSet::add_rms_norm},
    {"qk_norm_rope", &KernelSet::qk_norm_rope},
    {"silu_mul", &KernelSet::silu_mul},
};

}  // namespace

std::string KernelSet::ToString() const {
  if (!any()) return "aten";
  std::vector<absl::string_view> names;
  for (const Named& k : kKernels) {
    if (this->*k.flag) names.push_back(k.name);
  }
  if (names.size() == std::size(kKernels)) return "fused";
  return absl::StrJoin(names, ",");
}

absl::StatusOr<KernelSet> ParseKernelSet(absl::string_view text) {
  const absl::string_view whole = absl::StripAsciiWhitespace(text);
  KernelSet set;
  if (whole == "aten") return set;
  if (whole == "fused") {
    for (const Named& k : kKernels) set.*k.flag = true;
    return set;
  }
  if (whole.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("is empty; ", kChoices));
  }
  for (absl::string_view item : absl::StrSplit(whole, ',')) {
    item = absl::StripAsciiWhitespace(item);
    bool known = false;
    for (const Named& k : kKernels) {
      if (item == k.name) {
        set.*k.flag = true;
        known = true;
      }
    }
    if (!known) {
      return absl::InvalidArgumentError(absl::StrCat(
          item.empty() ? "an empty name" : schema::Quote(item), " in ",
          schema::Quote(whole), " is not a kernel; ", kChoices));
    }
  }
  return set;
}

KernelSet ResolveKernelSet(const KernelSet& asked, bool cuda_device,
                           bool kernels_built, std::string* note) {
  if (note != nullptr) note->clear();
  if (!asked.any() || (cuda_device && kernels_built)) return asked;
  if (note != nullptr) {
    *note = absl::StrCat("model.kernels: ", asked.ToString(), " asked for; ",
                         cuda_device
                             ? "this build has no CUDA kernels (cross-compiled)"
                             : "our kernels are CUDA only",
                         ", so the ATen path runs");
  }
  return KernelSet{};
}

}  // namespace mesa_anyjev::config
