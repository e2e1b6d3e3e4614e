// Decisions RPC conversion and limits (see decision_convert.h).
#include "server/service/decision_convert.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/decision/py_json.h"
#include "common/status/status_macros.h"
#include "common/text/strict_json.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::service {
namespace {

namespace v1 = ::mesa::anyjev::v1;
using decision::Level;
using decision::Question;
using decision::QuestionKind;

// A question has one listing per combination of shifts and order it was
// asked under; a run rarely holds more than one.
constexpr int64_t kPriorsPerQuestion = 4;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status Prefixed(const std::string& field, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(field, ": ", status.message()));
}

template <typename T>
absl::StatusOr<T> Prefixed(const std::string& field, absl::StatusOr<T> value) {
  if (!value.ok()) return Prefixed(field, value.status());
  return value;
}

absl::Status CheckCount(const std::string& field, int64_t n, const char* what,
                        const char* limit_name, int64_t limit) {
  if (n < 1)
    return Invalid(field, absl::StrCat("at least one ", what, " is required"));
  if (n > limit) {
    return Invalid(
        field, absl::StrCat(n, " ", what, "s exceed ", limit_name, "=", limit));
  }
  return absl::OkStatus();
}

// Text within limits.max_text_bytes. It is valid UTF-8: every text field is
// a proto3 string, which the request parse checks (request_parse.h).
absl::StatusOr<std::string> Text(const std::string& field,
                                 const std::string& bytes,
                                 const config::LimitsConfig& limits) {
  if (static_cast<int64_t>(bytes.size()) > limits.max_text_bytes) {
    return Invalid(field, absl::StrCat(bytes.size(),
                                       " bytes exceed "
                                       "limits.max_text_bytes=",
                                       limits.max_text_bytes));
  }
  return bytes;
}

absl::StatusOr<std::string> ParseState(const v1::State& state,
                                       const std::string& field,
                                       const config::LimitsConfig& limits) {
  switch (state.kind_case()) {
    case v1::State::kText:
      return Text(field + ".text", state.text(), limits);
    case v1::State::kJson: {
      const std::string json_field = field + ".json";
      ASSIGN_OR_RETURN(
          const nlohmann::ordered_json value,
          Prefixed(json_field,
                   text::ParseStrictOrderedJson(
                       state.json(),
                       {.max_bytes = static_cast<size_t>(limits.max_text_bytes),
                        .max_bytes_name = "limits.max_text_bytes"})));
      std::optional<std::string> rendered = decision::PyJsonDumpsIndent2(
          value, static_cast<size_t>(limits.max_text_bytes));
      if (!rendered.has_value()) {
        return Invalid(json_field,
                       absl::StrCat("renders (json.dumps indent=2) to more "
                                    "than limits.max_text_bytes=",
                                    limits.max_text_bytes, " bytes"));
      }
      return *std::move(rendered);
    }
    case v1::State::KIND_NOT_SET:
      break;
  }
  return std::string();  // an unset state is empty: "(empty)"
}

absl::StatusOr<Question> ParseQuestion(const v1::Question& q,
                                       const std::string& field,
                                       const config::LimitsConfig& limits) {
  auto kind = decision::ParseQuestionKind(q.kind());
  if (!kind.ok()) return Prefixed(field + ".kind", kind.status());
  ASSIGN_OR_RETURN(std::string text, Text(field + ".text", q.text(), limits));
  std::vector<std::string> options;
  for (int i = 0; i < q.options_size(); ++i) {
    ASSIGN_OR_RETURN(
        std::string option,
        Text(absl::StrCat(field, ".options[", i, "]"), q.options(i), limits));
    options.push_back(std::move(option));
  }
  absl::StatusOr<Question> out = absl::InternalError("unreachable");
  switch (*kind) {
    case QuestionKind::kChoice:
      out = Question::Choice(std::move(text), std::move(options), q.id());
      if (!out.ok()) return Prefixed(field + ".options", out.status());
      break;
    case QuestionKind::kNoul:
      if (!options.empty()) {
        return Invalid(field + ".options",
                       "a noul's options are Yes and No; give none");
      }
      out = Question::Noul(std::move(text), q.id());
      break;
    case QuestionKind::kScore:
      if (!options.empty()) {
        if (q.bins() != 0 || q.has_scale_lo() || q.has_scale_hi()) {
          return Invalid(field,
                         "a score takes levels (options) or bins and "
                         "a scale, not both");
        }
        out =
            Question::ScoreLevels(std::move(text), std::move(options), q.id());
        if (!out.ok()) return Prefixed(field + ".options", out.status());
      } else {
        out =
            Question::ScoreBins(std::move(text), q.bins() == 0 ? 5 : q.bins(),
                                q.has_scale_lo() ? q.scale_lo() : 0.0,
                                q.has_scale_hi() ? q.scale_hi() : 1.0, q.id());
        if (!out.ok()) return Prefixed(field + ".bins", out.status());
      }
      break;
  }
  if (q.labels_size() > 0) {
    std::vector<std::string> labels;
    for (int i = 0; i < q.labels_size(); ++i) {
      ASSIGN_OR_RETURN(
          std::string label,
          Text(absl::StrCat(field, ".labels[", i, "]"), q.labels(i), limits));
      labels.push_back(std::move(label));
    }
    if (absl::Status status = out->SetCustomLabels(std::move(labels));
        !status.ok()) {
      return Prefixed(field + ".labels", status);
    }
  }
  return out;
}

