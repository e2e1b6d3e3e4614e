// FakeBackend: the reference fake (AnyJev anyjev/backends/fake.py with
// mesa-anyjev's default_fake_content and constants), over a full vocabulary.
#include "common/fake_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status/status_macros.h"
#include "common/text/py_text.h"
#include "common/text/utf8.h"
#include "common/util/hash.h"

namespace mesa_anyjev {
namespace {

using text::FakeTokenizer;

// ---- Python works on code points, the prompt is bytes (text/py_text.h). --

// Length of the code point at text[i] if it matches Python's `\s` (Unicode
// whitespace), else 0.
size_t WhitespaceAt(std::string_view text, size_t i) {
  size_t next = i;
  return text::PyIsSpace(text::DecodeAt(text, &next)) ? next - i : 0;
}

// Length of the line break at text[i] as Python's str.splitlines() sees it
// ("\r\n" counts as one), else 0.
size_t LineBreakAt(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
    return 2;
  }
  if (c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
      (c >= '\x1c' && c <= '\x1e')) {
    return 1;
  }
  size_t next = i;
  const char32_t cp = text::DecodeAt(text, &next);
  return (cp == 0x85 || cp == 0x2028 || cp == 0x2029) ? next - i : 0;
}

// Lines of `text`, with the tokenizer's special tokens also ending a line.
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t brk = LineBreakAt(text, i);
    if (brk == 0) {
      for (std::string_view special : FakeTokenizer::kSpecials) {
        if (text.substr(i).starts_with(special)) {
          brk = special.size();
          break;
        }
      }
    }
    if (brk == 0) {
      ++i;
      continue;
    }
    lines.push_back(text.substr(start, i - start));
    i += brk;
    start = i;
  }
  if (start < text.size()) {
    lines.push_back(text.substr(start));
  }
  return lines;
}

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// `^([A-Z]|\d+)\. (.*)$` on one line.
bool MatchOptionLine(std::string_view line, std::string_view* label,
                     std::string_view* option) {
  size_t n = 0;
  if (!line.empty() && line[0] >= 'A' && line[0] <= 'Z') {
    n = 1;
  } else {
    while (n < line.size() && IsAsciiDigit(line[n])) {
      ++n;
    }
  }
  if (n == 0 || line.substr(n, 2) != ". ") {
    return false;
  }
  *label = line.substr(0, n);
  *option = line.substr(n + 2);
  return true;
}

// `^Answer (Yes|No) or (Yes|No)\.$` on one line.
bool MatchNoulLine(std::string_view line, std::string_view* first,
                   std::string_view* second) {
  static constexpr std::string_view kWords[] = {"Yes", "No"};
  for (std::string_view x : kWords) {
    for (std::string_view y : kWords) {
      if (line == "Answer " + std::string(x) + " or " + std::string(y) + ".") {
        *first = x;
        *second = y;
        return true;
      }
    }
  }
  return false;
}

// Python's re.search(rf'"{key}":\s*\{{(.*?)\}}', s, re.S): the group of the
// first match, or false.
bool FindBlock(std::string_view s, std::string_view key,
               std::string_view* group) {
  const std::string needle = "\"" + std::string(key) + "\":";
  for (size_t at = s.find(needle); at != std::string_view::npos;
       at = s.find(needle, at + 1)) {
    size_t i = at + needle.size();
    while (i < s.size()) {
      const size_t ws = WhitespaceAt(s, i);
      if (ws == 0) {
        break;
      }
      i += ws;
    }
    if (i >= s.size() || s[i] != '{') {
      continue;
    }
    const size_t close = s.find('}', i + 1);
    if (close == std::string_view::npos) {
      return false;  // no later occurrence can close either
    }
    *group = s.substr(i + 1, close - i - 1);
    return true;
  }
  return false;
}

// The set of `[a-z0-9]+` words of `s`.
std::vector<std::string_view> Words(std::string_view s) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    const auto word_char = [&](size_t k) {
      return (s[k] >= 'a' && s[k] <= 'z') || IsAsciiDigit(s[k]);
    };
    if (!word_char(i)) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < s.size() && word_char(i)) {
      ++i;
    }
    words.push_back(s.substr(start, i - start));
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

