// A plain text table for people: a header row, then rows, columns two
// spaces apart. Flexible columns give up cells (their text cut with "...")
// until the table fits the width it is given.
//
//   Table t({{"question"}, {"level"}, {"p", Align::kRight}, {"text",
//   Align::kLeft, true}}); t.AddRow({"term.fits", "L1", "0.912", "Does the term
//   fit ..."}); t.Print(std::cout, ui::OutputColumns());
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mesa_anyjev::client::ui {

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kLeft;
  bool flexible = false;  // may shrink to fit; others keep their width
  int max_cells = 0;      // > 0: never wider than this
};

class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // Missing cells are blank; extra cells are dropped.
  void AddRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  void Print(std::ostream& out, int width) const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace mesa_anyjev::client::ui
