// decision_tool: the C++ decision engine as a command, for
// tests/e2e/test_decision_parity.py, which runs the same script through the
// anyjev 0.2.0 package and compares. Reads one JSON script on stdin:
//
//   {"decider": {DeciderOptions fields}, "full": false,
//    "hidden": {"states": {state: [[f32 x d] x (n_layers + 1)]},
//               "options": {option: [[f32 x d] x (n_layers + 1)]}},
//    "logprobs": {prompt text: [label logprob in position order]},
//    "ops": [{"op": "decide" | "calibrate" | "fit_head" | "observe" |
//                   "calibrate_adaptive" | "export" | "load" |
//                   "load_artifact" | "replace_key" | "served_level" |
//                   "running_prior" | "route" | "reset_prior" | "key" |
//                   "prompt" | "labels" | "temperature" | "cp_upper" |
//                   "spread_order" | "permutation" | "folds" | "candidates",
//                   ...}]}
//
// and writes {"results": [...]}, one entry per op ({"error": {"code",
// "message"}} when it failed). The backend is the fake model; with "hidden"
// its hidden state for a prompt is states[state][layer] +
// options[first displayed option][layer] in float32, so both sides can
// compute the same features from arrays; with "logprobs" every prompt's
// label logprobs come from that table (recorded from the anyjev side), so
// both sides read bit-identical inputs and a prompt the tool renders
// differently is an error. With "full", each decision carries every field
// and diagnostic, a decide may set any DecideOptions field (its "carry"
// keeps one prior table across the script's decides), and the results end
// with the backend calls made: the byte-for-byte record a change that must
// not change behaviour is compared on.
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/decision/decider.h"
#include "common/decision/head_fit.h"
#include "common/decision/legacy_random_state.h"
#include "common/decision/permute.h"
#include "common/decision/prompt_builder.h"
#include "common/decision/stopping.h"
#include "common/decision/temperature_scaler.h"
#include "common/fake_backend.h"
#include "common/text/bpe_tokenizer.h"
#include "common/text/chat_template.h"

namespace mesa_anyjev {
namespace {

using Json = nlohmann::ordered_json;
using decision::Decider;
using decision::Level;
using decision::Question;

// The fake model with hidden states read from tables.
class TableBackend final : public Backend {
 public:
  TableBackend(Json states, Json options, Json logprobs)
      : states_(std::move(states)),
        options_(std::move(options)),
        logprobs_(std::move(logprobs)) {}

  const ModelIdentity& identity() const override { return fake_.identity(); }
  const Capabilities& capabilities() const override {
    return fake_.capabilities();
  }
  const text::Tokenizer& tokenizer() const override {
    return fake_.tokenizer();
  }
  const text::ChatTemplate& chat_template() const override {
    return fake_.chat_template();
  }
  absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> Logprobs(
      const std::vector<PromptGroup>& groups, int32_t top_k,
      const CallControl& control) override {
    Log("logprobs", groups);
    if (logprobs_.is_null()) return fake_.Logprobs(groups, top_k, control);
    std::vector<std::vector<PromptLogprobs>> out;
    for (const PromptGroup& group : groups) {
      std::vector<PromptLogprobs> rows;
      for (const auto& suffix : group.suffixes) {
        std::vector<TokenId> ids = group.prefix;
        ids.insert(ids.end(), suffix.begin(), suffix.end());
        auto text = fake_.tokenizer().Decode(ids);
        if (!text.ok()) return text.status();
        if (!logprobs_.contains(*text)) {
          return absl::NotFoundError(
              absl::StrCat("the oracle never scored this prompt: ", *text));
        }
        PromptLogprobs row;
        row.label_logprobs = logprobs_[*text].get<std::vector<double>>();
        if (row.label_logprobs.size() != group.label_ids.size()) {
          return absl::InternalError("recorded logprobs of another width");
        }
        rows.push_back(std::move(row));
      }
      out.push_back(std::move(rows));
    }
    return out;
  }
  absl::StatusOr<HiddenStatesResult> HiddenStates(
      const std::vector<PromptGroup>& groups,
      const std::vector<int32_t>& layers, const CallControl& control) override {
    Log("hidden_states", groups);
    calls_.back()["layers"] = layers;
    if (states_.is_null()) return fake_.HiddenStates(groups, layers, control);
    HiddenStatesResult result;
    result.layers = layers;
    result.hidden_size = FakeBackend::kHiddenSize;
    for (const PromptGroup& group : groups) {
      for (const auto& suffix : group.suffixes) {
        std::vector<TokenId> ids = group.prefix;
        ids.insert(ids.end(), suffix.begin(), suffix.end());
        auto text = fake_.tokenizer().Decode(ids);
        if (!text.ok()) return text.status();
        const FakePrompt prompt = ParseFakePrompt(*text);
        if (!states_.contains(prompt.state) || prompt.options.empty() ||
            !options_.contains(prompt.options[0])) {
          return absl::NotFoundError(absl::StrCat(
              "no hidden table entry for state '", prompt.state, "'"));
        }
        for (int32_t layer : layers) {
          const Json& s = states_[prompt.state][layer];
          const Json& o = options_[prompt.options[0]][layer];
          for (int32_t h = 0; h < result.hidden_size; ++h) {
            result.values.push_back(s[h].get<float>() + o[h].get<float>());
          }
        }
        ++result.n_prompts;
      }
    }
    return result;
  }

