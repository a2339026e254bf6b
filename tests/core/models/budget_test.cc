#include "core/models/budget.h"

#include <gtest/gtest.h>

namespace pilot {
namespace {

BudgetInputs In() {
  BudgetInputs in;
  in.dataset_gb = 864;        // 864 s at 1 GB/s = 0.01 day
  in.preprocess_hours = 2.4;  // 0.1 day
  in.export_gb = 86.4;        // 0.001 day
  in.steps = 100000;
  in.step_ms = 4320;      // 100000 x 4.32 s = 5 days
  in.data_wait_ms = 432;  // a tenth of it
  in.eval_interval = 1000;
  in.eval_seconds = 86.4;  // 100 x 86.4 s = 0.1 day
  in.checkpoint_interval = 5000;
  in.checkpoint_seconds = 432;  // 20 x 432 s = 0.1 day
  in.gpus = 16;
  in.price_per_gpu_hour = 2;
  in.currency = "USD";
  return in;
}

TEST(Budget, WholePipeline) {
  Policy p;
  Budget b = MakeBudget(In(), p);
  EXPECT_NEAR(b.breakdown.at("download"), 0.01, 1e-12);
  EXPECT_NEAR(b.breakdown.at("preprocess"), 0.1, 1e-12);
  EXPECT_NEAR(b.breakdown.at("train"), 4.5, 1e-12);
  EXPECT_NEAR(b.breakdown.at("data_stall"), 0.5, 1e-12);
  EXPECT_NEAR(b.breakdown.at("eval"), 0.1, 1e-12);
  EXPECT_NEAR(b.breakdown.at("checkpoint"), 0.1, 1e-12);
  EXPECT_NEAR(b.breakdown.at("export"), 0.001, 1e-12);
  const double sum = 5.311;
  EXPECT_NEAR(b.breakdown.at("buffer"), sum * 0.15, 1e-12);
  EXPECT_NEAR(b.days, sum * 1.15, 1e-12);
  EXPECT_EQ(b.term, "7-day");
  EXPECT_NEAR(b.gpu_hours, b.days * 24 * 16, 1e-9);
  EXPECT_NEAR(b.cost, b.gpu_hours * 2, 1e-9);
  EXPECT_EQ(b.currency, "USD");
}

TEST(Budget, Terms) {
  EXPECT_EQ(BudgetTerm(7), "7-day");
  EXPECT_EQ(BudgetTerm(7.01), "30-day");
  EXPECT_EQ(BudgetTerm(30), "30-day");
  EXPECT_EQ(BudgetTerm(30.01), "none");
  EXPECT_EQ(BudgetTerm(0), "none");
  Policy p;
  BudgetInputs in = In();
  in.step_ms *= 1.3;  // 6.9 days + buffer > 7
  EXPECT_EQ(MakeBudget(in, p).term, "30-day");
  in.step_ms *= 5;
  EXPECT_EQ(MakeBudget(in, p).term, "none");
  p.thresholds.budget_buffer = 0;
  in = In();
  in.step_ms *= 1.3;
  EXPECT_EQ(MakeBudget(in, p).term, "7-day");  // the buffer decides
}

TEST(Budget, NothingToEstimate) {
  BudgetInputs in = In();
  in.step_ms = 0;
  Budget b = MakeBudget(in, Policy{});
  EXPECT_EQ(b.days, 0);
  EXPECT_EQ(b.term, "none");
  in = In();
  in.price_per_gpu_hour = 0;
  EXPECT_EQ(MakeBudget(in, Policy{}).cost, 0);
  EXPECT_EQ(MakeBudget(in, Policy{}).currency, "");
}

}  // namespace
}  // namespace pilot
