// Bench results (docs/learning.md): the environment record,
// policy suggestions, the JSON file (indent 1, sorted keys) and its
// Markdown table, written as <out>/<date>/<slug>.<backend>.{json,md}.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "client/backends/provider.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::bench {

using client::ProviderInfo;

// The model id with '/' -> '__' (Qwen/Qwen3-8B -> Qwen__Qwen3-8B).
std::string ModelSlug(const std::string& model);

// {mesa_anyjev, commit, anyjev_commit (null: the decision engine is the C++
// port of anyjev 0.2.0), questions_lock_sha, backend_kind, model,
// served_model, python (null), compiler, platform, host, nvidia_smi}.
nlohmann::ordered_json Environment(const ProviderInfo& info);

// Per question, every LOCO cell without an error that has n_neg >= 30 and
// cov@5% > 0: [{cov@5%, cov@10%, ece, n, n_neg, cite "<task>.<level>"}].
nlohmann::ordered_json PolicySuggestions(const nlohmann::ordered_json& tasks);

// The table of 9.4 over TableRows, ending with a newline.
std::string MarkdownTable(const nlohmann::ordered_json& payload);
// The table's rows as JSON (bench table --json): {task, n, level, status
// ok|n/a|error, loco, acc, ece, brier, cov@5%, cov@10%, flip, n_neg,
// prompts, ms_per_decision}, tasks by name, levels raw < L0 < L1 < L2.
nlohmann::ordered_json TableRows(const nlohmann::ordered_json& payload);

// Writes the JSON (sorted keys) and the .md beside it; returns the JSON
// path.
absl::StatusOr<std::string> WriteResults(const nlohmann::ordered_json& payload,
                                         const std::string& out_dir,
                                         const std::string& slug,
                                         const std::string& kind,
                                         const std::string& date);

}  // namespace mesa_anyjev::bench