  // Every call so far: its kind, and per group the prefix and suffix sizes.
  const Json& calls() const { return calls_; }

 private:
  void Log(const char* kind, const std::vector<PromptGroup>& groups) {
    Json sizes = Json::array();
    for (const PromptGroup& group : groups) {
      Json suffixes = Json::array();
      for (const auto& suffix : group.suffixes) {
        suffixes.push_back(suffix.size());
      }
      sizes.push_back({group.prefix.size(), std::move(suffixes)});
    }
    calls_.push_back({{"call", kind}, {"groups", std::move(sizes)}});
  }

  FakeBackend fake_;
  Json calls_ = Json::array();
  Json states_;
  Json options_;
  Json logprobs_;
};

absl::StatusOr<Question> ParseQuestion(const Json& q) {
  const std::string kind = q.value("kind", std::string("choice"));
  const std::string text = q.value("text", std::string());
  const std::string name = q.value("name", std::string());
  absl::StatusOr<Question> out = absl::InvalidArgumentError("kind");
  if (kind == "choice") {
    out = Question::Choice(text, q["options"].get<std::vector<std::string>>(),
                           name);
  } else if (kind == "noul") {
    out = Question::Noul(text, name);
  } else if (kind == "score") {
    if (q.contains("levels")) {
      out = Question::ScoreLevels(
          text, q["levels"].get<std::vector<std::string>>(), name);
    } else {
      const Json scale = q.value("scale", Json::array({0.0, 1.0}));
      out =
          Question::ScoreBins(text, q.value("bins", 5), scale[0].get<double>(),
                              scale[1].get<double>(), name);
    }
  }
  return out;
}

std::vector<std::string> Strings(const Json& j) {
  return j.get<std::vector<std::string>>();
}

Json MatrixJson(const decision::Matrix& m) {
  Json rows = Json::array();
  for (Eigen::Index i = 0; i < m.rows(); ++i) {
    Json row = Json::array();
    for (Eigen::Index j = 0; j < m.cols(); ++j) row.push_back(m(i, j));
    rows.push_back(std::move(row));
  }
  return rows;
}

Json DecisionJson(const decision::Decision& d) {
  const auto& g = d.diagnostics;
  Json out;
  out["question_id"] = d.question_id;
  out["key"] = d.question_key;
  out["level"] = decision::LevelName(d.level);
  out["probs"] = d.probs;
  out["answer_index"] = d.answer_index();
  out["confidence"] = d.confidence();
  if (d.score_value.has_value()) out["value"] = *d.score_value;
  if (g.answer_mass.has_value()) out["answer_mass"] = *g.answer_mass;
  out["permutations"] = g.perms.size();
  out["perms"] = g.perms;
  out["prior_method"] = g.prior_method;
  out["prior_strength"] = g.prior_strength;
  if (g.prior.has_value()) out["prior"] = MatrixJson(*g.prior);
  if (g.order_flip_raw.has_value()) out["order_flip_raw"] = *g.order_flip_raw;
  if (g.order_flip_l0.has_value()) out["order_flip_l0"] = *g.order_flip_l0;
  out["raw_probs"] = g.raw_probs;
  if (!g.l0_probs.empty()) out["l0_probs"] = g.l0_probs;
  if (g.temperature.has_value()) out["temperature"] = *g.temperature;
  if (g.adaptive) {
    out["shifts_used"] = g.perms.size();
    out["stop_threshold"] =
        g.stop_threshold.has_value() ? Json(*g.stop_threshold) : Json(nullptr);
  }
  if (!g.readout.empty()) {
    out["readout"] = g.readout;
    out["exit_layer"] = g.exit_layer;
    out["routed_from"] = g.routed_from;
    out["reordered"] = g.reordered;
    out["adapted"] = g.adapted;
    out["adapt_n"] = g.adapt_n;
    out["listing"] = g.listing;
  }
  out["prompts"] = g.prompt_texts;
  return out;
}

// Every field of a decision and its diagnostics ("full" scripts).
Json FullDecisionJson(const decision::Decision& d) {
  const auto& g = d.diagnostics;
  const auto opt = [](const std::optional<double>& v) {
    return v.has_value() ? Json(*v) : Json(nullptr);
  };
  const auto matrix = [](const std::optional<decision::Matrix>& m) {
    return m.has_value() ? MatrixJson(*m) : Json(nullptr);
  };
  Json out;
  out["question_id"] = d.question_id;
  out["key"] = d.question_key;
  out["kind"] = decision::QuestionKindName(d.kind);
  out["options"] = d.options;
  out["level"] = decision::LevelName(d.level);
  out["probs"] = d.probs;
  out["score_value"] = opt(d.score_value);
  out["answer_mass"] = opt(g.answer_mass);
  out["perms"] = g.perms;
  out["raw_probs"] = g.raw_probs;
  out["p_pos_raw"] = matrix(g.p_pos_raw);
  out["prior_method"] = g.prior_method;
  out["prior_strength"] = g.prior_strength;
  out["prior"] = matrix(g.prior);
  out["order_flip_raw"] = opt(g.order_flip_raw);
  out["order_flip_l0"] = opt(g.order_flip_l0);
  out["l0_probs"] = g.l0_probs;
  out["adaptive"] = g.adaptive;
  out["stop_threshold"] = opt(g.stop_threshold);
  out["stop_stat"] = g.stop_stat;
  out["stop_calibrated"] = g.stop_calibrated;
  out["temperature"] = opt(g.temperature);
  out["n_calib"] = g.n_calib;
  out["readout"] = g.readout;
  out["exit_layer"] = g.exit_layer;
  out["blocks_executed"] = g.blocks_executed;
  out["n_blocks"] = g.n_blocks;
  out["early_stop"] = g.early_stop;
  out["listing"] = g.listing;
  out["routed_from"] = g.routed_from;
  out["reordered"] = g.reordered;
  out["adapted"] = g.adapted;
  out["adapt_n"] = g.adapt_n;
  out["head_version"] = g.head_version;
  out["prompts"] = g.prompts;
  out["prompt_sha256"] = g.prompt_sha256;
  out["prompt_texts"] = g.prompt_texts;
  return out;
}

Json PriorTableJson(const decision::PriorTable& table) {
  Json out = Json::object();
  for (const auto& [listing, acc] : table) {
    out[listing] = {{"n", acc.n}, {"sum", MatrixJson(acc.sum)}};
  }
  return out;
}

// The state a script's ops share.
struct Tool {
  Decider* decider;
  bool full = false;
  decision::PriorTable carried;  // a "full" decide's "carry"
};

// A "full" decide's DecideOptions beyond return_prompts and require.
absl::Status ParseFullOptions(const Json& op, Tool* tool,
                              decision::DecideOptions* options) {
  if (op.contains("prior")) {
    auto prior = decision::ParsePriorMode(op["prior"].get<std::string>());
    if (!prior.ok()) return prior.status();
    options->prior = *prior;
  }
  if (op.contains("combine")) {
    auto combine = decision::ParseCombine(op["combine"].get<std::string>());
    if (!combine.ok()) return combine.status();
    options->combine = *combine;
  }
  if (op.contains("canonical_order")) {
    options->canonical_order = op["canonical_order"].get<bool>();
  }
  if (op.contains("max_permutations")) {
    options->max_permutations = op["max_permutations"].get<int>();
  }
  if (op.contains("adaptive_shifts")) {
    options->adaptive_shifts = op["adaptive_shifts"].get<bool>();
  }
  if (op.contains("adaptive_margin")) {
    options->adaptive_margin = op["adaptive_margin"].get<double>();
  }
  options->exact_heads = op.value("exact_heads", false);
  options->return_details = op.value("return_details", false);
  if (op.value("carry", false)) options->carried_priors = &tool->carried;
  return absl::OkStatus();
}

absl::StatusOr<Json> RunOp(const Json& op, Tool* tool) {
  Decider* decider = tool->decider;
  const std::string name = op.at("op").get<std::string>();
  if (name == "decide") {
    std::vector<Question> questions;
    for (const Json& q : op["questions"]) {
      auto question = ParseQuestion(q);
      if (!question.ok()) return question.status();
      questions.push_back(*std::move(question));
    }
    auto level = decision::ParseLevel(op.value("level", std::string("L0")));
    if (!level.ok()) return level.status();
    decision::DecideOptions options;
    options.return_prompts = op.value("return_prompts", false);
    if (op.contains("require")) {
      auto require = decision::ParseLevel(op["require"].get<std::string>());
      if (!require.ok()) return require.status();
      options.require = *require;
    }
    if (tool->full) {
      if (absl::Status parsed = ParseFullOptions(op, tool, &options);
          !parsed.ok()) {
        return parsed;
      }
    }
    auto result =
        decider->Decide(Strings(op["states"]), questions, *level, options);
    if (!result.ok()) return result.status();
    Json out = Json::array();
    for (const auto& row : *result) {
      Json r = Json::array();
      for (const auto& d : row) {
        r.push_back(tool->full ? FullDecisionJson(d) : DecisionJson(d));
      }
      out.push_back(std::move(r));
    }
    if (tool->full && options.carried_priors != nullptr) {
      return Json{{"decisions", std::move(out)},
                  {"carried", PriorTableJson(tool->carried)}};
    }
    return out;
  }
  if (name == "calibrate" || name == "fit_head" ||
      name == "calibrate_adaptive") {
    auto question = ParseQuestion(op["question"]);
    if (!question.ok()) return question.status();
    if (name == "calibrate") {
      return decider->Calibrate(*question, Strings(op["states"]),
                                op["labels"].get<std::vector<int>>());
    }
    if (name == "calibrate_adaptive") {
      auto cert = decider->CalibrateAdaptive(
          *question, Strings(op["states"]),
          op.contains("target")
              ? std::optional<double>(op["target"].get<double>())
              : std::nullopt);
      if (!cert.ok()) return cert.status();
      Json out;
      out["threshold"] =
          cert->threshold.has_value() ? Json(*cert->threshold) : Json(nullptr);
      out["n"] = cert->n;
      out["K"] = cert->k;
      if (cert->threshold.has_value()) {
        out["disagreements"] = cert->disagreements;
        out["bound"] = cert->bound;
        out["mean_shifts"] = cert->mean_shifts;
        out["max_shifts"] = cert->max_shifts;
      }
      return out;
    }
    decision::FitHeadOptions options;
    if (op.contains("layers"))
      options.layers = op["layers"].get<std::vector<int>>();
    options.listing = op.value("listing", std::string("auto"));
    return decider->FitHead(*question, Strings(op["states"]),
                            op["labels"].get<std::vector<int>>(), options);
  }
  if (name == "observe") {
    auto question = ParseQuestion(op["question"]);
    if (!question.ok()) return question.status();
    auto art = decider->Observe(*question, op["state"].get<std::string>(),
                                op["label"].get<int>());
    if (!art.ok()) return art.status();
    return art->has_value() ? **art : Json(nullptr);
  }
  if (name == "export") {
    return decider->artifacts().Export(op.value("observations", false));
  }
  if (name == "load") {
    auto n = decider->artifacts().Load(op["artifacts"]);
    if (!n.ok()) return n.status();
    return Json(*n);
  }
  if (name == "load_artifact") {
    auto question = ParseQuestion(op["question"]);
    if (!question.ok()) return question.status();
    auto status = decider->artifacts().LoadArtifact(*question, op["artifact"]);
    if (!status.ok()) return status;
    return Json(true);
  }
  if (name == "replace_key") {
    auto status = decider->artifacts().ReplaceKey(op["key"].get<std::string>(),
                                                  op["artifacts"]);
    if (!status.ok()) return status;
    return Json(true);
  }
  if (name == "served_level" || name == "running_prior" || name == "route") {
    auto question = ParseQuestion(op["question"]);
    if (!question.ok()) return question.status();
    if (name == "served_level") {
      auto level = decision::ParseLevel(op.value("level", std::string("auto")));
      if (!level.ok()) return level.status();
      decision::DecideOptions options;
      options.exact_heads = op.value("exact_heads", false);
      auto served = decider->ServedLevel(*question, *level, options);
      if (!served.ok()) return served.status();
      return Json(decision::LevelName(*served));
    }
    if (name == "running_prior") {
      const auto prior = decider->RunningPrior(*question);
      return prior.has_value() ? MatrixJson(*prior) : Json(nullptr);
    }
    const auto routed = decider->artifacts().Route(*question);
    if (!routed.has_value()) return Json(nullptr);
    return Json{{"exact", routed->exact},
                {"question_id", routed->entry->question_id},
                {"version", routed->entry->version},
                {"index_map", routed->index_map}};
  }
  if (name == "reset_prior") {
    if (op.contains("question")) {
      auto question = ParseQuestion(op["question"]);
      if (!question.ok()) return question.status();
      decider->ResetPrior(question->key());
    } else {
      decider->ResetAllPriors();
    }
    return Json(true);
  }
  if (name == "key") {
    auto question = ParseQuestion(op["question"]);
    if (!question.ok()) return question.status();
    Json out;
    out["key"] = question->key();
    out["id"] = question->id();
    out["options"] = question->options();
    if (question->kind() == decision::QuestionKind::kScore) {
      out["centers"] = question->BinCenters();
    }
    return out;
  }
  if (name == "prompt") {
    auto question = ParseQuestion(op["question"]);
    if (!question.ok()) return question.status();
    const text::ChatTemplate tmpl =
        op.value("template", std::string("none")) == "qwen3"
            ? text::ChatTemplate::Qwen3()
            : text::ChatTemplate::None();
    const auto labels = op["labels"].get<std::vector<std::string>>();
    const auto parts = decision::RenderPromptParts(
        tmpl, decision::BuildPrompt(op["state"].get<std::string>(), *question,
                                    op["perm"].get<std::vector<int>>(),
                                    decision::kDefaultSystem, labels));
    return Json{{"prefix", parts.prefix}, {"suffix", parts.suffix}};
  }
  if (name == "labels") {
    auto question = ParseQuestion(op["question"]);
    if (!question.ok()) return question.status();
    auto tokenizer =
        text::BpeTokenizer::FromFile(op["tokenizer"].get<std::string>());
    if (!tokenizer.ok()) return tokenizer.status();
    auto labels = decision::ResolveLabels(**tokenizer, *question);
    if (!labels.ok()) return labels.status();
    return Json{{"labels", labels->labels}, {"ids", labels->ids}};
  }
  if (name == "temperature") {
    const auto rows = op["probs"].get<std::vector<std::vector<double>>>();
    decision::Matrix probs(rows.size(), rows[0].size());
    for (size_t i = 0; i < rows.size(); ++i) {
      for (size_t j = 0; j < rows[i].size(); ++j) probs(i, j) = rows[i][j];
    }
    return Json(decision::TemperatureScaler::Fit(
                    probs, op["labels"].get<std::vector<int>>())
                    .temperature);
  }
  if (name == "cp_upper") {
    return Json(decision::CpUpper(op["k"].get<int>(), op["n"].get<int>(),
                                  op.value("delta", 0.05)));
  }
  if (name == "spread_order") {
    return Json(decision::SpreadOrder(op["k"].get<int>()));
  }
  if (name == "permutation") {
    decision::LegacyRandomState rng(op.value("seed", 0u));
    Json out = Json::array();
    for (int i = 0; i < op.value("count", 1); ++i) {
      out.push_back(rng.Permutation(op["n"].get<int>()));
    }
    return out;
  }
  if (name == "folds") {
    return Json(decision::Folds(op["n"].get<int>(), op.value("k", 5)));
  }
  if (name == "candidates") {
    return Json(decision::DefaultCandidateBlocks(op["n"].get<int>()));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown op '", name, "'"));
}

decision::DeciderOptions ParseOptions(const Json& d) {
  decision::DeciderOptions o;
  if (d.contains("prior")) {
    o.prior = *decision::ParsePriorMode(d["prior"].get<std::string>());
  }
  o.min_prior_n = d.value("min_prior_n", o.min_prior_n);
  if (d.contains("prior_strength")) {
    o.prior_strength = d["prior_strength"].get<double>();
  }
  if (d.contains("max_permutations")) {
    o.max_permutations = d["max_permutations"].get<int>();
  }
  if (d.contains("combine")) {
    o.combine = *decision::ParseCombine(d["combine"].get<std::string>());
  }
  o.record_content_free = d.value("record_content_free", false);
  o.canonical_order = d.value("canonical_order", false);
  o.adaptive_shifts = d.value("adaptive_shifts", false);
  o.adaptive_min_shifts = d.value("adaptive_min_shifts", 2);
  if (d.contains("adaptive_margin")) {
    o.adaptive_margin = d["adaptive_margin"].get<double>();
  }
  if (d.value("adaptive_stat", std::string("logit")) == "prob") {
    o.adaptive_stat = decision::StopStat::kProb;
  }
  o.adaptive_target = d.value("adaptive_target", 0.01);
  o.adaptive_wave = d.value("adaptive_wave", 2);
  o.adaptive_spread_order =
      d.value("adaptive_order", std::string("spread")) == "spread";
  const Json adapt = d.value("adapt", Json("routed"));
  if (adapt.is_boolean()) {
    o.adapt = adapt.get<bool>() ? decision::AdaptMode::kAlways
                                : decision::AdaptMode::kNever;
  }
  o.adapt_min_n = d.value("adapt_min_n", 30);
  if (d.contains("cf_probes")) o.cf_probes = Strings(d["cf_probes"]);
  o.system = d.value("system", o.system);
  o.auto_routes_reworded =
      d.value("auto_routes_reworded", o.auto_routes_reworded);
  o.max_prompts_per_call =
      d.value("max_prompts_per_call", o.max_prompts_per_call);
  return o;
}

}  // namespace
}  // namespace mesa_anyjev

int main() {
  using mesa_anyjev::decision::Decider;
  using Json = nlohmann::ordered_json;
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  const Json script = Json::parse(input);
  const Json hidden = script.value("hidden", Json::object());
  mesa_anyjev::TableBackend backend(hidden.value("states", Json()),
                                    hidden.value("options", Json()),
                                    script.value("logprobs", Json()));
  Decider decider(&backend, mesa_anyjev::ParseOptions(
                                script.value("decider", Json::object())));
  mesa_anyjev::Tool tool{&decider, script.value("full", false), {}};
  Json results = Json::array();
  for (const Json& op : script["ops"]) {
    auto result = mesa_anyjev::RunOp(op, &tool);
    if (result.ok()) {
      results.push_back(*std::move(result));
    } else {
      results.push_back(
          {{"error",
            {{"code", absl::StatusCodeToString(result.status().code())},
             {"message", std::string(result.status().message())}}}});
    }
  }
  Json out{{"results", results}};
  if (tool.full) out["calls"] = backend.calls();
  std::cout << out.dump() << "\n";
  return 0;
}
