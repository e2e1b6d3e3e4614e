// Python's reprs and the CLI lines of an annotate run.
#include "client/annotate/run_result.h"

#include <catch2/catch.hpp>
#include <string>

#include "client/annotate/py_repr.h"

namespace mesa_anyjev::annotate {
namespace {

TEST_CASE("annotate: PyStrRepr writes what CPython's repr(str) writes",
          "[annotate]") {
  CHECK(PyStrRepr("SRER") == "'SRER'");
  CHECK(PyStrRepr("") == "''");
  CHECK(PyStrRepr("it's") == "\"it's\"");
  CHECK(PyStrRepr("it's \"x\"") == "'it\\'s \"x\"'");
  CHECK(PyStrRepr("a\\b") == "'a\\\\b'");
  CHECK(PyStrRepr("tab\there\nnl\rcr") == "'tab\\there\\nnl\\rcr'");
  CHECK(PyStrRepr(std::string("\x01\x7f", 2)) == "'\\x01\\x7f'");
  // Printable non-ASCII stays; non-printable is escaped by width.
  CHECK(PyStrRepr("degree \xc2\xb0"
                  "C") ==
        "'degree \xc2\xb0"
        "C'");
  CHECK(PyStrRepr("Bj\xc3\xb6rk") == "'Bj\xc3\xb6rk'");
  CHECK(PyStrRepr("nb\xc2\xa0sp") == "'nb\\xa0sp'");        // U+00A0 Zs
  CHECK(PyStrRepr("zw\xe2\x80\x8bsp") == "'zw\\u200bsp'");  // U+200B Cf
  CHECK(PyStrRepr("\xf3\xa0\x80\x81") == "'\\U000e0001'");  // tag, Cf
  CHECK(PyStrRepr("\xe2\x80\xa8") == "'\\u2028'");          // Zl
}

TEST_CASE("annotate: PyCountsRepr and PyStrListRepr", "[annotate]") {
  CHECK(PyCountsRepr({}) == "{}");
  CHECK(PyCountsRepr({{"proposed", 5}, {"abstain", 3}}) ==
        "{'abstain': 3, 'proposed': 5}");
  CHECK(PyStrListRepr({}) == "[]");
  CHECK(PyStrListRepr({"envo", "uo"}) == "['envo', 'uo']");
}

TEST_CASE("annotate: the summary and proposal lines of 3.3", "[annotate]") {
  RunResult run;
  run.run_id = "0b6f1c1e-7f4e-4d0a-9a57-2b7d3c1f0e55";
  Proposal p;
  p.candidate.curie = "ENVO:01001838";
  p.avu = cards::Avu{"envo.desert_biome", "SRER", "ENVO:01001838"};
  p.outcome = policy::Outcome::kProposed;
  p.rationale = "p(fits)=0.78 L0";
  run.proposals = {p};
  run.rejected.resize(2);
  run.n_decisions = 42;
  run.n_prompts = 128;
  run.seconds = 0.25;
  run.outcomes = {{"rule", 4}, {"abstain", 10}, {"proposed", 28}};
  CHECK(SummaryLine(run) ==
        "run 0b6f1c1e-7f4e-4d0a-9a57-2b7d3c1f0e55: 1 proposals, 2 rejected, "
        "42 decisions, 128 prompts, missing_labels=0, 0.2s; outcomes "
        "{'abstain': 10, 'proposed': 28, 'rule': 4}");
  CHECK(ProposalLines(run) ==
        std::vector<std::string>{"  proposed  envo.desert_biome = 'SRER' "
                                 "[ENVO:01001838] p(fits)=0.78 L0"});
  CHECK(!AuditLine(run).has_value());
  const auto eval = EvalResult(run);
  CHECK(eval["avus"][0]["column"].is_null());
  CHECK(eval["family"] == "mesa-anyjev");
  CHECK(eval["parse_ok"] == true);
}

}  // namespace
}  // namespace mesa_anyjev::annotate