// Box-Muller over raw mt19937_64 output: std::normal_distribution is
// implementation-defined, this is the same with every standard library.
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : engine_(seed) {}
  double Next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // Uniforms in (0, 1): 53 random bits plus a half step.
    const double u1 = (static_cast<double>(engine_() >> 11) + 0.5) * 0x1p-53;
    const double u2 = (static_cast<double>(engine_() >> 11) + 0.5) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// A unit vector of kHashDims dims determined by `text`.
std::vector<double> HashUnitVector(std::string_view text) {
  Gaussian gauss(util::Seed64(text));
  std::vector<double> v(FakeBackend::kHashDims);
  double norm2 = 0.0;
  for (double& x : v) {
    x = gauss.Next();
    norm2 += x * x;
  }
  const double norm = std::sqrt(norm2);
  for (double& x : v) {
    x /= norm;
  }
  return v;
}

std::string Descriptor(double temperature) {
  return absl::StrCat(
      std::string(FakeBackend::kVersion),
      ";vocab_size=", FakeTokenizer::kVocabSize,
      ";n_layers=", FakeBackend::kNumLayers,
      ";hidden_size=", FakeBackend::kHiddenSize,
      ";temperature=", absl::StrFormat("%.17g", temperature),
      ";rest_logit=", absl::StrFormat("%.17g", FakeBackend::kRestLogit),
      ";position_bias=",
      absl::StrJoin(FakeBackend::kPositionBias, ",",
                    [](std::string* out, double b) {
                      absl::StrAppend(out, absl::StrFormat("%.17g", b));
                    }),
      ";noise=", absl::StrFormat("%.17g", FakeBackend::kNoiseFloor), "+",
      absl::StrFormat("%.17g", FakeBackend::kNoiseSlope),
      ";content=default_fake_content;probes=N/A,,[MASK]");
}

}  // namespace

FakePrompt ParseFakePrompt(std::string_view text) {
  FakePrompt prompt;
  static constexpr std::string_view kStateStart = "State:\n";
  static constexpr std::string_view kStateEnd = "\n\nQuestion:";
  if (const size_t at = text.find(kStateStart); at != std::string_view::npos) {
    std::string_view state = text.substr(at + kStateStart.size());
    state = state.substr(0, state.find(kStateEnd));
    prompt.state = state == "(empty)" ? "" : std::string(state);
  }
  for (std::string_view line : SplitLines(text)) {
    std::string_view a;
    std::string_view b;
    if (MatchOptionLine(line, &a, &b)) {
      prompt.labels.emplace_back(a);
      prompt.options.emplace_back(b);
    }
    if (MatchNoulLine(line, &a, &b)) {
      prompt.labels = {std::string(a), std::string(b)};
      prompt.options = prompt.labels;
    }
  }
  return prompt;
}

bool IsContentFreeProbe(std::string_view state) {
  return state == "N/A" || state.empty() || state == "[MASK]";
}

double DefaultFakeContent(std::string_view state, std::string_view option) {
  const std::string s = text::PyLower(state);
  const double jitter =
      (util::HashUnit(std::string(state) + "|" + std::string(option)) - 0.5) *
      0.4;
  if (option == "Yes" || option == "No") {
    std::string_view cand;
    std::string_view target;
    const bool has_cand =
        FindBlock(s, "candidate", &cand) || FindBlock(s, "term", &cand);
    const bool has_target =
        FindBlock(s, "column", &target) || FindBlock(s, "site", &target);
    double score = 0.0;
    if (has_cand && has_target) {
      static constexpr std::string_view kStop[] = {
          "label",    "curie", "ontology", "id",   "description",
          "synonyms", "has",   "children", "true", "false"};
      const std::vector<std::string_view> target_words = Words(target);
      bool overlap = false;
      for (std::string_view w : Words(cand)) {
        if (std::find(std::begin(kStop), std::end(kStop), w) ==
                std::end(kStop) &&
            std::binary_search(target_words.begin(), target_words.end(), w)) {
          overlap = true;
          break;
        }
      }
      score = overlap ? 1.5 : -1.0;
    } else {
      score = s.find("\"identifier\"") != std::string::npos ? -1.5 : 0.5;
    }
    return (option == "Yes" ? score : -score) + jitter;
  }
  std::string_view head = option.substr(0, option.find(':'));
  head = head.substr(0, head.find(' '));
  const std::string lower_head = text::PyLower(head);
  const bool hit =
      !lower_head.empty() && s.find(lower_head) != std::string::npos;
  return (hit ? 1.0 : 0.0) + jitter;
}

