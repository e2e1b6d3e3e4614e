// Hand-written SVG plots of a bench cell: the reliability diagram (the 15
// equal-mass bins the ECE reads: mean confidence against accuracy, with the
// diagonal) and the risk-coverage curve (running error rate against the
// share answered, with the 5% and 10% risk lines the coverage columns read);
// and of a bench compare cell, p_a against p_b.
#pragma once

#include <string>
#include <vector>

#include "common/eval/metrics.h"

namespace mesa_anyjev::bench {

std::string ReliabilitySvg(const std::vector<eval::ReliabilityBin>& bins,
                           const std::string& title);
std::string RiskCoverageSvg(const std::vector<eval::RiskPoint>& curve,
                            const std::string& title);
// One point per state (a noul: p of Yes) or per state and option (a
// choice: every option's probability), model a's on x and b's on y, over
// the diagonal where two models that agree exactly would put every point.
std::string AgreementSvg(const eval::ProbRows& a, const eval::ProbRows& b,
                         bool noul, const std::string& title,
                         const std::string& a_label,
                         const std::string& b_label);

}  // namespace mesa_anyjev::bench
