// A progress bar on stderr for long CLI work (learn fit's folds, bench
// run's cells and folds, annotate's questions): done/total, the rate, an
// ETA from that rate, and what runs now. Drawn only on a terminal; the
// clock is injectable so tests can check the arithmetic.
#pragma once

#include <chrono>
#include <functional>
#include <ostream>
#include <string>

namespace mesa_anyjev::client::ui {

class Progress {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  // A total not known up front (a stream): the count and rate, no bar.
  static constexpr int kUnknownTotal = -1;

  // `unit` names what is counted ("folds", "cells", "questions").
  Progress(std::string unit, int total, bool enabled, std::ostream& out,
           Clock clock = SteadySeconds);
  ~Progress() { Finish(); }

  void SetTotal(int total) { total_ = total; }
  // Moves the count to `done` (never back) and redraws with `label`.
  void Set(int done, const std::string& label);
  void Advance(const std::string& label) { Set(done_ + 1, label); }
  // Redraws with a new label at the same count.
  void Show(const std::string& label) { Set(done_, label); }
  // Clears the line (before other output, and at the end).
  void Finish();

  int done() const { return done_; }
  // The line as drawn, without the carriage return (tests).
  std::string Line(const std::string& label, int columns) const;

  static double SteadySeconds();

 private:
  std::string unit_;
  int total_;
  bool enabled_;
  std::ostream& out_;
  Clock clock_;
  double start_;
  int done_ = 0;
  size_t drawn_ = 0;  // cells of the last line drawn
};

// "4s", "2m05s", "1h02m".
std::string ShortDuration(double seconds);

}  // namespace mesa_anyjev::client::ui
