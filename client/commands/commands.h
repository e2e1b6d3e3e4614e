// The mesa-anyjev subcommands. Each returns the process exit code: 0 ok,
// 1 a check failed or the daemon answered an error, 2 usage or config error.
#pragma once

#include <string>

#include "common/config/config.h"

namespace mesa_anyjev::client {

struct OutputOptions {
  bool json = false;  // one JSON document on stdout instead of text
};

int RunHealth(const config::Config& config, const OutputOptions& output);
int RunInfo(const config::Config& config, const OutputOptions& output);

struct TokenizeOptions {
  std::string tokenizer_dir;  // holds tokenizer.json (or names the file)
  bool decode = false;        // ids -> text instead of text -> ids
};

// Offline: JSON lines on stdin, JSON lines on stdout; no daemon involved.
int RunTokenize(const TokenizeOptions& options);

struct QuestionsOptions {
  std::string lock_path = "questions.lock.json";
  bool check = false;        // compare with the lock: exit 0 in sync, 1 drift
  bool update_lock = false;  // rewrite the lock from the code (atomically)
  bool json = false;         // listing or check result as one JSON document
};

// Offline: the fixed-key questions and questions.lock.json (reference 6.1).
int RunQuestions(const QuestionsOptions& options);

}  // namespace mesa_anyjev::client