std::string FakeModelName(double temperature) {
  return temperature == kFakeTemperature
             ? std::string("fake")
             : absl::StrFormat("fake-t%g", temperature);
}

FakeBackend::FakeBackend(FakeBackendOptions options) : options_(options) {
  identity_.name = FakeModelName(options_.temperature);
  identity_.identity = util::Sha256Hex(Descriptor(options_.temperature));
  identity_.dtype = "float32";
  identity_.device = "cpu";
  identity_.attention = "none (synthetic)";
  capabilities_.hidden_states = true;
  capabilities_.early_stop = true;
  capabilities_.max_choice_k = kMaxChoiceK;
  capabilities_.logprob_top_k = 0;
  capabilities_.n_layers = kNumLayers;
  capabilities_.hidden_size = kHiddenSize;
  capabilities_.vocab_size = tokenizer_.vocab_size();
}

absl::Status FakeBackend::Prepare(const std::vector<PromptGroup>& groups,
                                  bool check_labels,
                                  const CallControl& control) const {
  RETURN_IF_ERROR(
      CheckPromptGroups(groups, FakeTokenizer::kVocabSize, check_labels));
  // The delay stands in for a forward pass: wake every millisecond so a
  // deadline or cancel ends it promptly.
  const absl::Time end = absl::Now() + absl::Seconds(options_.delay_s);
  for (absl::Time now = absl::Now();; now = absl::Now()) {
    RETURN_IF_ERROR(control.StopStatus(now, "fake backend"));
    if (now >= end) {
      break;
    }
    absl::SleepFor(std::min(absl::Milliseconds(1), end - now));
  }
  return absl::OkStatus();
}

std::vector<double> FakeBackend::FullLogprobs(const FakePrompt& prompt) const {
  const int32_t vocab = tokenizer_.vocab_size();
  const bool probe = IsContentFreeProbe(prompt.state);
  // (id, logit) of each displayed label with a bare token; the first display
  // of a repeated label wins.
  std::vector<std::pair<TokenId, double>> label_logits;
  for (size_t j = 0; j < prompt.labels.size(); ++j) {
    const TokenId id = tokenizer_.LabelId(prompt.labels[j]);
    if (id < 0 || std::any_of(label_logits.begin(), label_logits.end(),
                              [id](const auto& e) { return e.first == id; })) {
      continue;
    }
    double z =
        probe ? 0.0 : DefaultFakeContent(prompt.state, prompt.options[j]);
    if (j < kPositionBias.size()) {
      z += kPositionBias[j];
    }
    label_logits.emplace_back(id, z / options_.temperature);
  }
  if (label_logits.empty()) {
    return std::vector<double>(vocab, -std::log(static_cast<double>(vocab)));
  }
  // log Z over the label logits and the single rest logit, stably.
  double max = kRestLogit;
  for (const auto& [id, logit] : label_logits) {
    max = std::max(max, logit);
  }
  double sum = std::exp(kRestLogit - max);
  for (const auto& [id, logit] : label_logits) {
    sum += std::exp(logit - max);
  }
  const double log_z = max + std::log(sum);
  const double n_other = static_cast<double>(vocab - label_logits.size());
  std::vector<double> lp(vocab, kRestLogit - std::log(n_other) - log_z);
  for (const auto& [id, logit] : label_logits) {
    lp[id] = logit - log_z;
  }
  return lp;
}

std::vector<double> FakeBackend::SignalVector(const FakePrompt& prompt) const {
  std::vector<double> v(kHiddenSize, 0.0);
  const size_t n_positions =
      std::min<size_t>(prompt.options.size(), kStateDim0);
  for (size_t j = 0; j < n_positions && j < kPositionBias.size(); ++j) {
    v[j] = kPositionBias[j] / options_.temperature;
  }
  const std::vector<double> state_vec = HashUnitVector(prompt.state);
  std::copy(state_vec.begin(), state_vec.end(), v.begin() + kStateDim0);
  if (!IsContentFreeProbe(prompt.state) && !prompt.options.empty()) {
    size_t best = 0;
    double best_content = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < prompt.options.size(); ++j) {
      const double c = DefaultFakeContent(prompt.state, prompt.options[j]);
      if (c > best_content) {
        best = j;
        best_content = c;
      }
    }
    const std::vector<double> option_vec = HashUnitVector(prompt.options[best]);
    std::copy(option_vec.begin(), option_vec.end(), v.begin() + kOptionDim0);
  }
  return v;
}

