// What the CLI prints for people and for machines: one JSON convention
// (indent 2, UTF-8 kept) for every command's --json, and the terminal facts
// human output adapts to.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace mesa_anyjev::client::ui {

// One JSON document (indent 2, then a newline) on `out`.
void PrintJson(const nlohmann::ordered_json& doc, std::ostream& out);
void PrintJson(const nlohmann::json& doc, std::ostream& out);

// Whether stdout / stderr is a terminal (tables, colours, progress bars).
bool StdoutIsTty();
bool StderrIsTty();

// Columns human output may use: the terminal's width when stdout is one,
// capped at 100 (tables stay readable in a split pane and in logs).
int OutputColumns();

// Terminal cells `text` takes (wide East Asian characters count two,
// combining marks none); invalid UTF-8 counts a cell a byte.
int DisplayWidth(std::string_view text);

// `words` as one shell command line: a word with anything but
// [A-Za-z0-9_./:=@%+,-] is single-quoted.
std::string ShellQuoted(const std::vector<std::string>& words);

// `text` cut to at most `cells` display cells, ending in "..." when cut.
std::string FitCells(std::string_view text, int cells);

}  // namespace mesa_anyjev::client::ui
