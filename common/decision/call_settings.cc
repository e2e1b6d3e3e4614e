// A call's settings (see call_settings.h).
#include "common/decision/call_settings.h"

namespace mesa_anyjev::decision {

CallSettings CallSettings::Of(const DeciderOptions& options,
                              const DecideOptions& call) {
  CallSettings out;
  out.prior = call.prior.value_or(options.prior);
  out.combine = call.combine.value_or(options.combine);
  out.canonical_order = call.canonical_order.value_or(options.canonical_order);
  out.max_permutations = call.max_permutations.has_value()
                             ? call.max_permutations
                             : options.max_permutations;
  out.adaptive_shifts = call.adaptive_shifts.value_or(options.adaptive_shifts);
  out.adaptive_margin = call.adaptive_margin.has_value()
                            ? call.adaptive_margin
                            : options.adaptive_margin;
  out.return_prompts = call.return_prompts;
  out.return_details = call.return_details;
  return out;
}

}  // namespace mesa_anyjev::decision