absl::StatusOr<std::vector<std::vector<PromptLogprobs>>> FakeBackend::Logprobs(
    const std::vector<PromptGroup>& groups, int32_t top_k,
    const CallControl& control) {
  if (top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k: ", top_k, " is negative"));
  }
  RETURN_IF_ERROR(Prepare(groups, /*check_labels=*/true, control));
  calls_.fetch_add(1, std::memory_order_relaxed);
  const int32_t vocab = tokenizer_.vocab_size();
  const size_t k = static_cast<size_t>(std::min(top_k, vocab));
  std::vector<std::vector<PromptLogprobs>> out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const PromptGroup& group = groups[g];
    ASSIGN_OR_RETURN(const std::string prefix, tokenizer_.Decode(group.prefix));
    for (const std::vector<TokenId>& suffix : group.suffixes) {
      RETURN_IF_ERROR(control.StopStatus(absl::Now(), "fake backend"));
      ASSIGN_OR_RETURN(const std::string tail, tokenizer_.Decode(suffix));
      const std::vector<double> lp =
          FullLogprobs(ParseFakePrompt(absl::StrCat(prefix, tail)));
      PromptLogprobs result;
      result.n_tokens =
          static_cast<int32_t>(group.prefix.size() + suffix.size());
      result.label_logprobs.reserve(group.label_ids.size());
      for (const TokenId id : group.label_ids) {
        result.label_logprobs.push_back(lp[id]);
      }
      if (k > 0) {
        std::vector<TokenId> order(vocab);
        for (TokenId id = 0; id < vocab; ++id) {
          order[id] = id;
        }
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&lp](TokenId a, TokenId b) {
                            return lp[a] > lp[b] || (lp[a] == lp[b] && a < b);
                          });
        result.top.reserve(k);
        for (size_t r = 0; r < k; ++r) {
          result.top.push_back(TopToken{order[r], lp[order[r]]});
        }
      }
      out[g].push_back(std::move(result));
      prompts_seen_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return out;
}

absl::StatusOr<HiddenStatesResult> FakeBackend::HiddenStates(
    const std::vector<PromptGroup>& groups, const std::vector<int32_t>& layers,
    const CallControl& control) {
  HiddenStatesResult result;
  result.hidden_size = kHiddenSize;
  if (layers.empty()) {
    for (int32_t l = 0; l <= kNumLayers; ++l) {
      result.layers.push_back(l);
    }
  }
  for (const int32_t layer : layers) {
    ASSIGN_OR_RETURN(const int32_t resolved, ResolveLayer(layer, kNumLayers));
    result.layers.push_back(resolved);
  }
  RETURN_IF_ERROR(Prepare(groups, /*check_labels=*/false, control));
  calls_.fetch_add(1, std::memory_order_relaxed);
  for (const PromptGroup& group : groups) {
    ASSIGN_OR_RETURN(const std::string prefix, tokenizer_.Decode(group.prefix));
    for (const std::vector<TokenId>& suffix : group.suffixes) {
      RETURN_IF_ERROR(control.StopStatus(absl::Now(), "fake backend"));
      ASSIGN_OR_RETURN(const std::string tail, tokenizer_.Decode(suffix));
      const std::string text = absl::StrCat(prefix, tail);
      const std::vector<double> v = SignalVector(ParseFakePrompt(text));
      for (const int32_t l : result.layers) {
        const double depth = static_cast<double>(l) / kNumLayers;
        const double scale = kNoiseFloor + kNoiseSlope * (1.0 - depth);
        // Seeded per (prompt, layer), so a layer's values do not depend on
        // which other layers were asked for.
        Gaussian noise(util::Seed64(absl::StrCat(text, "|layer=", l)));
        for (int32_t h = 0; h < kHiddenSize; ++h) {
          result.values.push_back(
              static_cast<float>(v[h] * depth * depth + scale * noise.Next()));
        }
      }
      ++result.n_prompts;
      prompts_seen_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return result;
}

}  // namespace mesa_anyjev
