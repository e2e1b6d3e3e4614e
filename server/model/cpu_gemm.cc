#include "server/model/cpu_gemm.h"

#include "absl/strings/str_cat.h"
#include "common/util/enum_names.h"

namespace mesa_anyjev::model {
namespace {

// In the order model.cpu_gemm's message lists them.
constexpr util::EnumName<CpuGemm> kCpuGemmNames[] = {
    {CpuGemm::kAuto, "auto"},
    {CpuGemm::kOneDnn, "onednn"},
    {CpuGemm::kAten, "aten"}};
static_assert(util::NamesEvery(kCpuGemmNames, CpuGemm::kAuto));

}  // namespace

const char* CpuGemmName(CpuGemm gemm) {
  return util::NameIn(kCpuGemmNames, gemm, "aten");
}

absl::StatusOr<CpuGemm> ParseCpuGemm(const std::string& name) {
  if (auto gemm = util::ValueIn(kCpuGemmNames, name)) return *gemm;
  return absl::InvalidArgumentError(absl::StrCat(
      "model.cpu_gemm: '", name, "' is not ", util::NamesIn(kCpuGemmNames)));
}

}  // namespace mesa_anyjev::model
