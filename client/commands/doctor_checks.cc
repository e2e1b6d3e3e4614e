#include "client/commands/doctor_checks.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/backends/composite_provider.h"
#include "client/backends/daemon_provider.h"
#include "client/backends/local_provider.h"
#include "client/backends/provider.h"
#include "client/commands/agreement_access.h"
#include "client/commands/bundle_access.h"
#include "client/commands/commands.h"
#include "common/decision/label_resolver.h"
#include "common/gateway/gateway_backend.h"
#include "common/questions/question_lock.h"
#include "common/questions/question_set.h"

namespace mesa_anyjev::client {

using gateway::GatewayBackend;
using gateway::GatewayOptions;
using gateway::GatewayOptionsFromConfig;
using gateway::kMesaMcpApiKeyVariable;
using gateway::kNativeApiKeyVariable;
namespace {

using decision::Level;
using decision::Question;

constexpr char kSingleTokens[] =
    "A..Z, Yes/No and 1..9 are single tokens (score falls back to letters "
    "above 9)";

// A tokenizer answering from ids fetched in one batch (the daemon's), so the
// decider's own label rule (MapLabelTokens) can judge them.
class FetchedTokenizer : public text::Tokenizer {
 public:
  explicit FetchedTokenizer(std::map<std::string, std::vector<TokenId>> ids)
      : ids_(std::move(ids)) {}
  absl::StatusOr<std::vector<TokenId>> Encode(
      std::string_view text) const override {
    const auto it = ids_.find(std::string(text));
    if (it == ids_.end()) {
      return absl::InternalError(
          absl::StrCat("not fetched: '", std::string(text), "'"));
    }
    return it->second;
  }
  absl::StatusOr<std::string> Decode(absl::Span<const TokenId>) const override {
    return absl::UnimplementedError("FetchedTokenizer decodes nothing");
  }
  int32_t vocab_size() const override { return 0; }