// Only an id: the caller asks for the question the daemon serves by it
// (a client that is not ours need not spell out a definition it can list).
bool IdAlone(const v1::Question& q) {
  return !q.id().empty() && q.kind().empty() && q.text().empty() &&
         q.options_size() == 0 && q.labels_size() == 0 && q.bins() == 0 &&
         !q.has_scale_lo() && !q.has_scale_hi();
}

absl::StatusOr<Question> ServedQuestion(const v1::Question& q,
                                        const std::string& field,
                                        const questions::QuestionSet& served) {
  auto entry = served.Find(q.id());
  if (entry.ok()) return (*entry)->question;
  std::vector<std::string> ids;
  for (const questions::QuestionEntry& e : served.entries()) {
    ids.push_back(e.id());
  }
  return absl::NotFoundError(absl::StrCat(
      field, ".id: ", entry.status().message(),
      "; give kind, text and options to ask a question of your own, or one "
      "of the ids served: ",
      absl::StrJoin(ids, ", ")));
}

absl::StatusOr<std::vector<std::string>> ParseStates(
    const google::protobuf::RepeatedPtrField<v1::State>& states,
    const config::LimitsConfig& limits, const char* limit_name, int64_t limit) {
  RETURN_IF_ERROR(
      CheckCount("states", states.size(), "state", limit_name, limit));
  std::vector<std::string> out;
  for (int i = 0; i < states.size(); ++i) {
    ASSIGN_OR_RETURN(
        std::string state,
        ParseState(states[i], absl::StrCat("states[", i, "]"), limits));
    out.push_back(std::move(state));
  }
  return out;
}

