// The budget of the whole pipeline, in days of the reservation:
//   download    dataset_gb / planning.download_gb_per_s
//   preprocess  preprocess_hours
//   train       steps x (compute + exposed communication) per step
//   data_stall  steps x data wait per step
//   eval        floor(steps / eval_interval) x eval seconds
//   checkpoint  floor(steps / checkpoint_interval) x save seconds
//   export      export_gb / planning.export_gb_per_s (copying outputs off)
//   buffer      the sum above x thresholds.budget_buffer
// days = sum + buffer; GPU-hours = days x 24 x GPUs; cost = GPU-hours x the
// catalog price. Term (BudgetTerm): "7-day" when days <= 7, "30-day" when
// days <= 30, else "none" (does not fit a 30-day term: NO-GO).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "core/records/policy.h"
#include "core/records/verdict.h"

namespace pilot {

struct BudgetInputs {
  double dataset_gb = 0;
  double preprocess_hours = 0;
  double export_gb = 0;
  int64_t steps = 0;          // optimizer steps of the run
  double step_ms = 0;         // per optimizer step at the run's scale, all included
  double data_wait_ms = 0;    // the data wait inside step_ms
  int64_t eval_interval = 0;  // 0 = no evals
  double eval_seconds = 0;
  int64_t checkpoint_interval = 0;  // 0 = no checkpoints
  double checkpoint_seconds = 0;
  int gpus = 1;
  double price_per_gpu_hour = 0;  // 0 = unknown: cost 0
  std::string currency;
};

// "7-day" | "30-day" | "none" for a total in days (buffer included).
std::string BudgetTerm(double days);

// The budget; days = 0 and term "none" when step_ms <= 0 (nothing to
// estimate from).
Budget MakeBudget(const BudgetInputs& in, const Policy& policy);

}  // namespace pilot
