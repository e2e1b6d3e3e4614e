// L1's temperature (docs/decision.md, L1: temperature): range, edge cases,
// argmax preservation and the artifact JSON.
#include "common/decision/temperature_scaler.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace mesa_anyjev::decision {
namespace {

Matrix Rows(std::initializer_list<std::vector<double>> rows) {
  Matrix m(rows.size(), rows.begin()->size());
  int i = 0;
  for (const auto& row : rows) {
    for (size_t j = 0; j < row.size(); ++j) m(i, j) = row[j];
    ++i;
  }
  return m;
}

TEST_CASE("temperature edge cases", "[decision]") {
  CHECK(TemperatureScaler::Fit(Rows({{0.5, 0.5}}), {0}).temperature ==
        Approx(std::exp(3.0)).epsilon(1e-9));
  CHECK(TemperatureScaler::Fit(Rows({{0.7, 0.3}}), {0}).temperature ==
        Approx(std::exp(-3.0)).epsilon(1e-9));
  CHECK(TemperatureScaler::Fit(Rows({{0.7, 0.3}}), {1}).temperature ==
        Approx(std::exp(3.0)).epsilon(1e-9));
  const double t =
      TemperatureScaler::Fit(
          Rows({{0.75, 0.25}, {0.75, 0.25}, {0.75, 0.25}, {0.25, 0.75}}),
          {0, 0, 0, 0})
          .temperature;
  CHECK(t == Approx(1.0).margin(1e-6));
}

TEST_CASE("L1 never changes the argmax", "[decision]") {
  const Matrix probs = Rows({{0.2, 0.5, 0.3},
                             {0.9, 0.05, 0.05},
                             {0.34, 0.33, 0.33},
                             {0.1, 0.1, 0.8}});
  for (double t : {0.05, 0.3, 1.0, 2.5, 20.0}) {
    TemperatureScaler scaler;
    scaler.temperature = t;
    const Matrix out = scaler.Apply(probs);
    for (Eigen::Index i = 0; i < probs.rows(); ++i) {
      Eigen::Index a = 0;
      Eigen::Index b = 0;
      probs.row(i).maxCoeff(&a);
      out.row(i).maxCoeff(&b);
      CHECK(a == b);
      CHECK(out.row(i).sum() == Approx(1.0));
    }
  }
}

TEST_CASE("artifact JSON round trip", "[decision]") {
  TemperatureScaler scaler;
  scaler.temperature = 1.7;
  Matrix prior(2, 2);
  prior << 0.123456789123, 0.876543210877, 0.5, 0.5;
  scaler.prior = prior;
  scaler.prior_method = "batch";
  scaler.prior_strength = 0.75;
  scaler.n_calib = 40;
  const auto json = scaler.ToJson();
  CHECK(json["method"] == "temperature");
  CHECK(json["prior"][0][0].get<double>() == 0.12345679);
  const auto back = TemperatureScaler::FromJson(json);
  REQUIRE(back.ok());
  CHECK(back->temperature == 1.7);
  CHECK(back->prior_method == "batch");
  CHECK(back->n_calib == 40);
  CHECK((*back->prior)(1, 1) == 0.5);
  // A 0.0.2 artifact: temperature only.
  const auto old = TemperatureScaler::FromJson({{"temperature", 2.0}});
  REQUIRE(old.ok());
  CHECK(!old->prior.has_value());
  CHECK(absl::IsInvalidArgument(
      TemperatureScaler::FromJson({{"temperature", -1.0}}).status()));
}

}  // namespace
}  // namespace mesa_anyjev::decision
