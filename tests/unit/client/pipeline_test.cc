// A pipeline run's plain parts (client/pipeline): spans by input position,
// refused states taken out deterministically, the ordered window, and what
// --resume reads back from OUT.
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "client/pipeline/ordered_window.h"
#include "client/pipeline/out_lines.h"
#include "client/pipeline/spans.h"
#include "tests/unit/temp_dir.h"

namespace mesa_anyjev::client::pipeline {
namespace {

using decision::Decision;
using Rows = std::vector<std::vector<Decision>>;

// A fake daemon call: refuses a text holding "bad" as the daemon refuses a
// state (INVALID_ARGUMENT "Decide: states[i].text: ..."); else each state's
// decision for question q records the whole call ("q|text,text,..."), as a
// batch prior makes a decision depend on the call's other states.
struct FakeCalls {
  int calls = 0;
  absl::StatusOr<Rows> operator()(const std::vector<std::string>& texts,
                                  size_t begin, size_t end) {
    ++calls;
    for (size_t i = 0; i < texts.size(); ++i) {
      if (absl::StrContains(texts[i], "bad")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Decide: states[", i, "].text: 9000 bytes exceed limits"));
      }
    }
    Rows rows(texts.size());
    for (size_t s = 0; s < texts.size(); ++s) {
      for (size_t q = begin; q < end; ++q) {
        Decision d;
        d.question_id = absl::StrCat(q, "|", absl::StrJoin(texts, ","));
        rows[s].push_back(d);
      }
    }
    return rows;
  }
};

TEST_CASE("Spans and question slices depend on positions only", "[pipeline]") {
  CHECK(SpanStart(0, 64) == 0);
  CHECK(SpanStart(63, 64) == 0);
  CHECK(SpanStart(64, 64) == 64);
  CHECK(SpanStart(130, 64) == 128);
  using Slices = std::vector<std::pair<size_t, size_t>>;
  CHECK(QuestionSlices(5, 0) == Slices{{0, 5}});
  CHECK(QuestionSlices(5, 32) == Slices{{0, 5}});
  CHECK(QuestionSlices(5, 2) == Slices{{0, 2}, {2, 4}, {4, 5}});
  CHECK(QuestionSlices(4, 2) == Slices{{0, 2}, {2, 4}});
  CHECK(CheckSpanSize(64, 256).ok());
  CHECK(CheckSpanSize(5000, 0).ok());  // decided here: no call limit
  const absl::Status over = CheckSpanSize(300, 256);
  CHECK(absl::IsInvalidArgument(over));
  CHECK(absl::StrContains(over.message(), "limits.max_decide_states=256"));
  CHECK(absl::StrContains(over.message(), "--span"));
  CHECK_FALSE(CheckSpanSize(0, 256).ok());
}

TEST_CASE("A refusal names its state only through the states[i] path",
          "[pipeline]") {
  CHECK(RefusedState(absl::InvalidArgumentError(
            "Decide: states[3].text: too long")) == size_t{3});
  CHECK(RefusedState(absl::InvalidArgumentError("states[12].json: bad")) ==
        size_t{12});
  CHECK_FALSE(RefusedState(absl::InvalidArgumentError(
                               "Decide: states: 400 states exceed limits"))
                  .has_value());
  CHECK_FALSE(RefusedState(absl::InvalidArgumentError(
                               "Decide: questions[0].text: the states[1] x"))
                  .has_value());
  CHECK_FALSE(RefusedState(absl::UnavailableError("Decide: states[3].text"))
                  .has_value());
}

TEST_CASE("A span decides every question slice over the same states",
          "[pipeline]") {
  FakeCalls fake;
  const std::vector<std::string> texts = {"a", "b", "c"};
  auto out = DecideSpan(texts, 64, 5, 2, std::ref(fake));
  REQUIRE(out.ok());
  CHECK(fake.calls == 3);  // 5 questions, 2 a call
  REQUIRE(out->size() == 3);
  for (const StateResult& r : *out) {
    CHECK(r.refused.ok());
    REQUIRE(r.decisions.size() == 5);
    CHECK(r.decisions[4].question_id == "4|a,b,c");
  }
}

TEST_CASE("A refused state is taken out and the span decided without it",
          "[pipeline]") {
  FakeCalls fake;
  const std::vector<std::string> texts = {"a", "bad1", "c", "bad2", "e"};
  auto out = DecideSpan(texts, 128, 3, 2, std::ref(fake));
  REQUIRE(out.ok());
  REQUIRE(out->size() == 5);
  for (const size_t s : {size_t{1}, size_t{3}}) {
    CHECK(absl::IsInvalidArgument((*out)[s].refused));
    CHECK((*out)[s].decisions.empty());
    // Named by its position in the whole input, not in the call.
    CHECK((*out)[s].refused.message() ==
          absl::StrCat("states[", 128 + s, "].text: 9000 bytes exceed limits"));
  }
  // Every question of the others saw the same states: those not refused.
  for (const size_t s : {size_t{0}, size_t{2}, size_t{4}}) {
    REQUIRE((*out)[s].decisions.size() == 3);
    CHECK((*out)[s].decisions[0].question_id == "0|a,c,e");
    CHECK((*out)[s].decisions[2].question_id == "2|a,c,e");
  }
  // The same input gives the same result, call for call.
  FakeCalls again;
  auto second = DecideSpan(texts, 128, 3, 2, std::ref(again));
  REQUIRE(second.ok());
  CHECK(again.calls == fake.calls);
  CHECK((*second)[4].decisions[1].question_id ==
        (*out)[4].decisions[1].question_id);
}

TEST_CASE(
    "A state refused by one slice's call is that refusal alone; the other "
    "slices' calls keep it",
    "[pipeline]") {
  // Refuses a text holding "long" only in calls of questions 2 and on (a
  // prompt too long for those questions only).
  auto fake = [](const std::vector<std::string>& texts, size_t begin,
                 size_t end) -> absl::StatusOr<Rows> {
    for (size_t i = 0; begin >= 2 && i < texts.size(); ++i) {
      if (absl::StrContains(texts[i], "long")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Decide: states[", i, "].text: prompt exceeds the limit"));
      }
    }
    return FakeCalls()(texts, begin, end);
  };
  auto out = DecideSpan({"a", "long", "c"}, 64, 3, 2, fake);
  REQUIRE(out.ok());
  CHECK((*out)[1].decisions.empty());
  CHECK((*out)[1].refused.message() ==
        "states[65].text: prompt exceeds the limit");
  for (const size_t s : {size_t{0}, size_t{2}}) {
    REQUIRE((*out)[s].decisions.size() == 3);
    CHECK((*out)[s].decisions[0].question_id == "0|a,long,c");
    CHECK((*out)[s].decisions[2].question_id == "2|a,c");
  }
}

TEST_CASE("Other failures are the span's", "[pipeline]") {
  auto failing = [](const std::vector<std::string>&, size_t,
                    size_t) -> absl::StatusOr<Rows> {
    return absl::FailedPreconditionError("L2 needs a head");
  };
  CHECK(
      absl::IsFailedPrecondition(DecideSpan({"a"}, 0, 1, 0, failing).status()));
  // A states[i] past the call's states is not a state of this span.
  auto odd = [](const std::vector<std::string>&, size_t,
                size_t) -> absl::StatusOr<Rows> {
    return absl::InvalidArgumentError("states[9].text: x");
  };
  CHECK(absl::IsInvalidArgument(DecideSpan({"a"}, 0, 1, 0, odd).status()));
  auto all_bad = DecideSpan({"bad"}, 0, 2, 0, FakeCalls());
  REQUIRE(all_bad.ok());
  CHECK_FALSE((*all_bad)[0].refused.ok());
}

TEST_CASE(
    "The ordered window emits in input order, never holding more than "
    "its size",
    "[pipeline]") {
  std::atomic<int> held{0};
  int most = 0, read = 0;
  std::vector<int> emitted;
  OrderedSteps<int> steps;
  steps.next = [&]() -> absl::StatusOr<std::optional<int>> {
    if (read == 20) return std::nullopt;
    most = std::max(most, ++held);
    return read++;
  };
  // Later items finish first: in each window of 4, an item's work waits
  // for the next item's (an event, not a sleep), so 3 is done before 2, 1, 0.
  absl::Notification done[20];
  steps.work = [&done](int& item) {
    if (item % 4 != 3) done[item + 1].WaitForNotification();
    done[item].Notify();
  };
  steps.emit = [&](int& item) {
    emitted.push_back(item);
    --held;
    return absl::OkStatus();
  };
  REQUIRE(RunOrdered(4, steps).ok());
  std::vector<int> expected(20);
  for (int i = 0; i < 20; ++i) expected[i] = i;
  CHECK(emitted == expected);
  CHECK(most == 4);
}

TEST_CASE(
    "The ordered window stops at an emit error and finishes what was "
    "read before a read error",
    "[pipeline]") {
  int read = 0;
  std::vector<int> emitted;
  OrderedSteps<int> steps;
  steps.next = [&]() -> absl::StatusOr<std::optional<int>> {
    if (read == 6) return absl::InvalidArgumentError("states.jsonl line 7");
    return read++;
  };
  steps.work = [](int&) {};
  steps.emit = [&](int& item) {
    emitted.push_back(item);
    return absl::OkStatus();
  };
  const absl::Status read_error = RunOrdered(4, steps);
  CHECK(read_error.message() == "states.jsonl line 7");
  CHECK(emitted == std::vector<int>{0, 1, 2, 3, 4, 5});

  read = 0;
  emitted.clear();
  steps.next = [&]() -> absl::StatusOr<std::optional<int>> {
    if (read == 10) return std::nullopt;
    return read++;
  };
  steps.emit = [&](int& item) {
    emitted.push_back(item);
    return item == 2 ? absl::InternalError("disk full") : absl::OkStatus();
  };
  CHECK(RunOrdered(3, steps).message() == "disk full");
  CHECK(emitted == std::vector<int>{0, 1, 2});
  CHECK(read <= 5);  // reading stopped with the error
}

RunKey Key() {
  return {"hf",
          "fake",
          "L0",
          64,
          {"term.fits", "column.aspect"},
          QuestionsSha256({"k1", "k2"})};
}

std::string Line(int64_t index, const RunKey& key = Key()) {
  nlohmann::ordered_json line =
      LineHead(index, nullptr, key, InputSha256(absl::StrCat("s", index)));
  line["decisions"] = nlohmann::ordered_json::array();
  return line.dump();
}

TEST_CASE("decide --resume drops a torn last line and nothing else",
          "[pipeline]") {
  testing::TempDir dir;
  const std::string whole = Line(0) + "\n" + Line(1) + "\n";
  const std::string path =
      dir.Write("out.jsonl", whole + Line(2).substr(0, 40));
  auto dropped = DropTornLine(path);
  REQUIRE(dropped.ok());
  CHECK(*dropped == 40);
  CHECK(std::filesystem::file_size(path) == whole.size());
  CHECK(*DropTornLine(path) == 0);  // complete: untouched
  CHECK(std::filesystem::file_size(path) == whole.size());
  // A single torn line (killed in the first write) leaves an empty file.
  const std::string torn = dir.Write("torn.jsonl", std::string(70000, 'x'));
  CHECK(*DropTornLine(torn) == 70000);
  CHECK(std::filesystem::file_size(torn) == 0);
  CHECK(*DropTornLine(dir.Path("absent.jsonl")) == 0);
}

TEST_CASE("decide --resume checks each kept line against the run",
          "[pipeline]") {
  auto check = [](const std::string& line, int64_t n, const RunKey& key) {
    return CheckKeptLine(line, n, key, "out.jsonl");
  };
  auto sha = check(Line(3), 3, Key());
  REQUIRE(sha.ok());
  CHECK(*sha == InputSha256("s3"));
  auto says = [&](const std::string& line, int64_t n, const RunKey& key) {
    const absl::Status status = check(line, n, key).status();
    CHECK(absl::IsInvalidArgument(status));
    return std::string(status.message());
  };
  CHECK(absl::StrContains(says(Line(3), 4, Key()),
                          "out.jsonl line 5 holds state 3 where state 4"));
  RunKey other = Key();
  other.questions = {"term.fits"};
  CHECK(absl::StrContains(says(Line(0), 0, other),
                          "written for questions [term.fits, column.aspect]; "
                          "this run asks [term.fits]"));
  other = Key();
  other.questions_sha256 = QuestionsSha256({"k1", "reworded"});
  CHECK(absl::StrContains(says(Line(0), 0, other), "other wordings"));
  other = Key();
  other.level = "L1";
  CHECK(absl::StrContains(says(Line(0), 0, other),
                          "written at --level L0; this run asks L1"));
  other = Key();
  other.span = 32;
  CHECK(absl::StrContains(says(Line(0), 0, other), "--span 64"));
  other = Key();
  other.model = "Qwen/Qwen3-8B";
  CHECK(absl::StrContains(says(Line(0), 0, other), "model fake"));
  CHECK(absl::StrContains(says("{\"index\": 0}", 0, Key()),
                          "is not a line of decide --out"));
  CHECK(absl::StrContains(says("not json", 0, Key()),
                          "is not a line of decide --out"));
}

}  // namespace
}  // namespace mesa_anyjev::client::pipeline
