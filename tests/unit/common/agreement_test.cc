// Two models' agreement (common/eval/agreement.h). The numbers are checked
// against scipy and numpy in tests/e2e/test_eval_metrics.py; here the
// formulas' fixed points and the verdict's edges.
#include "common/eval/agreement.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace mesa_anyjev::eval {
namespace {

TEST_CASE("Wilson: no flips in n gives [0, z^2 / (n + z^2)]", "[agreement]") {
  for (const int64_t n : {1, 35, 40, 285}) {
    const Interval w = WilsonInterval(0, n);
    CHECK(w.lo == 0.0);
    const double z2 = kZ95 * kZ95;
    CHECK(w.hi == Approx(z2 / (static_cast<double>(n) + z2)).epsilon(1e-12));
  }
  // Symmetric: k of n against n - k of n.
  const Interval a = WilsonInterval(3, 40);
  const Interval b = WilsonInterval(37, 40);
  CHECK(a.lo == Approx(1.0 - b.hi).epsilon(1e-12));
  CHECK(a.hi == Approx(1.0 - b.lo).epsilon(1e-12));
}

TEST_CASE("Percentile interpolates linearly between order statistics",
          "[agreement]") {
  CHECK(Percentile({3.0, 1.0, 2.0}, 50) == 2.0);
  CHECK(Percentile({1.0, 2.0}, 25) == 1.25);
  CHECK(Percentile({5.0}, 97.5) == 5.0);
  CHECK(Percentile({1.0, 2.0, 3.0, 4.0}, 100) == 4.0);
}

TEST_CASE("TotalVariation is |p_a - p_b| of Yes for a noul", "[agreement]") {
  CHECK(TotalVariation({0.7, 0.3}, {0.4, 0.6}) == Approx(0.3));
  CHECK(TotalVariation({0.5, 0.5}, {0.5, 0.25, 0.25}) == Approx(0.25));
}

TEST_CASE("One model against itself: no flips, every difference 0",
          "[agreement]") {
  const ProbRows p = {{0.9, 0.1}, {0.2, 0.8}, {0.6, 0.4}, {0.3, 0.7}};
  const std::vector<int> y = {0, 1, 1, 1};
  auto got = CompareModels(p, p, y, {.resamples = 100, .seed = 3});
  REQUIRE(got.ok());
  CHECK(got->flips == 0);
  CHECK(got->mean_abs_dp == 0.0);
  CHECK(got->acc.interval.lo == 0.0);
  CHECK(got->acc.interval.hi == 0.0);
  CHECK(got->a.acc == 0.75);
  CHECK(Agrees(*got, {.max_flip = 0.9, .max_acc_diff = 0.0}));
  // Four states cannot bound the flip rate under 0.10.
  CHECK_FALSE(Agrees(*got, {}));
}

TEST_CASE("Models that answer oppositely flip every state and disagree",
          "[agreement]") {
  ProbRows a, b;
  std::vector<int> y;
  for (int i = 0; i < 200; ++i) {
    const double p = 0.6 + 0.3 * (i % 3) / 2.0;
    a.push_back({p, 1 - p});
    b.push_back({1 - p, p});
    y.push_back(i % 4 == 0 ? 1 : 0);
  }
  auto got = CompareModels(a, b, y, {.resamples = 200, .seed = 0});
  REQUIRE(got.ok());
  CHECK(got->flips == 200);
  CHECK(got->flip_interval.lo > 0.9);
  CHECK(got->acc.value == Approx(0.5));  // 0.75 against 0.25
  CHECK(got->acc.interval.lo > 0.3);
  CHECK_FALSE(Agrees(*got, {}));
}

TEST_CASE("CompareModels refuses what it cannot compare, naming it",
          "[agreement]") {
  const ProbRows p = {{0.5, 0.5}, {0.1, 0.9}};
  CHECK(CompareModels(p, {{0.5, 0.5}}, {0, 1}).status().message() ==
        "model a decided 2 states, model b 1");
  CHECK(CompareModels(p, p, {0, 2}).status().message().find("model a: ") == 0);
  CHECK(CompareModels(p, p, {0, 1}, {.resamples = 0, .seed = 0})
            .status()
            .message() == "resamples: 0 is below 1");
}

}  // namespace
}  // namespace mesa_anyjev::eval
