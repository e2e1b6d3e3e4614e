// Dataset card parsing and the identifier rule: the reference's own tests
// on the synthetic bird card, plus the parser's edge cases.
#include "client/cards/card.h"

#include <catch2/catch.hpp>
#include <string>

#include "common/text/py_text.h"
#include "common/util/hash.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::cards {
namespace {

std::string ReadData(const std::string& name) {
  std::ifstream in(std::string(MESA_ANYJEV_DATA) + "/" + name,
                   std::ios::binary);
  REQUIRE(in);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

const char* kBird = "cards/DP1.10003.001.brd_countdata.md";

TEST_CASE("ParseCard reads the bird card's header, sites, rows and columns",
          "[cards]") {
  const std::string text = ReadData(kBird);
  auto card = ParseCard(text);
  REQUIRE(card.ok());
  CHECK(card->product_code == "DP1.10003.001");
  CHECK(card->table == "brd_countdata");
  CHECK(card->name() == "DP1.10003.001.brd_countdata");
  CHECK(card->product_title == "Breeding landbird point counts");
  CHECK(card->product_description.rfind("Counts of breeding landbirds", 0) ==
        0);
  CHECK(card->source.rfind("NEON Data Portal", 0) == 0);
  REQUIRE(card->sites.size() == 2);
  CHECK(card->sites[0].code == "HARV");
  CHECK(card->sites[0].name == "Harvard Forest & Quabbin Watershed NEON");
  CHECK(card->sites[0].state == "MA");
  CHECK(card->sites[0].domain == "D01");
  CHECK(card->sites[0].domain_name == "Northeast");
  CHECK(card->sites[0].habitat == "deciduous forest");
  CHECK(card->sites[1].code == "SRER");
  CHECK(card->sites[1].domain == "D14");
  CHECK(card->sites[1].habitat == "desert shrubland");
  CHECK(card->rows == 15484);
  CHECK(card->months_from == "2019-05");
  CHECK(card->months_to == "2023-07");
  REQUIRE(card->columns.size() == 7);
  auto distance = card->Column("observerDistance");
  REQUIRE(distance.ok());
  CHECK((*distance)->unit == "meter");
  CHECK((*distance)->dtype == "real");
  auto uid = card->Column("uid");
  REQUIRE(uid.ok());
  CHECK((*uid)->unit.empty());  // "-" becomes ""
  CHECK(card->sha256 == util::Sha256Hex(text));
  CHECK(card->sha256.size() == 64);
}

TEST_CASE(
    "The identifier rule flags uid, siteID, startDate and "
    "identificationHistoryID on the bird card",
    "[cards]") {
  auto card = ParseCard(ReadData(kBird));
  REQUIRE(card.ok());
  std::vector<std::string> flagged;
  for (const ColumnInfo& column : card->columns) {
    if (IsIdentifier(column)) flagged.push_back(column.name);
  }
  CHECK(flagged == std::vector<std::string>{"uid", "siteID", "startDate",
                                            "identificationHistoryID"});
}

TEST_CASE("IsIdentifier: names, suffixes, taxonID, dtypes and profiles",
          "[cards]") {
  auto col = [](std::string name, std::string dtype = "string",
                std::string profile = "3 distinct") {
    return ColumnInfo{std::move(name), "", std::move(dtype), "",
                      std::move(profile)};
  };
  CHECK(IsIdentifier(col("Remarks")));
  CHECK(IsIdentifier(col("publicationDate")));
  CHECK(IsIdentifier(col("release")));
  CHECK(IsIdentifier(col("plotID")));
  CHECK(IsIdentifier(col("sampleCode")));
  CHECK(IsIdentifier(col("identifiedBy")));
  CHECK(IsIdentifier(col("recordedBy")));
  CHECK(IsIdentifier(col("measuredBy")));
  CHECK_FALSE(IsIdentifier(col("taxonID")));
  CHECK_FALSE(IsIdentifier(col("scientificName")));
  CHECK(IsIdentifier(col("eventTime", "dateTime")));
  CHECK(IsIdentifier(col("day", "DATE")));
  CHECK(IsIdentifier(col("notes", "string", "All blank")));
  CHECK(IsIdentifier(col("notes", "string", "12 rows; not profiled")));
  CHECK_FALSE(IsIdentifier(col("notes", "string", "3 distinct; all blank")));
  // The Kelvin sign lower-cases to "k", as in Python.
  CHECK(IsIdentifier(col("remar\xE2\x84\xAAs")));
}

TEST_CASE("ParseCard refuses a text without the header", "[cards]") {
  auto card = ParseCard("Product: X — Y. Z\n- a | b | c | - | d\n");
  REQUIRE_FALSE(card.ok());
  CHECK(card.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(card.status().message() ==
        "not a dataset card: missing '# Dataset: <product> / <table>' header");
  CHECK(std::string(card.status().message()).find("Dataset") !=
        std::string::npos);
  CHECK_FALSE(ParseCard("\xFF# Dataset: A / b").ok());
}

TEST_CASE("ParseCard: first matching rule wins, later lines overwrite",
          "[cards]") {
  const std::string text =
      "  #Dataset:A/b  \n"
      "Product: A --- Title one. Rest. More\n"
      "# Dataset: P / t\n"
      "Rows: 12; months covered: 2020-01 to 2020-02 (2 distinct months).\n"
      "- x | d | string | m | p | q\r\n"
      "-y|||-|\n"
      "Sites: ABCD (N, S, domain D01 Dn; h) AND EFGH(N2,S2,domain  D02; h2)\n"
      "ignored line\n";
  auto card = ParseCard(text);
  REQUIRE(card.ok());
  CHECK(card->name() == "P.t");
  CHECK(card->product_title == "Title one");
  CHECK(card->product_description == "Rest. More");
  CHECK(card->rows == 12);
  REQUIRE(card->columns.size() == 2);
  CHECK(card->columns[0].unit == "m");
  CHECK(card->columns[0].profile == "p | q");
  CHECK(card->columns[1].name == "y");
  CHECK(card->columns[1].unit.empty());
  REQUIRE(card->sites.size() == 2);
  CHECK(card->sites[1].code == "EFGH");
  CHECK(card->sites[1].domain_name.empty());
  CHECK(card->sites[1].habitat == "h2");
  CHECK(card->Column("nope").status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("ParseCard reads Unicode digits as Python's int() does", "[cards]") {
  auto card = ParseCard(
      "# Dataset: P / t\nRows: \xD9\xA3\xD9\xA0; months covered: a to b\n");
  REQUIRE(card.ok());
  CHECK(card->rows == 30);  // Arabic-Indic 3, 0
  auto huge = ParseCard(
      "# Dataset: P / t\nRows: 99999999999999999999; months covered: a to b\n");
  REQUIRE_FALSE(huge.ok());
  CHECK(std::string(huge.status().message()).find("rows") != std::string::npos);
}

TEST_CASE("ReadCard applies universal newlines before hashing", "[cards]") {
  testing::TempDir dir;
  const std::string crlf = "# Dataset: P / t\r\nSource: s\r\n";
  auto card = ReadCard(dir.Write("c.md", crlf));
  REQUIRE(card.ok());
  CHECK(card->sha256 == util::Sha256Hex("# Dataset: P / t\nSource: s\n"));
  auto missing = ReadCard(dir.path() + "/absent.md");
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Python str helpers", "[cards]") {
  CHECK(text::PyStrip("\x1c \xC2\xA0x y\xE3\x80\x80\t") == "x y");
  CHECK(text::PyLower("\xC4\xB0") == "i\xCC\x87");
  CHECK(text::PyLower("\xCE\xA3\xCE\x91\xCE\xA3") ==
        "\xCF\x83\xCE\xB1\xCF\x82");
  CHECK(text::CodePointPrefix("\xC3\xA9t\xC3\xA9", 2) == "\xC3\xA9t");
  const auto lines = text::PySplitLines(
      "a\r\nb\rc\x0b"
      "d\xE2\x80\xA8"
      "e\n");
  CHECK(lines == std::vector<std::string_view>{"a", "b", "c", "d", "e"});
}

}  // namespace
}  // namespace mesa_anyjev::cards
