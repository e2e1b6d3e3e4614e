#include "client/ui/progress.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ui/terminal.h"

namespace mesa_anyjev::client::ui {

double Progress::SteadySeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string ShortDuration(double seconds) {
  const int64_t s = std::max<int64_t>(0, std::llround(seconds));
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

Progress::Progress(std::string unit, int total, bool enabled, std::ostream& out,
                   Clock clock)
    : unit_(std::move(unit)),
      total_(total),
      enabled_(enabled),
      out_(out),
      clock_(std::move(clock)),
      start_(clock_()) {}

std::string Progress::Line(const std::string& label, int columns) const {
  constexpr int kBar = 20;
  const bool known = total_ != kUnknownTotal;
  const int total = known ? std::max(total_, done_) : done_;
  const int filled = total > 0 ? kBar * done_ / total : 0;
  std::string line =
      known ? absl::StrCat("[", std::string(static_cast<size_t>(filled), '#'),
                           std::string(static_cast<size_t>(kBar - filled), '.'),
                           "] ", done_, "/", total, " ", unit_)
            : absl::StrCat(done_, " ", unit_);
  const double elapsed = clock_() - start_;
  if (done_ > 0 && elapsed > 0) {
    const double rate = done_ / elapsed;
    // A rate below one a second reads better as seconds per unit.
    absl::StrAppend(&line, rate >= 1
                               ? absl::StrFormat("  %.1f/s", rate)
                               : absl::StrFormat("  %.1fs each", 1 / rate));
    if (done_ < total) {
      absl::StrAppend(&line, "  ETA ", ShortDuration((total - done_) / rate));
    }
  } else if (done_ < total) {
    absl::StrAppend(&line, "  ETA --");
  }
  if (!label.empty()) absl::StrAppend(&line, "  ", label);
  return FitCells(line, columns);
}

void Progress::Set(int done, const std::string& label) {
  done_ = std::max(done_, done);
  if (!enabled_) return;
  const std::string line = Line(label, OutputColumns() - 1);
  const size_t cells = static_cast<size_t>(DisplayWidth(line));
  out_ << "\r" << line;
  if (cells < drawn_) out_ << std::string(drawn_ - cells, ' ');
  out_ << std::flush;
  drawn_ = cells;
}

void Progress::Finish() {
  if (!enabled_ || drawn_ == 0) return;
  out_ << "\r" << std::string(drawn_, ' ') << "\r" << std::flush;
  drawn_ = 0;
}

}  // namespace mesa_anyjev::client::ui
