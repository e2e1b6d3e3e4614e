// BpeTokenizer: loading a tokenizer.json and the encode/decode pipeline (see
// bpe_tokenizer.h for what is supported and what is refused).
#include "common/text/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status/status_macros.h"
#include "common/text/byte_level.h"
#include "common/text/nfc.h"
#include "common/text/strict_json.h"
#include "common/text/utf8.h"
#include "common/util/files.h"

namespace mesa_anyjev::text {
namespace {

using Json = nlohmann::json;

// GPT-2's split regex, which a ByteLevel pre-tokenizer with use_regex=true
// applies (Hugging Face tokenizers' byte_level.rs).
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Errors while loading: INVALID_ARGUMENT naming the file.
class Loader {
 public:
  explicit Loader(std::string source) : source_(std::move(source)) {}

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", std::string(what)));
  }
  absl::Status Unsupported(std::string_view kind, std::string_view name) const {
    return Error(absl::StrCat("unsupported ", std::string(kind), " '",
                              std::string(name), "'"));
  }

  // The "type" of a component object, or an error.
  absl::StatusOr<std::string> Type(const Json& node,
                                   std::string_view kind) const {
    if (!node.is_object() || !node.contains("type") ||
        !node["type"].is_string()) {
      return Error(absl::StrCat(std::string(kind), " has no \"type\""));
    }
    return node["type"].get<std::string>();
  }

  // A boolean field that defaults to `fallback` when absent or null.
  absl::StatusOr<bool> Bool(const Json& node, const char* key,
                            bool fallback) const {
    if (!node.contains(key) || node[key].is_null()) return fallback;
    if (!node[key].is_boolean()) {
      return Error(absl::StrCat("\"", key, "\" is not a boolean"));
    }
    return node[key].get<bool>();
  }

  // A token id field: an integer in [0, kIdLimit). Ids index the
  // tokenizer's tables, so one huge id would size them: 2^21 is 8x the
  // largest vocabulary in use (Gemma's 262,144), and tables of 2^21 ids
  // take about 140 MB.
  static constexpr int64_t kIdLimit = int64_t{1} << 21;
  absl::StatusOr<TokenId> Id(const Json& value, std::string_view what) const {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= kIdLimit) {
      return Error(absl::StrCat(std::string(what), " has an id that is not ",
                                "an integer in [0, ", kIdLimit,
                                "): ids index the tokenizer's tables"));
    }
    return static_cast<TokenId>(value.get<int64_t>());
  }

 private:
  std::string source_;
};

// The normalizer: NFC or none.
absl::StatusOr<bool> ParseNormalizer(const Loader& loader, const Json& node) {
  if (node.is_null()) return false;
  ASSIGN_OR_RETURN(const std::string type, loader.Type(node, "normalizer"));
  if (type == "NFC") return true;
  if (type == "Sequence" && node.contains("normalizers") &&
      node["normalizers"].is_array()) {
    bool nfc = false;
    for (const Json& child : node["normalizers"]) {
      ASSIGN_OR_RETURN(const bool child_nfc, ParseNormalizer(loader, child));
      nfc = nfc || child_nfc;
    }
    return nfc;
  }
  return loader.Unsupported("normalizer", type);
}

// A ByteLevel pre-tokenizer's options; `use_regex` is its own split.
struct ByteLevelOptions {
  bool use_regex = true;
};

absl::StatusOr<ByteLevelOptions> ParseByteLevel(const Loader& loader,
                                                const Json& node) {
  ASSIGN_OR_RETURN(const bool prefix_space,
                   loader.Bool(node, "add_prefix_space", true));
  if (prefix_space) {
    return loader.Error(
        "unsupported pre_tokenizer option ByteLevel add_prefix_space=true");
  }
  ByteLevelOptions options;
  ASSIGN_OR_RETURN(options.use_regex, loader.Bool(node, "use_regex", true));
  return options;
}

