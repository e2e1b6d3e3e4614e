// tokenizer_bench: times BpeTokenizer::Encode on one thread over a corpus of
// JSON lines {"text": ...}, for bench/bench_tokenizer.py, which times Hugging
// Face tokenizers on the same corpus in the same run. Prints one JSON object:
// documents, bytes, tokens, the first (cold) pass and the best of the timed
// passes, tokens per second.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/text/bpe_tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

int Main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tokenizer_bench TOKENIZER_DIR CORPUS.jsonl [PASSES]\n";
    return 2;
  }
  const int passes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  auto tokenizer = mesa_anyjev::text::BpeTokenizer::FromFile(argv[1]);
  if (!tokenizer.ok()) {
    std::cerr << "tokenizer_bench: " << tokenizer.status().message() << "\n";
    return 2;
  }
  std::vector<std::string> docs;
  size_t bytes = 0;
  std::ifstream in(argv[2]);
  for (std::string line; std::getline(in, line);) {
    docs.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    bytes += docs.back().size();
  }
  // One pass over the corpus; the tokens keep the work from being elided.
  auto pass = [&](size_t* tokens) {
    const auto start = Clock::now();
    *tokens = 0;
    for (const std::string& doc : docs) {
      auto ids = (*tokenizer)->Encode(doc);
      if (!ids.ok()) {
        std::cerr << "tokenizer_bench: " << ids.status().message() << "\n";
        std::exit(1);
      }
      *tokens += ids->size();
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  size_t tokens = 0;
  const double cold = pass(&tokens);  // fills the word cache
  double best = cold;
  for (int i = 0; i < passes; ++i) best = std::min(best, pass(&tokens));
  std::cout << nlohmann::json{{"docs", docs.size()},
                              {"bytes", bytes},
                              {"tokens", tokens},
                              {"cold_seconds", cold},
                              {"best_seconds", best},
                              {"tokens_per_s", tokens / best},
                              {"cold_tokens_per_s", tokens / cold},
                              {"regex_jit", (*tokenizer)->regex_jit()}}
                   .dump()
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
