// The figures a Config derives from its own keys.
#include "core/config/config.h"

#include <algorithm>
#include <cmath>

namespace pilot {

double Config::RunTokensPerStep() const {
  return static_cast<double>(run.seq_len) * run.micro_batch * run.grad_accum * run.gpus_per_node *
         run.nodes;
}

int64_t Config::RunTotalSteps() const {
  if (run.target_steps > 0) return run.target_steps;
  const double tokens_per_step = RunTokensPerStep();
  if (tokens_per_step <= 0) return 0;
  const double steps = std::ceil(static_cast<double>(run.target_tokens) / tokens_per_step);
  return steps > 1e15 ? static_cast<int64_t>(1e15)
                      : std::max<int64_t>(1, static_cast<int64_t>(steps));
}

}  // namespace pilot