// A listing is "<question key>|...": one of this call's questions must own
// each, so a request cannot plant accumulators for keys it does not ask.
absl::Status ParseCarriedPriors(const v1::DecideRequest& request,
                                const std::vector<Question>& questions,
                                const config::LimitsConfig& limits,
                                ParsedDecide* out) {
  out->carry_priors = request.carry_priors();
  if (!out->carry_priors) {
    if (request.priors_size() > 0) {
      return Invalid("priors", "given without carry_priors");
    }
    return absl::OkStatus();
  }
  const int64_t limit = kPriorsPerQuestion * limits.max_decide_questions;
  if (request.priors_size() > limit) {
    return Invalid("priors",
                   absl::StrCat(request.priors_size(), " entries exceed ",
                                kPriorsPerQuestion,
                                " per question (limits.max_decide_questions=",
                                limits.max_decide_questions, ")"));
  }
  for (int i = 0; i < request.priors_size(); ++i) {
    const v1::PriorState& p = request.priors(i);
    const std::string field = absl::StrCat("priors[", i, "]");
    const bool owned =
        std::any_of(questions.begin(), questions.end(), [&](const Question& q) {
          return absl::StartsWith(p.listing(), absl::StrCat(q.key(), "|"));
        });
    if (!owned) {
      return Invalid(field + ".listing",
                     "is not a listing of a question in this call (send back "
                     "the listings the daemon returned)");
    }
    ASSIGN_OR_RETURN(
        decision::PriorAccumulator acc,
        decision::MakePriorAccumulator(field, p.shifts(), p.k(), p.sum().data(),
                                       p.sum_size(), p.n()));
    if (!out->priors.emplace(p.listing(), std::move(acc)).second) {
      return Invalid(field + ".listing", "appears twice");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ParsedDecide> ParseDecideRequest(
    const v1::DecideRequest& request, const config::LimitsConfig& limits,
    const Capabilities& caps, const questions::QuestionSet& served) {
  ParsedDecide out;
  if (!request.level().empty()) {
    auto level = decision::ParseLevel(request.level());
    if (!level.ok()) return Prefixed("level", level.status());
    out.level = *level;
  }
  if (!request.require().empty()) {
    auto require = decision::ParseLevel(request.require());
    if (!require.ok() || *require == Level::kAuto) {
      return Invalid("require",
                     absl::StrCat("unknown level '", request.require(),
                                  "' (expected raw, L0, L1 or L2)"));
    }
    out.options.require = *require;
  }
  ASSIGN_OR_RETURN(out.states, ParseStates(request.states(), limits,
                                           "limits.max_decide_states",
                                           limits.max_decide_states));
  RETURN_IF_ERROR(CheckCount("questions", request.questions_size(), "question",
                             "limits.max_decide_questions",
                             limits.max_decide_questions));
  for (int i = 0; i < request.questions_size(); ++i) {
    const std::string field = absl::StrCat("questions[", i, "]");
    const v1::Question& asked = request.questions(i);
    ASSIGN_OR_RETURN(Question question,
                     IdAlone(asked) ? ServedQuestion(asked, field, served)
                                    : ParseQuestion(asked, field, limits));
    // auto may still serve such a question at L2; the decider checks it
    // once the level is resolved.
    if (question.kind() == QuestionKind::kChoice && out.level != Level::kL2 &&
        out.level != Level::kAuto && caps.max_choice_k > 0 &&
        question.k() > caps.max_choice_k) {
      return Invalid(field + ".options",
                     absl::StrCat("K=", question.k(),
                                  " options exceed the model's max_choice_k=",
                                  caps.max_choice_k,
                                  " (ask one yes/no question per option)"));
    }
    out.questions.push_back(std::move(question));
  }
  RETURN_IF_ERROR(ParseCarriedPriors(request, out.questions, limits, &out));
  const v1::DecideOptions& o = request.options();
  if (!o.prior().empty()) {
    auto prior = decision::ParsePriorMode(o.prior());
    if (!prior.ok()) return Prefixed("options.prior", prior.status());
    out.options.prior = *prior;
  }
  if (!o.combine().empty()) {
    auto combine = decision::ParseCombine(o.combine());
    if (!combine.ok()) return Prefixed("options.combine", combine.status());
    out.options.combine = *combine;
  }
  if (o.has_canonical_order())
    out.options.canonical_order = o.canonical_order();
  if (o.has_max_permutations()) {
    if (o.max_permutations() < 1) {
      return Invalid("options.max_permutations",
                     absl::StrCat(o.max_permutations(), " is below 1"));
    }
    out.options.max_permutations = o.max_permutations();
  }
  if (o.has_adaptive_shifts())
    out.options.adaptive_shifts = o.adaptive_shifts();
  out.options.exact_heads = o.exact_heads();
  if (o.has_adaptive_margin()) {
    if (!(o.adaptive_margin() >= 0.0)) {
      return Invalid("options.adaptive_margin", "must be >= 0");
    }
    out.options.adaptive_margin = o.adaptive_margin();
  }
  out.options.return_prompts = request.return_prompts();
  return out;
}

absl::StatusOr<ParsedFit> ParseFitRequest(const v1::FitRequest& request,
                                          const config::LimitsConfig& limits) {
  ParsedFit out;
  auto level = decision::ParseLevel(request.level());
  if (!level.ok() || (*level != Level::kL1 && *level != Level::kL2)) {
    return Invalid("level",
                   absl::StrCat("'", request.level(), "' (Fit fits L1 or L2)"));
  }
  out.level = *level;
  ASSIGN_OR_RETURN(out.question,
                   ParseQuestion(request.question(), "question", limits));
  ASSIGN_OR_RETURN(
      out.states, ParseStates(request.states(), limits, "limits.max_fit_states",
                              limits.max_fit_states));
  if (request.labels_size() != request.states_size()) {
    return Invalid("labels", absl::StrCat(request.labels_size(), " labels for ",
                                          request.states_size(),
                                          " states (one per state)"));
  }
  for (int i = 0; i < request.labels_size(); ++i) {
    if (request.labels(i) < 0 || request.labels(i) >= out.question.k()) {
      return Invalid(
          absl::StrCat("labels[", i, "]"),
          absl::StrCat(request.labels(i), " is not an option index in [0, ",
                       out.question.k(), ")"));
    }
    out.labels.push_back(request.labels(i));
  }
  out.head.layers.assign(request.layers().begin(), request.layers().end());
  if (!request.listing().empty()) out.head.listing = request.listing();
  return out;
}

void FillDecideResponse(
    const std::vector<std::vector<decision::Decision>>& decisions,
    const std::string& model, const decision::PriorTable* priors,
    v1::DecideResponse* response) {
  response->set_model(model);
  if (priors != nullptr) {
    for (const auto& [listing, acc] : *priors) {
      v1::PriorState* out = response->add_priors();
      out->set_listing(listing);
      out->set_shifts(static_cast<int32_t>(acc.sum.rows()));
      out->set_k(static_cast<int32_t>(acc.sum.cols()));
      out->mutable_sum()->Add(acc.sum.data(), acc.sum.data() + acc.sum.size());
      out->set_n(acc.n);
    }
  }
  for (size_t s = 0; s < decisions.size(); ++s) {
    for (size_t q = 0; q < decisions[s].size(); ++q) {
      const decision::Decision& d = decisions[s][q];
      const decision::DecisionDiagnostics& g = d.diagnostics;
      v1::Decision* out = response->add_decisions();
      out->set_state_index(static_cast<int32_t>(s));
      out->set_question_index(static_cast<int32_t>(q));
      out->set_question_id(d.question_id);
      out->set_question_key(d.question_key);
      out->set_kind(decision::QuestionKindName(d.kind));
      for (const std::string& option : d.options) out->add_options(option);
      out->set_level(decision::LevelName(d.level));
      out->mutable_probs()->Add(d.probs.begin(), d.probs.end());
      out->set_answer_index(d.answer_index());
      out->set_answer(d.answer());
      out->set_confidence(d.confidence());
      if (const auto p = d.p_true(); p.has_value()) out->set_p_true(*p);
      out->set_margin(d.margin());
      if (d.score_value.has_value()) out->set_score_value(*d.score_value);
      v1::DecisionDiagnostics* diag = out->mutable_diagnostics();
      diag->set_shifts_read(static_cast<int32_t>(g.perms.size()));
      diag->set_prior_method(g.prior_method);
      diag->set_prior_strength(g.prior_strength);
      if (g.answer_mass.has_value()) diag->set_answer_mass(*g.answer_mass);
      diag->set_blocks_executed(g.blocks_executed);
      diag->set_n_blocks(g.n_blocks);
      diag->set_early_stop(g.early_stop);
      diag->set_prompts(g.prompts);
      diag->set_prompt_sha256(g.prompt_sha256);
      for (const std::string& text : g.prompt_texts) {
        diag->add_prompt_texts(text);
      }
      diag->set_head_version(g.head_version);
      diag->set_readout(g.readout);
      diag->set_routed_from(g.routed_from);
      diag->set_reordered(g.reordered);
      diag->set_adapted(g.adapted);
      diag->set_adapt_n(g.adapt_n);
      if (g.temperature.has_value()) diag->set_temperature(*g.temperature);
      diag->set_n_calib(g.n_calib);
      if (g.order_flip_raw.has_value()) {
        diag->set_order_flip_raw(*g.order_flip_raw);
      }
      if (g.order_flip_l0.has_value())
        diag->set_order_flip_l0(*g.order_flip_l0);
      diag->set_adaptive(g.adaptive);
      if (g.stop_threshold.has_value()) {
        diag->set_stop_threshold(*g.stop_threshold);
      }
      diag->mutable_raw_probs()->Add(g.raw_probs.begin(), g.raw_probs.end());
    }
  }
}

}  // namespace mesa_anyjev::service
