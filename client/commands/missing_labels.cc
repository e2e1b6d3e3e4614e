#include "client/commands/missing_labels.h"

#include <iostream>

namespace mesa_anyjev::client {

int ReportMissingLabels(std::string_view command, int64_t missing,
                        bool strict) {
  if (missing <= 0) return 0;
  std::cerr << "mesa-anyjev " << command << ": " << (strict ? "" : "warning: ")
            << missing
            << " label logprob(s) were missing from the gateway's answers and "
               "read as -30, so those decisions are degraded; a server that "
               "takes vLLM's logprob_token_ids returns every label exactly "
               "(backend.label_readout)"
            << (strict ? " (--strict)" : "; --strict makes this an error")
            << "\n";
  return strict ? 1 : 0;
}

}  // namespace mesa_anyjev::client
