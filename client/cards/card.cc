// Card parsing (see card.h). The patterns are the reference's, on PCRE2 with
// Python's \s spelled out (text::kPySpaceClass) and \d as Unicode Nd, as `re`
// reads them on str patterns.
#include "client/cards/card.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/text/py_text.h"
#include "common/text/utf8.h"
#include "common/util/hash.h"

namespace mesa_anyjev::cards {
namespace {

// One compiled pattern; patterns are fixed, so failing to compile is a bug.
class Pattern {
 public:
  explicit Pattern(std::string_view python_pattern) {
    const std::string space =
        absl::StrCat("[", std::string(text::kPySpaceClass), "]");
    const std::string non_space =
        absl::StrCat("[^", std::string(text::kPySpaceClass), "]");
    const std::string pattern = absl::StrReplaceAll(
        std::string(python_pattern), {{"\\s", space}, {"\\S", non_space}});
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                          pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (code_ == nullptr) std::abort();
  }
  ~Pattern() { pcre2_code_free(code_); }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  // Matches at or after `start`; the groups (0 = whole match) as views.
  bool Find(std::string_view text, size_t start,
            std::vector<std::string_view>* groups) const {
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
        pcre2_match_data_create_from_pattern(code_, nullptr),
        pcre2_match_data_free);
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()),
                               text.size(), start, 0, data.get(), nullptr);
    if (rc <= 0) return false;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    groups->clear();
    for (int i = 0; i < rc; ++i) {
      groups->push_back(
          text.substr(ovector[2 * i], ovector[2 * i + 1] - ovector[2 * i]));
    }
    return true;
  }

 private:
  pcre2_code* code_ = nullptr;
};

const Pattern& HeaderPattern() {
  static const Pattern* p =
      new Pattern(R"(^#\s*Dataset:\s*(\S+)\s*/\s*(\S+)\s*$)");
  return *p;
}
const Pattern& ProductPattern() {
  static const Pattern* p =
      new Pattern(R"(^Product:\s*(\S+)\s*[—-]+\s*([^.]+)\.?\s*(.*)$)");
  return *p;
}
const Pattern& SitePattern() {
  static const Pattern* p = new Pattern(
      R"(([A-Z]{4})\s*\(([^,]+),\s*([^,]+),\s*domain\s+(D\d{2})\s*([^;]*);\s*([^)]*)\))");
  return *p;
}
const Pattern& RowsPattern() {
  static const Pattern* p =
      new Pattern(R"(^Rows:\s*(\d+);\s*months covered:\s*(\S+)\s+to\s+(\S+))");
  return *p;
}
const Pattern& ColumnPattern() {
  static const Pattern* p =
      new Pattern(R"(^-\s*([^|]+)\|([^|]*)\|([^|]*)\|([^|]*)\|(.*)$)");
  return *p;
}

std::string Stripped(std::string_view text) {
  return std::string(text::PyStrip(text));
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.substr(text.size() - suffix.size()) == suffix;
}

}  // namespace

std::string DatasetCard::name() const {
  return absl::StrCat(product_code, ".", table);
}

absl::StatusOr<const ColumnInfo*> DatasetCard::Column(
    std::string_view column_name) const {
  for (const ColumnInfo& column : columns) {
    if (column.name == column_name) return &column;
  }
  return absl::NotFoundError(absl::StrCat("card ", name(), " has no column '",
                                          std::string(column_name), "'"));
}

absl::StatusOr<DatasetCard> ParseCard(std::string_view text) {
  if (const int64_t bad = text::FirstInvalidUtf8(text); bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a dataset card: invalid UTF-8 at byte ", bad));
  }
  DatasetCard card;
  card.sha256 = util::Sha256Hex(text);
  std::vector<std::string_view> g;
  for (const std::string_view raw : text::PySplitLines(text)) {
    const std::string_view line = text::PyStrip(raw);
    if (line.empty()) continue;
    if (HeaderPattern().Find(line, 0, &g)) {
      card.product_code = std::string(g[1]);
      card.table = std::string(g[2]);
    } else if (ProductPattern().Find(line, 0, &g)) {
      card.product_title = Stripped(g[2]);
      card.product_description = Stripped(g[3]);
    } else if (StartsWith(line, "Source:")) {
      card.source = Stripped(line.substr(7));
    } else if (StartsWith(line, "Sites:")) {
      size_t start = 0;
      while (SitePattern().Find(line, start, &g)) {
        card.sites.push_back({Stripped(g[1]), Stripped(g[2]), Stripped(g[3]),
                              Stripped(g[4]), Stripped(g[5]), Stripped(g[6])});
        start = static_cast<size_t>(g[0].data() + g[0].size() - line.data());
      }
    } else if (RowsPattern().Find(line, 0, &g)) {
      if (!text::PyDecimalToInt64(g[1], &card.rows)) {
        return absl::InvalidArgumentError(
            absl::StrCat("dataset card rows: ", std::string(g[1]),
                         " is beyond the limit of int64"));
      }
      card.months_from = std::string(g[2]);
      card.months_to = std::string(g[3]);
    } else if (ColumnPattern().Find(line, 0, &g)) {
      ColumnInfo column{Stripped(g[1]), Stripped(g[2]), Stripped(g[3]),
                        Stripped(g[4]), Stripped(g[5])};
      if (column.unit == "-") column.unit.clear();
      card.columns.push_back(std::move(column));
    }
  }
  if (card.product_code.empty()) {
    return absl::InvalidArgumentError(
        "not a dataset card: missing '# Dataset: <product> / <table>' header");
  }
  return card;
}

absl::StatusOr<DatasetCard> ReadCard(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read card ", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string text = absl::StrReplaceAll(
      absl::StrReplaceAll(bytes.str(), {{"\r\n", "\n"}}), {{"\r", "\n"}});
  absl::StatusOr<DatasetCard> card = ParseCard(text);
  if (!card.ok()) {
    return absl::Status(card.status().code(),
                        absl::StrCat(path, ": ", card.status().message()));
  }
  return card;
}

bool IsIdentifier(const ColumnInfo& column) {
  const std::string name = text::PyLower(column.name);
  if (name == "uid" || name == "remarks" || name == "publicationdate" ||
      name == "release") {
    return true;
  }
  if (name != "taxonid") {
    for (const std::string_view suffix :
         {"id", "uid", "code", "identifiedby", "recordedby", "measuredby"}) {
      if (EndsWith(name, suffix)) return true;
    }
  }
  const std::string dtype = text::PyLower(column.dtype);
  if (dtype == "datetime" || dtype == "date") return true;
  const std::string profile = text::PyLower(column.profile);
  return StartsWith(profile, "all blank") ||
         profile.find("not profiled") != std::string::npos;
}

}  // namespace mesa_anyjev::cards
