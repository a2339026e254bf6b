#include "core/models/budget.h"

#include <algorithm>
#include <cmath>

namespace pilot {

std::string BudgetTerm(double days) {
  if (days > 0 && days <= 7) return "7-day";
  if (days > 0 && days <= 30) return "30-day";
  return "none";
}

Budget MakeBudget(const BudgetInputs& in, const Policy& p) {
  Budget b;
  if (in.step_ms <= 0 || in.steps <= 0) return b;
  constexpr double kDay = 86400.0;
  const double steps = static_cast<double>(in.steps);
  const double wait = std::clamp(in.data_wait_ms, 0.0, in.step_ms);
  const double train = steps * (in.step_ms - wait) / 1e3 / kDay;
  const double stall = steps * wait / 1e3 / kDay;
  const double evals =
      in.eval_interval > 0 ? std::floor(steps / static_cast<double>(in.eval_interval)) : 0;
  const double ckpts = in.checkpoint_interval > 0
                           ? std::floor(steps / static_cast<double>(in.checkpoint_interval))
                           : 0;
  const double eval = evals * in.eval_seconds / kDay;
  const double ckpt = ckpts * in.checkpoint_seconds / kDay;
  const double download = in.dataset_gb / p.planning.download_gb_per_s / kDay;
  const double exp = in.export_gb / p.planning.export_gb_per_s / kDay;
  const double prep = in.preprocess_hours / 24.0;
  const double sum = download + prep + train + stall + eval + ckpt + exp;
  const double buffer = sum * p.thresholds.budget_buffer;
  b.breakdown = {{"download", download}, {"preprocess", prep}, {"train", train},
                 {"data_stall", stall},  {"eval", eval},       {"checkpoint", ckpt},
                 {"export", exp},        {"buffer", buffer}};
  b.days = sum + buffer;
  b.gpu_hours = b.days * 24 * std::max(1, in.gpus);
  b.term = BudgetTerm(b.days);
  if (in.price_per_gpu_hour > 0) {
    b.cost = b.gpu_hours * in.price_per_gpu_hour;
    b.currency = in.currency;
  }
  return b;
}

}  // namespace pilot
