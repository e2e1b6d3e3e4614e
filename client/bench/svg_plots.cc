// SVG plots (see svg_plots.h). A 360 x 360 canvas: a 260 x 260 unit square
// at (60, 40), y up.
#include "client/bench/svg_plots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace mesa_anyjev::bench {
namespace {

constexpr double kX0 = 60, kY0 = 300, kSide = 260;

double X(double u) { return kX0 + kSide * std::clamp(u, 0.0, 1.0); }
double Y(double v) { return kY0 - kSide * std::clamp(v, 0.0, 1.0); }

std::string Escape(const std::string& text) {
  return absl::StrReplaceAll(
      text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// Frame, ticks at 0, 0.5, 1, axis labels and the title.
std::string Axes(const std::string& title, const std::string& x_label,
                 const std::string& y_label) {
  std::string svg = absl::StrCat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"360\" "
      "height=\"360\" viewBox=\"0 0 360 360\" font-family=\"sans-serif\" "
      "font-size=\"11\">\n<rect width=\"360\" height=\"360\" "
      "fill=\"white\"/>\n",
      absl::StrFormat("<text x=\"180\" y=\"22\" text-anchor=\"middle\" "
                      "font-size=\"12\">%s</text>\n",
                      Escape(title)),
      absl::StrFormat("<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" "
                      "fill=\"none\" stroke=\"black\"/>\n",
                      kX0, kY0 - kSide, kSide, kSide));
  for (double t : {0.0, 0.5, 1.0}) {
    absl::StrAppend(
        &svg,
        absl::StrFormat("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">"
                        "%g</text>\n",
                        X(t), kY0 + 16, t),
        absl::StrFormat("<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%g"
                        "</text>\n",
                        kX0 - 6, Y(t) + 4, t));
  }
  absl::StrAppend(
      &svg,
      absl::StrFormat("<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s"
                      "</text>\n",
                      kX0 + kSide / 2, kY0 + 34, Escape(x_label)),
      absl::StrFormat("<text x=\"16\" y=\"%g\" text-anchor=\"middle\" "
                      "transform=\"rotate(-90 16 %g)\">%s</text>\n",
                      kY0 - kSide / 2, kY0 - kSide / 2, Escape(y_label)));
  return svg;
}

}  // namespace

std::string ReliabilitySvg(const std::vector<eval::ReliabilityBin>& bins,
                           const std::string& title) {
  std::string svg =
      Axes(title, "mean confidence (15 equal-mass bins)", "accuracy");
  absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" "
                                        "y2=\"%g\" stroke=\"#999\" "
                                        "stroke-dasharray=\"4 3\"/>\n",
                                        X(0), Y(0), X(1), Y(1)));
  std::string points;
  for (const auto& bin : bins) {
    absl::StrAppend(&points, absl::StrFormat("%.2f,%.2f ", X(bin.confidence),
                                             Y(bin.accuracy)));
  }
  if (!bins.empty()) {
    absl::StrAppend(&svg,
                    "<polyline fill=\"none\" stroke=\"#1f77b4\" "
                    "stroke-width=\"1.5\" points=\"",
                    points, "\"/>\n");
  }
  for (const auto& bin : bins) {
    absl::StrAppend(
        &svg, absl::StrFormat("<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" "
                              "fill=\"#1f77b4\"><title>n=%d conf=%.3f "
                              "acc=%.3f</title></circle>\n",
                              X(bin.confidence), Y(bin.accuracy), bin.count,
                              bin.confidence, bin.accuracy));
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

std::string RiskCoverageSvg(const std::vector<eval::RiskPoint>& curve,
                            const std::string& title) {
  std::string svg = Axes(title, "coverage (answered, most confident first)",
                         "risk (error rate of the answered)");
  for (double risk : {0.05, 0.10}) {
    absl::StrAppend(
        &svg, absl::StrFormat("<line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" "
                              "y2=\"%.2f\" stroke=\"#d62728\" "
                              "stroke-dasharray=\"4 3\"/>\n"
                              "<text x=\"%g\" y=\"%.2f\" fill=\"#d62728\" "
                              "text-anchor=\"end\">%g%%</text>\n",
                              X(0), Y(risk), X(1), Y(risk), X(1) - 2,
                              Y(risk) - 3, risk * 100));
  }
  std::string points;
  for (const auto& p : curve) {
    absl::StrAppend(&points,
                    absl::StrFormat("%.2f,%.2f ", X(p.coverage), Y(p.risk)));
  }
  absl::StrAppend(&svg,
                  "<polyline fill=\"none\" stroke=\"#1f77b4\" "
                  "stroke-width=\"1.5\" points=\"",
                  points, "\"/>\n</svg>\n");
  return svg;
}

std::string AgreementSvg(const eval::ProbRows& a, const eval::ProbRows& b,
                         bool noul, const std::string& title,
                         const std::string& a_label,
                         const std::string& b_label) {
  std::string svg = Axes(title, a_label, b_label);
  absl::StrAppend(&svg, absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" "
                                        "y2=\"%g\" stroke=\"#999\" "
                                        "stroke-dasharray=\"4 3\"/>\n",
                                        X(0), Y(0), X(1), Y(1)));
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const size_t width = noul ? 1 : std::min(a[i].size(), b[i].size());
    for (size_t k = 0; k < width && k < a[i].size() && k < b[i].size(); ++k) {
      absl::StrAppend(
          &svg,
          absl::StrFormat("<circle cx=\"%.2f\" cy=\"%.2f\" r=\"2.5\" "
                          "fill=\"#1f77b4\" fill-opacity=\"0.5\">"
                          "<title>state %d option %d: %.3f, %.3f"
                          "</title></circle>\n",
                          X(a[i][k]), Y(b[i][k]), i, k, a[i][k], b[i][k]));
    }
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace mesa_anyjev::bench
