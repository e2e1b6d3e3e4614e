// The enum <-> name tables of server/: one table per enum.
#include <catch2/catch.hpp>
#include <string>

#include "server/metrics/metrics.h"
#include "server/model/attention_buckets.h"
#include "server/model/cpu_gemm.h"
#include "tests/unit/enum_names_check.h"

namespace mesa_anyjev {
namespace {

using testing::CheckNames;
using testing::CheckRoundTrip;
using testing::ConfigChoices;
using testing::NamesOf;
using testing::ParseError;

TEST_CASE("Attention names round-trip", "[enum_names]") {
  using model::Attention;
  const testing::ExpectedNames<Attention> expected = {
      {Attention::kEager, "eager"}, {Attention::kSdpa, "sdpa"}};
  CheckRoundTrip(expected, model::AttentionName, model::ParseAttention);
  CHECK(ConfigChoices("model.attention") == NamesOf(expected));
  CHECK(ParseError(model::ParseAttention, "flash") ==
        "model.attention: 'flash' is not eager or sdpa");
}

TEST_CASE("AttentionRoute names are distinct", "[enum_names]") {
  using model::AttentionRoute;
  CheckNames<AttentionRoute>({{AttentionRoute::kEager, "eager"},
                              {AttentionRoute::kSdpa, "sdpa"},
                              {AttentionRoute::kCpuFlash, "cpu flash"},
                              {AttentionRoute::kVarlen, "varlen"},
                              {AttentionRoute::kCascade, "cascade"}},
                             model::AttentionRouteName);
}

TEST_CASE("CpuGemm names round-trip", "[enum_names]") {
  using model::CpuGemm;
  const testing::ExpectedNames<CpuGemm> expected = {
      {CpuGemm::kOneDnn, "onednn"},
      {CpuGemm::kAten, "aten"},
      {CpuGemm::kAuto, "auto"}};
  CheckRoundTrip(expected, model::CpuGemmName, model::ParseCpuGemm);
  CHECK(ConfigChoices("model.cpu_gemm") == NamesOf(expected));
  CHECK(ParseError(model::ParseCpuGemm, "mkl") ==
        "model.cpu_gemm: 'mkl' is not auto, onednn or aten");
}

TEST_CASE("Method names are distinct", "[enum_names]") {
  using metrics::Method;
  const testing::ExpectedNames<Method> expected = {
      {Method::kGetModelInfo, "GetModelInfo"},
      {Method::kTokenize, "Tokenize"},
      {Method::kLogprobs, "Logprobs"},
      {Method::kHiddenStates, "HiddenStates"},
      {Method::kDecide, "Decide"},
      {Method::kFit, "Fit"},
      {Method::kExportArtifacts, "ExportArtifacts"},
      {Method::kLoadArtifacts, "LoadArtifacts"},
      {Method::kResetPriors, "ResetPriors"},
      {Method::kListQuestions, "ListQuestions"},
      {Method::kListBundles, "Bundles.List"},
      {Method::kGetBundle, "Bundles.Get"},
      {Method::kPutBundle, "Bundles.Put"},
      {Method::kPromoteBundle, "Bundles.Promote"},
      {Method::kRollbackBundle, "Bundles.Rollback"},
      {Method::kPutAgreement, "Bundles.PutAgreement"}};
  CheckNames(expected, metrics::MethodName);
  CHECK(expected.size() == static_cast<size_t>(Method::kCount));
  CHECK(std::string(metrics::MethodName(Method::kCount)) == "unknown");
}

}  // namespace
}  // namespace mesa_anyjev
