// The certificate (docs/decision.md, Rotation budget): Clopper-Pearson bounds,
// the zero-failure floors, and the threshold scan.
#include "common/decision/stopping.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace mesa_anyjev::decision {
namespace {

TEST_CASE("cp_upper special cases and floors", "[decision]") {
  CHECK(CpUpper(5, 5) == 1.0);
  CHECK(CpUpper(0, 0) == 1.0);
  CHECK(CpUpper(0, 24) == Approx(0.117346).margin(1e-6));
  CHECK(CpUpper(0, 100) == Approx(0.029513).margin(1e-6));
  CHECK(CpUpper(0, 300) == Approx(0.009936).margin(1e-6));
  CHECK(CpUpper(0, 600) == Approx(0.004980).margin(1e-6));
  for (int n : {24, 100, 300, 600}) {
    CHECK(CpUpper(0, n) == Approx(1 - std::pow(0.05, 1.0 / n)).epsilon(1e-12));
  }
  CHECK(CpUpper(1, 300) == Approx(0.015715).margin(1e-6));
  CHECK(CpUpper(2, 300) == Approx(0.020836).margin(1e-6));
  // 1% needs n >= 299, 5% needs n >= 59.
  CHECK(CpUpper(0, 299) <= 0.01);
  CHECK(CpUpper(0, 298) > 0.01);
  CHECK(CpUpper(0, 59) <= 0.05);
  CHECK(CpUpper(0, 58) > 0.05);
}

TEST_CASE("log margin and stop step", "[decision]") {
  CHECK(LogMargin({0.5, 0.25, 0.25}) == Approx(std::log(2.0)));
  CHECK(std::isinf(LogMargin({1.0})));
  CHECK(StopStep({9, 9, 9, 9}, 8.5, 2) == 2);
  CHECK(StopStep({1, 1, 9, 9}, 8.5, 2) == 3);
  CHECK(StopStep({1, 1, 1, 1}, 8.5, 2) == 4);
}

TEST_CASE("the first certified threshold of the grid", "[decision]") {
  // 300 states whose margin is 5 from the first shift on and whose winner
  // never changes: tau = 0 already has no disagreement.
  std::vector<std::vector<double>> margins(300, std::vector<double>(4, 5.0));
  std::vector<std::vector<int>> winners(300, std::vector<int>(4, 1));
  StopCertificate cert = ChooseThreshold(margins, winners);
  REQUIRE(cert.threshold.has_value());
  CHECK(*cert.threshold == 0.0);
  CHECK(cert.mean_shifts == 2.0);
  // One state changes its mind after shift 2 while its margin is 5: only
  // a tau above 5 avoids it, and one disagreement is too many for 1% at
  // n = 300.
  winners[0] = {0, 0, 1, 1};
  cert = ChooseThreshold(margins, winners);
  REQUIRE(cert.threshold.has_value());
  CHECK(*cert.threshold == 5.25);
  CHECK(cert.mean_shifts == 4.0);
  // Too few states to certify 1% at all.
  margins.resize(100);
  winners.resize(100);
  CHECK(!ChooseThreshold(margins, winners).threshold.has_value());
}

}  // namespace
}  // namespace mesa_anyjev::decision
