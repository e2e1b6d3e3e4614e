#include "client/ui/table.h"

#include <algorithm>

#include "client/ui/terminal.h"

namespace mesa_anyjev::client::ui {
namespace {

constexpr int kGap = 2;
constexpr int kMinFlexible = 8;

}  // namespace

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void Table::Print(std::ostream& out, int width) const {
  const size_t n = columns_.size();
  std::vector<int> widths(n, 0);
  for (size_t c = 0; c < n; ++c) {
    widths[c] = DisplayWidth(columns_[c].header);
    for (const auto& row : rows_) {
      widths[c] = std::max(widths[c], DisplayWidth(row[c]));
    }
    if (columns_[c].max_cells > 0) {
      widths[c] = std::min(widths[c], columns_[c].max_cells);
    }
  }
  auto total = [&] {
    int sum = n == 0 ? 0 : kGap * static_cast<int>(n - 1);
    for (const int w : widths) sum += w;
    return sum;
  };
  // Take a cell from the widest flexible column until the table fits.
  while (total() > width) {
    int widest = -1;
    for (size_t c = 0; c < n; ++c) {
      if (columns_[c].flexible && widths[c] > kMinFlexible &&
          (widest < 0 || widths[c] > widths[static_cast<size_t>(widest)])) {
        widest = static_cast<int>(c);
      }
    }
    if (widest < 0) break;
    --widths[static_cast<size_t>(widest)];
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < n; ++c) {
      const std::string cell = FitCells(cells[c], widths[c]);
      const std::string pad(static_cast<size_t>(widths[c] - DisplayWidth(cell)),
                            ' ');
      text += columns_[c].align == Align::kRight ? pad + cell : cell + pad;
      if (c + 1 < n) text += std::string(kGap, ' ');
    }
    text.erase(text.find_last_not_of(' ') + 1);
    out << text << "\n";
  };
  std::vector<std::string> headers;
  for (const Column& column : columns_) headers.push_back(column.header);
  line(headers);
  for (const auto& row : rows_) line(row);
}

}  // namespace mesa_anyjev::client::ui