absl::StatusOr<std::unique_ptr<RegexSplitter>> Compile(const Loader& loader,
                                                       std::string_view pattern,
                                                       bool literal) {
  auto splitter = RegexSplitter::Create(pattern, literal);
  if (!splitter.ok()) {
    return loader.Error(std::string(splitter.status().message()));
  }
  return splitter;
}

// The split regex (null: none) of the pre-tokenizer, which must end in
// byte-level mapping.
absl::StatusOr<std::unique_ptr<RegexSplitter>> ParsePreTokenizer(
    const Loader& loader, const Json& node) {
  if (node.is_null()) {
    return loader.Error("no pre_tokenizer: a byte-level one is required");
  }
  ASSIGN_OR_RETURN(const std::string type, loader.Type(node, "pre_tokenizer"));
  if (type == "ByteLevel") {
    ASSIGN_OR_RETURN(const ByteLevelOptions options,
                     ParseByteLevel(loader, node));
    if (!options.use_regex) return nullptr;
    return Compile(loader, kGpt2Regex, /*literal=*/false);
  }
  if (type != "Sequence") return loader.Unsupported("pre_tokenizer", type);
  if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array()) {
    return loader.Error("pre_tokenizer Sequence has no \"pretokenizers\"");
  }
  const Json& steps = node["pretokenizers"];
  std::vector<std::string> types;
  for (const Json& step : steps) {
    ASSIGN_OR_RETURN(std::string step_type, loader.Type(step, "pre_tokenizer"));
    types.push_back(std::move(step_type));
  }
  // Sequence[ByteLevel] is the bare form; Sequence[Split, ByteLevel] is
  // Qwen's.
  if (types.size() == 1 && types[0] == "ByteLevel") {
    return ParsePreTokenizer(loader, steps[0]);
  }
  if (types.size() != 2 || types[0] != "Split" || types[1] != "ByteLevel") {
    std::string names;
    for (const std::string& t : types) {
      absl::StrAppend(&names, names.empty() ? "" : ", ", t);
    }
    return loader.Unsupported("pre_tokenizer",
                              absl::StrCat("Sequence[", names, "]"));
  }
  ASSIGN_OR_RETURN(const ByteLevelOptions byte_level,
                   ParseByteLevel(loader, steps[1]));
  if (byte_level.use_regex) {
    return loader.Error(
        "unsupported pre_tokenizer option: Split then ByteLevel "
        "use_regex=true");
  }
  const Json& split = steps[0];
  const std::string behavior =
      split.contains("behavior") && split["behavior"].is_string()
          ? split["behavior"].get<std::string>()
          : "";
  if (behavior != "Isolated") {
    return loader.Unsupported("Split behavior", behavior);
  }
  ASSIGN_OR_RETURN(const bool invert, loader.Bool(split, "invert", false));
  if (invert) return loader.Unsupported("Split option", "invert=true");
  const Json& pattern = split.contains("pattern") ? split["pattern"] : Json();
  if (pattern.is_object() && pattern.contains("Regex") &&
      pattern["Regex"].is_string()) {
    return Compile(loader, pattern["Regex"].get<std::string>(), false);
  }
  if (pattern.is_object() && pattern.contains("String") &&
      pattern["String"].is_string()) {
    return Compile(loader, pattern["String"].get<std::string>(), true);
  }
  return loader.Error("Split pre_tokenizer has no Regex or String pattern");
}

absl::Status CheckDecoder(const Loader& loader, const Json& node) {
  if (node.is_null()) return loader.Unsupported("decoder", "(none)");
  ASSIGN_OR_RETURN(const std::string type, loader.Type(node, "decoder"));
  if (type != "ByteLevel") return loader.Unsupported("decoder", type);
  return absl::OkStatus();
}

// Model options that would change results and that we do not implement.
absl::Status CheckModelOptions(const Loader& loader, const Json& model) {
  if (model.contains("type") && model["type"] != "BPE") {
    return loader.Unsupported("model", model["type"].is_string()
                                           ? model["type"].get<std::string>()
                                           : model["type"].dump());
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0)) {
    return loader.Unsupported("BPE option", "dropout");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() &&
        !(model[key].is_string() && model[key].get<std::string>().empty())) {
      return loader.Unsupported("BPE option", key);
    }
  }
  ASSIGN_OR_RETURN(const bool byte_fallback,
                   loader.Bool(model, "byte_fallback", false));
  if (byte_fallback) {
    return loader.Unsupported("BPE option", "byte_fallback=true");
  }
  return absl::OkStatus();
}

