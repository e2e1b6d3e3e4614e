// The lines a pipeline run (decide --out) writes, one per state in input
// order, and how --resume reads them back. Each line says which run wrote
// it (model, level, span size, questions) and which input line it answers
// (a hash), so a resumed run can refuse an OUT that is not its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::client::pipeline {

// What every line of a run carries; a resumed run must carry the same.
struct RunKey {
  std::string backend;
  std::string model;
  std::string level;  // as asked (auto, L0, ...), not as served
  int64_t span = 0;
  std::vector<std::string> questions;  // ids, in the order asked
  std::string questions_sha256;        // over the question keys
};

// SHA-256 (hex) of the questions' keys, one per line: a question reworded
// under the same id is another question.
std::string QuestionsSha256(const std::vector<std::string>& keys);

// SHA-256 (hex) of one input line as read (without its newline).
std::string InputSha256(const std::string& line);

// A line's fields up to its answer: index, id (when the input gave one),
// backend, model, level, span, questions, questions_sha256, input_sha256.
// The caller adds "decisions", or "error" {code, message}.
nlohmann::ordered_json LineHead(int64_t index, const nlohmann::ordered_json& id,
                                const RunKey& key,
                                const std::string& input_sha256);

// OUT as a resumed run finds it: a last line without its newline (torn by
// a kill mid-write) is cut off, the file truncated to its last newline.
// Returns the bytes dropped; a missing file is an empty one.
absl::StatusOr<int64_t> DropTornLine(const std::string& path);

// Line `n` (0-based) of OUT checked against this run: it parses, holds
// index n and was written with `key`. Returns its input_sha256; else
// INVALID_ARGUMENT, one sentence naming OUT, the line and what differs.
absl::StatusOr<std::string> CheckKeptLine(const std::string& line, int64_t n,
                                          const RunKey& key,
                                          const std::string& out_name);

}  // namespace mesa_anyjev::client::pipeline
