#include "client/backends/decision_proto.h"

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/decision/question_message.h"

namespace mesa_anyjev::client {

namespace v1 = ::mesa::anyjev::v1;
using decision::Question;

void ToProto(const Question& question, v1::Question* out) {
  decision::QuestionToMessage(question, out);
}

absl::StatusOr<std::vector<std::vector<decision::Decision>>> FromProto(
    const v1::DecideResponse& response, size_t n_states,
    const std::vector<Question>& questions) {
  const size_t n = n_states * questions.size();
  if (static_cast<size_t>(response.decisions_size()) != n) {
    return absl::InternalError(
        absl::StrCat("Decide: ", response.decisions_size(), " decisions for ",
                     n, " (state, question) pairs"));
  }
  std::vector<std::vector<decision::Decision>> out(
      n_states, std::vector<decision::Decision>(questions.size()));
  for (const v1::Decision& in : response.decisions()) {
    const int s = in.state_index(), q = in.question_index();
    if (s < 0 || static_cast<size_t>(s) >= n_states || q < 0 ||
        static_cast<size_t>(q) >= questions.size()) {
      return absl::InternalError("Decide: a decision index out of range");
    }
    auto level = decision::ParseLevel(in.level());
    if (!level.ok() || *level == decision::Level::kAuto) {
      return absl::InternalError(
          absl::StrCat("Decide: served level '", in.level(), "'"));
    }
    if (in.probs_size() != questions[q].k()) {
      return absl::InternalError("Decide: probs do not match the options");
    }
    decision::Decision& d = out[s][q];
    d.question_id = in.question_id();
    d.question_key = in.question_key();
    d.kind = questions[q].kind();
    d.options = questions[q].options();
    d.level = *level;
    d.probs.assign(in.probs().begin(), in.probs().end());
    if (in.has_score_value()) d.score_value = in.score_value();
    const v1::DecisionDiagnostics& g = in.diagnostics();
    decision::DecisionDiagnostics& o = d.diagnostics;
    if (g.has_answer_mass()) o.answer_mass = g.answer_mass();
    o.raw_probs.assign(g.raw_probs().begin(), g.raw_probs().end());
    o.prior_method = g.prior_method();
    o.prior_strength = g.prior_strength();
    if (g.has_order_flip_raw()) o.order_flip_raw = g.order_flip_raw();
    if (g.has_order_flip_l0()) o.order_flip_l0 = g.order_flip_l0();
    o.adaptive = g.adaptive();
    if (g.has_stop_threshold()) o.stop_threshold = g.stop_threshold();
    if (g.has_temperature()) o.temperature = g.temperature();
    o.n_calib = g.n_calib();
    o.readout = g.readout();
    o.exit_layer = g.blocks_executed();
    o.blocks_executed = g.blocks_executed();
    o.n_blocks = g.n_blocks();
    o.early_stop = g.early_stop();
    o.routed_from = g.routed_from();
    o.reordered = g.reordered();
    o.adapted = g.adapted();
    o.adapt_n = g.adapt_n();
    o.head_version = g.head_version();
    o.prompts = g.prompts();
    o.prompt_sha256 = g.prompt_sha256();
    o.prompt_texts.assign(g.prompt_texts().begin(), g.prompt_texts().end());
    // perms are not sent; shifts_read keeps their count.
    o.perms.assign(static_cast<size_t>(g.shifts_read()), {});
  }
  return out;
}

void ToProto(const decision::PriorTable& carried,
             const std::vector<decision::Question>& questions,
             ::mesa::anyjev::v1::DecideRequest* request) {
  for (const auto& entry : carried) {
    // Named, not a structured binding: clang before 16 refuses a lambda's
    // capture of a binding.
    const std::string& listing = entry.first;
    const auto& acc = entry.second;
    const bool asked = std::any_of(
        questions.begin(), questions.end(), [&](const decision::Question& q) {
          return absl::StartsWith(listing, absl::StrCat(q.key(), "|"));
        });
    if (!asked) continue;
    auto* out = request->add_priors();
    out->set_listing(listing);
    out->set_shifts(static_cast<int32_t>(acc.sum.rows()));
    out->set_k(static_cast<int32_t>(acc.sum.cols()));
    out->mutable_sum()->Add(acc.sum.data(), acc.sum.data() + acc.sum.size());
    out->set_n(acc.n);
  }
}

absl::Status FromProto(const ::mesa::anyjev::v1::DecideResponse& response,
                       decision::PriorTable* carried) {
  for (int i = 0; i < response.priors_size(); ++i) {
    const auto& p = response.priors(i);
    auto acc = decision::MakePriorAccumulator(
        absl::StrCat("Decide response priors[", i, "]"), p.shifts(), p.k(),
        p.sum().data(), p.sum_size(), p.n());
    if (!acc.ok()) return absl::InternalError(acc.status().message());
    (*carried)[p.listing()] = *std::move(acc);
  }
  return absl::OkStatus();
}

}  // namespace mesa_anyjev::client
