#include <catch2/catch.hpp>
#include <sstream>

#include "client/ui/progress.h"
#include "client/ui/table.h"
#include "client/ui/terminal.h"

namespace mesa_anyjev::client::ui {
namespace {

TEST_CASE("DisplayWidth counts terminal cells", "[ui]") {
  CHECK(DisplayWidth("abc") == 3);
  CHECK(DisplayWidth("caf\xC3\xA9") == 4);               // é: one cell
  CHECK(DisplayWidth("\xE4\xBD\xA0\xE5\xA5\xBD") == 4);  // 你好: two each
  CHECK(DisplayWidth("\xFF") == 1);  // invalid: a cell a byte
}

TEST_CASE("FitCells cuts on a character and marks the cut", "[ui]") {
  CHECK(FitCells("short", 10) == "short");
  CHECK(FitCells("abcdefghij", 6) == "abc...");
  // Never half a wide character: 你好世界 in 7 cells keeps two of them.
  CHECK(FitCells("\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C", 7) ==
        "\xE4\xBD\xA0\xE5\xA5\xBD...");
}

TEST_CASE("ShellQuoted quotes only what a shell would split", "[ui]") {
  CHECK(ShellQuoted({"--set", "labels.dir=/tmp/x"}) ==
        "--set labels.dir=/tmp/x");
  CHECK(ShellQuoted({"--state", "it's a test"}) == "--state 'it'\\''s a test'");
  CHECK(ShellQuoted({""}) == "''");
}

TEST_CASE("A table shrinks its flexible columns to the width", "[ui]") {
  Table table({{"id"}, {"p", Align::kRight}, {"text", Align::kLeft, true}});
  table.AddRow({"term.fits", "0.9", std::string(200, 'x')});
  table.AddRow({"a", "0.12"});  // a missing cell is blank
  std::ostringstream out;
  table.Print(out, 40);
  std::istringstream lines(out.str());
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    CHECK(DisplayWidth(line) <= 40);
  }
  CHECK(n == 3);
  CHECK(out.str().find("term.fits   0.9  xxx") != std::string::npos);
  CHECK(out.str().find("...") != std::string::npos);
  CHECK(out.str().find("a          0.12\n") != std::string::npos);
}

TEST_CASE("Progress shows count, rate and ETA from its clock", "[ui]") {
  double now = 100.0;
  std::ostringstream out;
  Progress bar("folds", 4, /*enabled=*/true, out, [&] { return now; });
  CHECK(bar.Line("fold 1", 100).find("0/4 folds  ETA --  fold 1") !=
        std::string::npos);
  now = 104.0;
  bar.Set(2, "fold 3");  // 2 done in 4 s: 2 s each, 2 to go
  const std::string line = bar.Line("fold 3", 100);
  CHECK(line.find("[##########..........] 2/4 folds") == 0);
  CHECK(line.find("2.0s each  ETA 4s  fold 3") != std::string::npos);
  bar.Set(1, "back");  // never moves back
  CHECK(bar.done() == 2);
  CHECK(out.str().find("\r[") != std::string::npos);
  bar.Finish();
  CHECK(ShortDuration(59) == "59s");
  CHECK(ShortDuration(125) == "2m05s");
  CHECK(ShortDuration(3720) == "1h02m");
}

TEST_CASE("A disabled progress bar writes nothing", "[ui]") {
  std::ostringstream out;
  {
    Progress bar("cards", 3, /*enabled=*/false, out);
    bar.Advance("x");
  }
  CHECK(out.str().empty());
}

}  // namespace
}  // namespace mesa_anyjev::client::ui
