// A label logprob the gateway did not return is read as -30 and degrades the
// decision it belongs to. No command lets that pass silently: decide,
// annotate and bench run say so on stderr (and in their JSON and run
// records), and --strict makes it exit 1.
#pragma once

#include <cstdint>
#include <string_view>

namespace mesa_anyjev::client {

// Prints the warning for `missing` > 0 label logprobs to stderr, as
// "mesa-anyjev <command>: ...". Returns the exit code this asks for: 1 when
// `strict` and any label was missing, else 0.
int ReportMissingLabels(std::string_view command, int64_t missing, bool strict);

}  // namespace mesa_anyjev::client
