// Hand-written SVG plots of a bench cell: the reliability diagram (the 15
// equal-mass bins the ECE reads: mean confidence against accuracy, with the
// diagonal) and the risk-coverage curve (running error rate against the
// share answered, with the 5% and 10% risk lines the coverage columns read).
#pragma once

#include <string>
#include <vector>

#include "common/eval/metrics.h"

namespace mesa_anyjev::bench {

std::string ReliabilitySvg(const std::vector<eval::ReliabilityBin>& bins,
                           const std::string& title);
std::string RiskCoverageSvg(const std::vector<eval::RiskPoint>& curve,
                            const std::string& title);

}  // namespace mesa_anyjev::bench
