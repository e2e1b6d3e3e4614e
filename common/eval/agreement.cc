// Two models' agreement (see agreement.h).
#include "common/eval/agreement.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/decision/legacy_random_state.h"

namespace mesa_anyjev::eval {
namespace {

// What one model's rows say per item, so a resample's figures are sums.
struct PerItem {
  std::vector<double> confidence;  // top-1 probability
  std::vector<char> right;         // top-1 == label
  std::vector<double> loss;        // -log max(p_y, 1e-12)
  std::vector<int> answer;
};

absl::StatusOr<PerItem> ItemsOf(const ProbRows& rows,
                                const std::vector<int>& labels,
                                const char* which) {
  // Summarize validates the rows and labels (and pads them) the same way.
  if (absl::StatusOr<Summary> valid = Summarize(rows, labels); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", which, ": ", valid.status().message()));
  }
  PerItem out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    const int top = static_cast<int>(std::max_element(row.begin(), row.end()) -
                                     row.begin());
    const size_t y = static_cast<size_t>(labels[i]);
    const double p_y = y < row.size() ? row[y] : 0.0;  // padding is 0
    out.confidence.push_back(row[top]);
    out.right.push_back(top == labels[i] ? 1 : 0);
    out.loss.push_back(-std::log(std::max(p_y, kNllClip)));
    out.answer.push_back(top);
  }
  return out;
}

ModelFigures FiguresOf(const PerItem& items, const std::vector<int>& pick) {
  ModelFigures out;
  std::vector<double> confidence;
  std::vector<char> right;
  confidence.reserve(pick.size());
  right.reserve(pick.size());
  double hits = 0.0, loss = 0.0;
  for (const int i : pick) {
    hits += items.right[i];
    loss += items.loss[i];
    confidence.push_back(items.confidence[i]);
    right.push_back(items.right[i]);
  }
  const double n = static_cast<double>(pick.size());
  out.acc = hits / n;
  out.nll = loss / n;
  out.ece = EqualMassEce(confidence, right, kEceBins);
  return out;
}

// numpy's _lerp: a + (b - a) t, computed from b for t >= 0.5.
double Lerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

}  // namespace

Interval WilsonInterval(int64_t k, int64_t n, double z) {
  const double dn = static_cast<double>(n);
  const double p = static_cast<double>(k) / dn;
  const double z2 = z * z;
  const double denom = 1.0 + z2 / dn;
  const double center = (p + z2 / (2.0 * dn)) / denom;
  const double half =
      z * std::sqrt(p * (1.0 - p) / dn + z2 / (4.0 * dn * dn)) / denom;
  // The bounds are exact at the ends (rounding would leave 1e-17 there).
  return {k == 0 ? 0.0 : std::max(0.0, center - half),
          k == n ? 1.0 : std::min(1.0, center + half)};
}

double Percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  const double quantile = q / 100.0;
  // numpy's virtual index for the linear method (alpha = beta = 1).
  const double virtual_index = n * quantile + (1.0 - quantile) - 1.0;
  const double below = std::floor(virtual_index);
  const double gamma = virtual_index - below;
  const auto clamp = [&](double index) {
    return values[static_cast<size_t>(std::clamp(index, 0.0, n - 1.0))];
  };
  return Lerp(clamp(below), clamp(below + 1.0), gamma);
}

double TotalVariation(const std::vector<double>& a,
                      const std::vector<double>& b) {
  double sum = 0.0;
  for (size_t k = 0; k < std::max(a.size(), b.size()); ++k) {
    sum += std::abs((k < a.size() ? a[k] : 0.0) - (k < b.size() ? b[k] : 0.0));
  }
  return 0.5 * sum;
}

absl::StatusOr<Agreement> CompareModels(const ProbRows& a, const ProbRows& b,
                                        const std::vector<int>& labels,
                                        const BootstrapOptions& options) {
  if (a.size() != b.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model a decided ", a.size(), " states, model b ", b.size()));
  }
  if (options.resamples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("resamples: ", options.resamples, " is below 1"));
  }
  auto items_a = ItemsOf(a, labels, "a");
  if (!items_a.ok()) return items_a.status();
  auto items_b = ItemsOf(b, labels, "b");
  if (!items_b.ok()) return items_b.status();

  Agreement out;
  out.n = static_cast<int64_t>(a.size());
  out.bootstrap = options;
  std::vector<double> dp;
  for (size_t i = 0; i < a.size(); ++i) {
    if (items_a->answer[i] != items_b->answer[i]) ++out.flips;
    dp.push_back(TotalVariation(a[i], b[i]));
  }
  out.flip_rate = static_cast<double>(out.flips) / static_cast<double>(out.n);
  out.flip_interval = WilsonInterval(out.flips, out.n);
  double sum = 0.0;
  for (const double d : dp) sum += d;
  out.mean_abs_dp = sum / static_cast<double>(out.n);
  out.p95_abs_dp = Percentile(dp, 95.0);

  std::vector<int> all(a.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  out.a = FiguresOf(*items_a, all);
  out.b = FiguresOf(*items_b, all);
  out.acc.value = out.a.acc - out.b.acc;
  out.nll.value = out.a.nll - out.b.nll;
  out.ece.value = out.a.ece - out.b.ece;

  // Resample r is draws [r n, (r + 1) n) of one randint(0, n) stream.
  decision::LegacyRandomState random(options.seed);
  std::vector<double> acc, nll, ece;
  std::vector<int> pick(a.size());
  for (int32_t r = 0; r < options.resamples; ++r) {
    for (int& i : pick) {
      i = static_cast<int>(random.Interval(static_cast<uint64_t>(out.n - 1)));
    }
    const ModelFigures fa = FiguresOf(*items_a, pick);
    const ModelFigures fb = FiguresOf(*items_b, pick);
    acc.push_back(fa.acc - fb.acc);
    nll.push_back(fa.nll - fb.nll);
    ece.push_back(fa.ece - fb.ece);
  }
  for (auto [diff, draws] :
       {std::pair{&out.acc, &acc}, std::pair{&out.nll, &nll},
        std::pair{&out.ece, &ece}}) {
    diff->interval = {Percentile(*draws, 2.5), Percentile(*draws, 97.5)};
  }
  return out;
}

bool Agrees(const Agreement& agreement, const Tolerances& tolerances) {
  return agreement.flip_interval.hi <= tolerances.max_flip &&
         agreement.acc.interval.lo >= -tolerances.max_acc_diff &&
         agreement.acc.interval.hi <= tolerances.max_acc_diff;
}

}  // namespace mesa_anyjev::eval