 private:
  std::map<std::string, std::vector<TokenId>> ids_;
};

// The reference's three label sets, each mapped by the decider's rule.
absl::Status LabelsSingleTokens(const text::Tokenizer& tokenizer) {
  const std::vector<std::string> labels = CheckedLabels();
  const std::vector<std::string> letters(labels.begin(), labels.begin() + 26);
  const std::vector<std::string> noul(labels.begin() + 26, labels.begin() + 28);
  const std::vector<std::string> digits(labels.begin() + 28, labels.end());
  for (const auto* set : {&letters, &noul, &digits}) {
    auto ids = decision::MapLabelTokens(tokenizer, *set);
    if (!ids.ok()) return ids.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<FetchedTokenizer> FetchLabels(DaemonClient& daemon) {
  std::vector<std::string> texts;
  for (const std::string& label : CheckedLabels()) {
    texts.push_back(label);
    texts.push_back(" " + label);
  }
  auto ids = daemon.Tokenize(texts);
  if (!ids.ok()) return ids.status();
  std::map<std::string, std::vector<TokenId>> map;
  for (size_t i = 0; i < texts.size(); ++i) map[texts[i]] = (*ids)[i];
  return FetchedTokenizer(std::move(map));
}

class Doctor {
 public:
  Doctor(const config::Config& config, std::string kind)
      : config_(config), kind_(std::move(kind)) {}

  std::vector<DoctorCheck> Run() {
    QuestionsLock();
    Add("backend", true,
        absl::StrCat("kind=", kind_,
                     " planner=static profile=", config_.policy.profile));
    if (kind_ == "gateway" || kind_ == "composite") GatewayGroup();
    if (kind_ == "hf" || kind_ == "composite") DaemonGroup();
    // Agreement needs only both tokenizers, whatever else failed.
    if (kind_ == "composite") Agreement(gateway_.get(), daemon_.get());
    Artifacts();
    Agreements();
    return std::move(checks_);
  }

 private:
  bool Add(std::string name, bool ok, std::string detail) {
    checks_.push_back({std::move(name), ok, std::move(detail)});
    return ok;
  }

  void QuestionsLock() {
    const questions::QuestionSet& set = questions::QuestionSet::Reference();
    auto drift = questions::LockDrift(set, DefaultLockPath());
    if (!drift.ok()) {
      Add("questions lock", false, std::string(drift.status().message()));
    } else if (drift->empty()) {
      Add("questions lock", true, questions::LockSha(set).substr(0, 12));
    } else {
      Add("questions lock", false, absl::StrJoin(*drift, "; "));
    }
  }

  // url, liveness, key, tokenizer, label tokens, logprobs probe, cap.
  void GatewayGroup() {
    GatewayOptions options = GatewayOptionsFromConfig(config_.backend);
    auto base = GatewayBackend::ValidateBaseUrl(options);
    if (!base.ok()) {
      Add("gateway url", false, std::string(base.status().message()));
      return;
    }
    CallControl control;
    control.deadline = absl::Now() + absl::Seconds(5);
    std::string path;
    const absl::Status live =
        GatewayBackend::CheckLiveness(options, control, &path);
    if (!live.ok()) {
      // A transport failure (no answer at all) versus a non-200 answer.
      const bool transport =
          absl::StartsWith(live.message(), "gateway liveness");
      Add("gateway liveness", false,
          transport ? absl::StrCat(*base, ": ", live.message(),
                                   " (is the tunnel up?)")
                    : absl::StrCat(*base, " -> ", live.message()));
      return;
    }
    // Which route answered says what the server is (LiteLLM or vLLM).
    Add("gateway liveness", true, absl::StrCat(*base, path, " -> 200"));
    if (options.api_key_env.empty() && options.api_key_file.empty()) {
      Add("gateway key", false,
          absl::StrCat(kNativeApiKeyVariable, " or ", kMesaMcpApiKeyVariable,
                       " is unset"));
      return;
    }
    options.workers = 1;
    control.deadline = absl::Now() + absl::Seconds(config_.backend.timeout);
    std::string readout;
    auto backend = GatewayBackend::Connect(options, control, &readout);
    if (!Add("tokenizer", backend.ok(),
             backend.ok() ? options.tokenizer
                          : absl::StrCat(options.tokenizer, ": ",
                                         backend.status().message()))) {
      return;
    }
    gateway_ = *std::move(backend);
    if (!LabelTokens(gateway_->tokenizer())) return;
    Add("label readout", true,
        readout.empty() ? config_.backend.label_readout : readout);
    if (!GatewayProbe(*gateway_)) return;
    // backend.logprobs must be within the server's cap (vLLM's
    // --max-logprobs, 20 unless raised); its refusal names the cap.
    control.deadline = absl::Now() + absl::Seconds(config_.backend.timeout);
    const int32_t asked = config_.backend.logprobs;
    const absl::Status cap = gateway_->CheckLogprobsCap(asked, control);
    if (cap.ok()) {
      Add("logprobs cap", true, absl::StrCat("logprobs=", asked, " accepted"));
    } else {
      Add("logprobs cap", false,
          absl::StrCat("logprobs=", asked, " refused: ", cap.message(),
                       cap.code() == absl::StatusCode::kInvalidArgument
                           ? " (set backend.logprobs to the server's cap)"
                           : ""));
    }
  }

  bool LabelTokens(const text::Tokenizer& tokenizer) {
    const absl::Status single = LabelsSingleTokens(tokenizer);
    return Add("label tokens", single.ok(),
               single.ok() ? kSingleTokens : std::string(single.message()));
  }

  // The reference's probe: the noul over one state at raw; ok when both
  // labels were in the top-k (no missing label) and the values are finite.
  bool GatewayProbe(GatewayBackend& backend) {
    const int64_t missing_before = backend.missing_label_events();
    const std::string readout =
        backend.label_readout() == gateway::LabelReadout::kTokenIds
            ? std::string("token_ids")
            : absl::StrCat("top_k=", config_.backend.logprobs);
    CountingBackend counting(&backend);
    decision::DeciderOptions options;
    options.prior = decision::PriorMode::kNone;
    decision::Decider decider(&counting, options);
    const auto start = std::chrono::steady_clock::now();
    auto decided =
        decider.Decide({kProbeStateYes},
                       {Question::Noul(kProbeQuestion, "probe")}, Level::kRaw);
    const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
    if (!decided.ok()) {
      return Add("gateway logprobs", false,
                 absl::StrCat(readout, " labels_present=false ", ms,
                              " ms error=", decided.status().message()));
    }
    const bool present = backend.missing_label_events() == missing_before;
    bool finite = true;
    for (double p : (*decided)[0][0].probs) finite = finite && std::isfinite(p);
    return Add("gateway logprobs", present && finite,
               absl::StrCat(readout, " labels_present=",
                            present ? "true" : "false", " ", ms, " ms"));
  }

  // reachable and SERVING, model, label tokens, answer mass, early stop,
  // attention.
  void DaemonGroup() {
    const std::string address = config_.client.address;
    auto client = DaemonClient::Create(config_.client);
    if (!client.ok()) {
      Add("daemon", false, std::string(client.status().message()));
      return;
    }
    auto health = (*client)->Health();
    if (!health.ok()) {
      Add("daemon", false, std::string(health.status().message()));
      return;
    }
    if (!Add("daemon", *health == "SERVING",
             absl::StrCat(address, " -> ", *health))) {
      return;
    }
    auto provider = DaemonProvider::Create(config_);
    if (!provider.ok()) {
      Add("hf model", false, std::string(provider.status().message()));
      return;
    }
    daemon_ = *std::move(provider);
    const DaemonInfo& info = daemon_->daemon();
    const Capabilities& caps = info.capabilities;
    // backend.hf_model "" (the default) takes the daemon's own model.
    const bool named = config_.backend.hf_model.empty() ||
                       info.identity.name == config_.backend.hf_model;
    if (!Add("hf model", named,
             named
                 ? absl::StrCat(info.identity.name, " n_layers=", caps.n_layers,
                                " hidden_size=", caps.hidden_size,
                                " dtype=", info.identity.dtype,
                                " device=", info.identity.device)
                 : absl::StrCat("the daemon serves '", info.identity.name,
                                "' but backend.hf_model is '",
                                config_.backend.hf_model,
                                "' (bundles are keyed by it)"))) {
      return;
    }
    auto fetched = FetchLabels(daemon_->client());
    if (!fetched.ok()) {
      Add("label tokens", false, std::string(fetched.status().message()));
      return;
    }
    if (!LabelTokens(*fetched)) return;
    auto decided = daemon_->DecideBatch({kProbeStateYes, kProbeStateNo},
                                        Question::Noul(kProbeQuestion, "probe"),
                                        Level::kRaw);
    if (!decided.ok()) {
      Add("answer mass", false, std::string(decided.status().message()));
      return;
    }
    double mass = 1.0;
    for (const auto& d : *decided) {
      mass = std::min(mass, d.diagnostics.answer_mass.value_or(0.0));
    }
    if (!Add("answer mass", mass >= 0.5,
             absl::StrFormat("min answer_mass %.3f on two probe states "
                             "(label tokens %s the answer)",
                             mass, mass >= 0.5 ? "carry" : "do not carry"))) {
      return;
    }
    const bool early = caps.hidden_states && caps.early_stop;
    if (!Add("early stop", early,
             early ? "block loop available for L2 heads"
                   : "the daemon's model serves no early-stopped hidden "
                     "states (L2 unavailable)")) {
      return;
    }
    Add("attention", true,
        info.identity.attention.empty() ? "n/a" : info.identity.attention);
  }

  void Agreement(GatewayBackend* gateway, DaemonProvider* daemon) {
    if (gateway == nullptr || daemon == nullptr) {
      Add("tokenizer agreement", false,
          "needs the gateway's tokenizer and a reachable daemon");
      return;
    }
    const absl::Status agree =
        CheckDaemonLabels(gateway->tokenizer(), daemon->client());
    Add("tokenizer agreement", agree.ok(),
        agree.ok() ? "the gateway's and the daemon's tokenizers give the same "
                     "ids for A..Z, Yes, No and 1..9"
                   : std::string(agree.message()));
  }

  // The promoted bundles this kind would serve (the reference's seventh
  // check): ok when none, or when (strict) each was fit on a compatible
  // backend kind.
  void Artifacts() {
    std::map<std::string, int> current;
    std::vector<bundles::VersionEntry> versions;
    std::string dir;
    if (BundlesInDaemon(kind_) && daemon_ == nullptr) {
      Add("artifacts", false, "needs a reachable daemon (see above)");
      return;
    }
    // The daemon keys its store by the model it serves.
    const std::string model = BundlesInDaemon(kind_)
                                  ? daemon_->info().model
                                  : BundleModelFor(config_, kind_);
    if (BundlesInDaemon(kind_)) {
      auto client = DaemonClient::Create(config_.client);
      absl::StatusOr<RemoteBundles> listed =
          client.ok() ? (*client)->ListBundles(BundleLockSha())
                      : absl::StatusOr<RemoteBundles>(client.status());
      if (!listed.ok() &&
          listed.status().code() == absl::StatusCode::kFailedPrecondition) {
        Add("artifacts", true,
            absl::StrCat("the daemon keeps no bundle store for ", model,
                         " (serving at L0)"));
        return;
      }
      if (!listed.ok()) {
        Add("artifacts", false, std::string(listed.status().message()));
        return;
      }
      current = listed->current;
      versions = std::move(listed->versions);
      dir = listed->dir;
    } else {
      // Nothing promoted yet: say so without creating the store's folders.
      const std::string lock_dir =
          bundles::LockDirOf(config_.artifacts.dir, model, BundleLockSha());
      if (!std::filesystem::exists(lock_dir)) {
        Add("artifacts", true,
            absl::StrCat("no promoted bundle for ", model, " under ", lock_dir,
                         " (serving at L0)"));
        return;
      }
      auto store = OpenLocalBundleStore(config_, kind_);
      if (!store.ok()) {
        Add("artifacts", false, std::string(store.status().message()));
        return;
      }
      auto all = (*store)->CurrentAll();
      auto listed = (*store)->List();
      if (!all.ok() || !listed.ok()) {
        Add("artifacts", false,
            std::string(!all.ok() ? all.status().message()
                                  : listed.status().message()));
        return;
      }
      current = *std::move(all);
      versions = *std::move(listed);
      dir = (*store)->dir();
    }
    if (current.empty()) {
      Add("artifacts", true,
          absl::StrCat("no promoted bundle for ", model, " under ", dir,
                       " (serving at L0)"));
      return;
    }
    bool ok = true;
    std::vector<std::string> parts;
    for (const auto& [question, version] : current) {
      std::string fitted_on = "null";
      std::string fit_kind;
      for (const bundles::VersionEntry& entry : versions) {
        if (entry.version != version || !entry.manifest.ok()) continue;
        const auto& manifest = *entry.manifest;
        if (manifest.contains("fitted_on")) {
          fitted_on = manifest["fitted_on"].dump();
          fit_kind = manifest["fitted_on"].value("backend_kind", "");
        }
      }
      // A composite may serve bundles fit on hf, whose heads read the same
      // daemon hidden states; nothing else crosses.
      const bool compatible = fit_kind.empty() || fit_kind == kind_ ||
                              (kind_ == "composite" && fit_kind == "hf");
      ok = ok && (!config_.artifacts.strict || compatible);
      parts.push_back(
          absl::StrCat(question, "=v", version, " fitted_on=", fitted_on));
    }
    Add("artifacts", ok, absl::StrJoin(parts, "; "));
  }

  // The agreement records beside this kind's bundles (docs/bundles.md,
  // Agreement), each question's standing judged against the CLI's lock and
  // the label store now: ok unless a record cannot be read.
  void Agreements() {
    if (BundlesInDaemon(kind_) && daemon_ == nullptr) {
      Add("agreements", false, "needs a reachable daemon (see above)");
      return;
    }
    const std::string model = BundlesInDaemon(kind_)
                                  ? daemon_->info().model
                                  : BundleModelFor(config_, kind_);
    auto listed = ListAgreementsOf(config_, kind_);
    if (!listed.ok()) {
      // A daemon without a store keeps no records either.
      const bool none = absl::IsFailedPrecondition(listed.status());
      Add("agreements", none,
          none ? "none (the daemon keeps no bundle store)"
               : std::string(listed.status().message()));
      return;
    }
    if (listed->records.empty()) {
      Add("agreements", true,
          absl::StrCat("none for ", model,
                       " (`mesa-anyjev bench compare` "
                       "measures one)"));
      return;
    }
    bool readable = true;
    for (const auto& stored : listed->records) {
      readable = readable && stored.record.ok();
    }
    Add("agreements", readable,
        absl::StrJoin(AgreementLines(listed->records, {model, ""},
                                     CurrentLabelsDigests(config_)),
                      "; "));
  }

  const config::Config& config_;
  const std::string kind_;
  std::vector<DoctorCheck> checks_;
  // Kept once built, for the composite's agreement check.
  std::unique_ptr<GatewayBackend> gateway_;
  std::unique_ptr<DaemonProvider> daemon_;
};

}  // namespace

std::vector<DoctorCheck> RunDoctorChecks(const config::Config& config,
                                         const std::string& kind) {
  return Doctor(config, kind).Run();
}

}  // namespace mesa_anyjev::client
