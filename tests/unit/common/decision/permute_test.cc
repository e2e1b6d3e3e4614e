// Shift orders and the marginal (docs/decision.md, L0: shifts and priors,
// Rotation budget): cyclic
// shifts, spread order, canonical order, and log-mean's exact cancellation
// of an additive position bias.
#include "common/decision/permute.h"

#include <catch2/catch.hpp>
#include <cmath>

#include "common/decision/contextual.h"

namespace mesa_anyjev::decision {
namespace {

using Perms = std::vector<std::vector<int>>;

TEST_CASE("cyclic shifts", "[decision]") {
  CHECK(CyclicShifts(4) ==
        Perms{{0, 1, 2, 3}, {1, 2, 3, 0}, {2, 3, 0, 1}, {3, 0, 1, 2}});
  CHECK(CyclicShifts(4, 2) == Perms{{0, 1, 2, 3}, {1, 2, 3, 0}});
  CHECK(CyclicShifts(4, 0) == Perms{{0, 1, 2, 3}});
  CHECK(CyclicShifts(3, 9).size() == 3);
}

TEST_CASE("spread order", "[decision]") {
  CHECK(SpreadOrder(18) == std::vector<int>{0, 9, 4, 13, 2, 6, 11, 15, 1, 3, 5,
                                            7, 10, 12, 14, 16, 8, 17});
  CHECK(SpreadOrder(6) == std::vector<int>{0, 3, 1, 4, 2, 5});
  CHECK(SpreadOrder(20) == std::vector<int>{0,  10, 5, 15, 2,  7,  12,
                                            17, 1,  3, 6,  8,  11, 13,
                                            16, 18, 4, 9,  14, 19});
  CHECK(SpreadOrder(2) == std::vector<int>{0, 1});
  CHECK(SpreadOrder(3) == std::vector<int>{0, 1, 2});
  CHECK(SpreadOrder(4) == std::vector<int>{0, 2, 1, 3});
  CHECK(SpreadOrder(5) == std::vector<int>{0, 2, 1, 3, 4});
  CHECK(SpreadOrder(8) == std::vector<int>{0, 4, 2, 6, 1, 3, 5, 7});
  CHECK(SpreadOrder(10) == std::vector<int>{0, 5, 2, 7, 1, 3, 6, 8, 4, 9});
  for (int k = 1; k <= 26; ++k) {
    std::vector<int> order = SpreadOrder(k);
    std::sort(order.begin(), order.end());
    for (int i = 0; i < k; ++i) CHECK(order[i] == i);
  }
}

TEST_CASE("canonical order sorts by code point", "[decision]") {
  CHECK(CanonicalOrder({"b", "A", "a"}) == std::vector<int>{1, 2, 0});
  CHECK(CanonicalOrder({"a", "b", "A"}) == std::vector<int>{2, 0, 1});
}

// Label logits c_o + b_pos for every shift, by position.
Matrix Readouts(const std::vector<double>& c, const std::vector<double>& b,
                const Perms& perms) {
  Matrix p(perms.size(), c.size());
  for (size_t s = 0; s < perms.size(); ++s) {
    std::vector<double> z;
    for (size_t j = 0; j < c.size(); ++j) z.push_back(c[perms[s][j]] + b[j]);
    const std::vector<double> soft = Softmax(z);
    for (size_t j = 0; j < c.size(); ++j) p(s, j) = soft[j];
  }
  return p;
}

TEST_CASE("log-mean cancels an additive position bias", "[decision]") {
  const std::vector<double> c = {0.3, -1.2, 2.0, 0.0, 0.7};
  const std::vector<double> want = Softmax(c);
  for (const std::vector<double>& b : {std::vector<double>{0, 0, 0, 0, 0},
                                       {5.0, 1.0, -2.0, 0.5, 3.0},
                                       {-9.0, 0, 0, 0, 9.0}}) {
    const Perms perms = CyclicShifts(5);
    const std::vector<double> got =
        Marginalize(Readouts(c, b, perms), perms, Combine::kLogMean);
    for (size_t o = 0; o < c.size(); ++o)
      CHECK(got[o] == Approx(want[o]).epsilon(1e-12));
  }
  // The arithmetic mean does not cancel it.
  const Perms perms = CyclicShifts(5);
  const std::vector<double> mean = Marginalize(
      Readouts(c, {5.0, 1.0, -2.0, 0.5, 3.0}, perms), perms, Combine::kMean);
  CHECK(std::abs(mean[2] - want[2]) > 1e-3);
}

TEST_CASE("flip rate across shifts", "[decision]") {
  const Perms perms = CyclicShifts(3);
  // A position-0 winner at every shift: the winning option moves.
  Matrix p(3, 3);
  p << 0.8, 0.1, 0.1, 0.8, 0.1, 0.1, 0.8, 0.1, 0.1;
  CHECK(FlipRateAcrossPerms(p, perms) == 1.0);
  Matrix q(3, 3);
  q << 0.8, 0.1, 0.1, 0.1, 0.1, 0.8, 0.1, 0.8, 0.1;
  CHECK(FlipRateAcrossPerms(q, perms) == 0.0);
}

TEST_CASE("priors clip at 1e-8 and renormalise", "[decision]") {
  Matrix mean(1, 3);
  mean << 0.5, 0.5, 0.0;
  const Matrix prior = BatchPrior(mean);
  CHECK(prior(0, 2) == Approx(1e-8 / (1 + 1e-8)));
  Matrix p(1, 3);
  p << 0.2, 0.3, 0.5;
  Matrix flat(1, 3);
  flat << 1.0 / 3, 1.0 / 3, 1.0 / 3;
  const Matrix same = ApplyContextual(p, flat);
  for (int j = 0; j < 3; ++j) CHECK(same(0, j) == Approx(p(0, j)));
  Matrix probes(3, 2);
  probes << 0.9, 0.1, 0.7, 0.3, 0.8, 0.2;
  const Eigen::RowVectorXd cf = ContentFreePrior(probes);
  CHECK(cf(0) == Approx(0.8));
}

}  // namespace
}  // namespace mesa_anyjev::decision