// The two halves of a merge: "a b" or ["a", "b"].
absl::StatusOr<std::pair<std::string, std::string>> MergePair(
    const Loader& loader, const Json& merge, size_t rank) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
      merge[1].is_string()) {
    return std::make_pair(merge[0].get<std::string>(),
                          merge[1].get<std::string>());
  }
  if (merge.is_string()) {
    const std::string& line = merge.get_ref<const std::string&>();
    const size_t space = line.find(' ');
    if (space != std::string::npos &&
        line.find(' ', space + 1) == std::string::npos) {
      return std::make_pair(line.substr(0, space), line.substr(space + 1));
    }
  }
  return loader.Error(
      absl::StrCat("merge ", rank, " is neither \"a b\" nor [\"a\", \"b\"]"));
}

// The model's vocabulary: spelling -> id.
using Vocab = absl::flat_hash_map<std::string, TokenId>;

absl::StatusOr<Vocab> ParseVocab(const Loader& loader, const Json& model) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    return loader.Error("model has no \"vocab\" object");
  }
  Vocab vocab;
  vocab.reserve(model["vocab"].size());
  for (const auto& [spelling, value] : model["vocab"].items()) {
    if (FirstInvalidUtf8(spelling) >= 0) {
      return loader.Error("a vocab entry is not valid UTF-8");
    }
    ASSIGN_OR_RETURN(const TokenId id,
                     loader.Id(value, absl::StrCat("vocab entry ", spelling)));
    vocab[spelling] = id;
  }
  return vocab;
}

absl::StatusOr<std::vector<AddedToken>> ParseAddedTokens(const Loader& loader,
                                                         const Json& node) {
  std::vector<AddedToken> added;
  if (node.is_null()) return added;
  if (!node.is_array()) {
    return loader.Error("\"added_tokens\" is not an array");
  }
  for (const Json& entry : node) {
    if (!entry.is_object() || !entry.contains("content") ||
        !entry["content"].is_string() || !entry.contains("id")) {
      return loader.Error("an added token lacks \"id\" or \"content\"");
    }
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    if (FirstInvalidUtf8(token.content) >= 0) {
      return loader.Error("an added token is not valid UTF-8");
    }
    ASSIGN_OR_RETURN(
        token.id,
        loader.Id(entry["id"], absl::StrCat("added token ", token.content)));
    ASSIGN_OR_RETURN(token.special, loader.Bool(entry, "special", false));
    ASSIGN_OR_RETURN(token.single_word,
                     loader.Bool(entry, "single_word", false));
    ASSIGN_OR_RETURN(token.lstrip, loader.Bool(entry, "lstrip", false));
    ASSIGN_OR_RETURN(token.rstrip, loader.Bool(entry, "rstrip", false));
    // Upstream's default: special tokens are not normalized, others are.
    ASSIGN_OR_RETURN(token.normalized,
                     loader.Bool(entry, "normalized", !token.special));
    added.push_back(std::move(token));
  }
  return added;
}

// The merge loop's tables: the 256 byte symbols and the merges by rank.
absl::StatusOr<std::unique_ptr<BpeModel>> BuildModel(const Loader& loader,
                                                     const Json& model,
                                                     const Vocab& vocab) {
  std::array<TokenId, 256> byte_ids{};
  for (int b = 0; b < 256; ++b) {
    std::string spelling;
    AppendUtf8(ByteLevelChar(static_cast<uint8_t>(b)), &spelling);
    const auto it = vocab.find(spelling);
    if (it == vocab.end()) {
      return loader.Error(
          absl::StrCat("the vocabulary lacks the byte-level symbol of byte ", b,
                       " (not a byte-level BPE vocabulary?)"));
    }
    byte_ids[b] = it->second;
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    return loader.Error("model has no \"merges\" array");
  }
  const Json& merges_json = model["merges"];
  absl::flat_hash_map<uint64_t, BpeModel::Merge> merges;
  merges.reserve(merges_json.size());
  for (size_t rank = 0; rank < merges_json.size(); ++rank) {
    ASSIGN_OR_RETURN(const auto pair,
                     MergePair(loader, merges_json[rank], rank));
    const auto left = vocab.find(pair.first);
    const auto right = vocab.find(pair.second);
    const auto merged = vocab.find(pair.first + pair.second);
    if (left == vocab.end() || right == vocab.end() || merged == vocab.end()) {
      return loader.Error(absl::StrCat("merge ", rank, " (\"", pair.first,
                                       "\" \"", pair.second,
                                       "\") uses a token not in the vocab"));
    }
    // A repeated pair keeps its last rank, as upstream's map build does.
    merges[BpeModel::PairKey(left->second, right->second)] = {
        static_cast<int32_t>(rank), merged->second};
  }
  BpeModel::Options options;
  ASSIGN_OR_RETURN(options.ignore_merges,
                   loader.Bool(model, "ignore_merges", false));
  absl::flat_hash_map<std::string, TokenId> whole_words;
  if (options.ignore_merges) {
    for (const auto& [spelling, id] : vocab) {
      whole_words.try_emplace(ByteLevelDecodeToken(spelling), id);
    }
  }
  return std::make_unique<BpeModel>(byte_ids, std::move(merges),
                                    std::move(whole_words), options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromFile(
    const std::string& tokenizer_json_path) {
  std::string path = tokenizer_json_path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    path = (std::filesystem::path(path) / "tokenizer.json").string();
  }
  ASSIGN_OR_RETURN(const std::string json, util::ReadFile(path));
  return FromJson(json, path);
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromJson(
    std::string_view json_text, const std::string& source) {
  const Loader loader(source);
  auto parsed = ParseStrictJson(json_text, {});
  if (!parsed.ok()) return loader.Error(std::string(parsed.status().message()));
  const Json root = *std::move(parsed);
  if (!root.is_object()) return loader.Error("not a JSON object");
  const Json null;
  auto field = [&](const char* key) -> const Json& {
    return root.contains(key) ? root[key] : null;
  };

  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer());
  ASSIGN_OR_RETURN(tok->nfc_, ParseNormalizer(loader, field("normalizer")));
  ASSIGN_OR_RETURN(tok->splitter_,
                   ParsePreTokenizer(loader, field("pre_tokenizer")));
  RETURN_IF_ERROR(CheckDecoder(loader, field("decoder")));
  const Json& model = field("model");
  if (!model.is_object()) return loader.Error("no \"model\" object");
  RETURN_IF_ERROR(CheckModelOptions(loader, model));
  ASSIGN_OR_RETURN(const Vocab vocab, ParseVocab(loader, model));
  ASSIGN_OR_RETURN(const std::vector<AddedToken> added,
                   ParseAddedTokens(loader, field("added_tokens")));
  RETURN_IF_ERROR(tok->BuildTables(vocab, added));
  ASSIGN_OR_RETURN(tok->model_, BuildModel(loader, model, vocab));
  return tok;
}

absl::Status BpeTokenizer::BuildTables(
    const absl::flat_hash_map<std::string, TokenId>& vocab,
    const std::vector<AddedToken>& added) {
  TokenId max_id = -1;
  for (const auto& [spelling, id] : vocab) max_id = std::max(max_id, id);
  for (const AddedToken& token : added) max_id = std::max(max_id, token.id);
  const auto size = static_cast<size_t>(max_id + 1);
  spellings_.assign(size, "");
  id_bytes_.assign(size, "");
  known_.assign(size, false);
  special_.assign(size, false);
  for (const auto& [spelling, id] : vocab) {
    spellings_[id] = spelling;
    id_bytes_[id] = ByteLevelDecodeToken(spelling);
    known_[id] = true;
  }
  // Added tokens win over vocabulary entries of the same id or spelling, as
  // upstream's id_to_token and token_to_id look at them first.
  std::vector<AddedToken> raw_tokens;
  std::vector<AddedToken> normalized_tokens;
  for (const AddedToken& token : added) {
    token_ids_[token.content] = token.id;
    spellings_[token.id] = token.content;
    id_bytes_[token.id] = ByteLevelDecodeToken(token.content);
    known_[token.id] = true;
    special_[token.id] = token.special;
    if (!token.normalized) {
      raw_tokens.push_back(token);
      continue;
    }
    // Matched in normalized text, so spelled normalized too.
    AddedToken spelled = token;
    if (nfc_ && !NfcUnchanged(spelled.content)) {
      ASSIGN_OR_RETURN(spelled.content, ToNfc(spelled.content));
    }
    normalized_tokens.push_back(std::move(spelled));
  }
  for (const auto& [spelling, id] : vocab) {
    token_ids_.try_emplace(spelling, id);
  }
  raw_matcher_ = std::make_unique<AddedTokenMatcher>(std::move(raw_tokens));
  normalized_matcher_ =
      std::make_unique<AddedTokenMatcher>(std::move(normalized_tokens));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TokenId>> BpeTokenizer::Encode(
    std::string_view text) const {
  if (const int64_t bad = FirstInvalidUtf8(text); bad >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("text is not valid UTF-8 at byte offset ", bad));
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  if (raw_matcher_->empty()) {
    RETURN_IF_ERROR(EncodeStretch(text, &ids));
    return ids;
  }
  std::vector<AddedTokenMatcher::Segment> segments;
  raw_matcher_->Split(text, &segments);
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
    } else {
      RETURN_IF_ERROR(EncodeStretch(
          text.substr(segment.begin, segment.end - segment.begin), &ids));
    }
  }
  return ids;
}

absl::Status BpeTokenizer::EncodeStretch(std::string_view text,
                                         std::vector<TokenId>* ids) const {
  std::string normalized;
  if (nfc_ && !NfcUnchanged(text)) {
    ASSIGN_OR_RETURN(normalized, ToNfc(text));
    text = normalized;
  }
  if (normalized_matcher_->empty()) return EncodeNormalized(text, ids);
  std::vector<AddedTokenMatcher::Segment> segments;
  normalized_matcher_->Split(text, &segments);
  for (const auto& segment : segments) {
    if (segment.id >= 0) {
      ids->push_back(segment.id);
    } else {
      RETURN_IF_ERROR(EncodeNormalized(
          text.substr(segment.begin, segment.end - segment.begin), ids));
    }
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::EncodeNormalized(std::string_view text,
                                            std::vector<TokenId>* ids) const {
  if (text.empty()) return absl::OkStatus();
  if (splitter_ == nullptr) {
    model_->EncodeWord(text, ids);
    return absl::OkStatus();
  }
  std::vector<std::string_view> pieces;
  RETURN_IF_ERROR(splitter_->Split(text, &pieces));
  for (const std::string_view piece : pieces) model_->EncodeWord(piece, ids);
  return absl::OkStatus();
}

absl::StatusOr<std::string> BpeTokenizer::Decode(
    absl::Span<const TokenId> ids) const {
  std::string bytes;
  for (const TokenId id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside [0, ", vocab_size(), ")"));
    }
    if (!known_[id]) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " has no token"));
    }
    bytes += id_bytes_[id];
  }
  return Utf8Lossy(bytes);
}

TokenId BpeTokenizer::TokenToId(std::string_view token) const {
  const auto it = token_ids_.find(AbslView(token));
  return it == token_ids_.end() ? -1 : it->second;
}

std::string_view BpeTokenizer::IdToToken(TokenId id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return spellings_[id];
}

bool BpeTokenizer::IsSpecial(TokenId id) const {
  return id >= 0 && id < vocab_size() && special_[id];
}

}  // namespace mesa_anyjev::text
