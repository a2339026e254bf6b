// The record of a refused change (job/refusal.h), as etc/job_submit.lua
// writes it, read strictly.
#include "job/refusal.h"

#include <gtest/gtest.h>

#include <string>

namespace pilot::job {
namespace {

// What the script's record_refusal writes (its format string, filled).
std::string Written(const std::string& pilot = "5", const std::string& extra = "") {
  return "{\n  \"schema\": \"slurm-pilot/refusal/1\",\n  \"job_id\": 12,\n  \"pilot_job\": " + pilot +
         ",\n  \"user\": \"alice\",\n  \"uid\": 1001,\n  \"refused_at\": \"2026-12-07T21:40:03Z\",\n"
         "  \"change\": \"Reservation=\",\n  \"reason\": \"a run bound to pilot 5 stays in reservation "
         "pilot_5 (asked for none)\"" +
         extra + "\n}\n";
}

TEST(ChangeRefusal, ReadsWhatTheScriptWrites) {
  Result<ChangeRefusal> r = ParseChangeRefusal(Written(), "12.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->job_id, 12);
  ASSERT_TRUE(r->pilot_job.has_value());
  EXPECT_EQ(*r->pilot_job, 5);
  EXPECT_EQ(r->user, "alice");
  EXPECT_EQ(r->uid, 1001);
  EXPECT_EQ(r->change, "Reservation=");
  EXPECT_EQ(r->reason, "a run bound to pilot 5 stays in reservation pilot_5 (asked for none)");
}

TEST(ChangeRefusal, AJobBoundToNoPilot) {
  Result<ChangeRefusal> r = ParseChangeRefusal(Written("null"), "12.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->pilot_job.has_value());
}

TEST(ChangeRefusal, Refusals) {
  EXPECT_EQ(ParseChangeRefusal(Written("5", ",\n  \"extra\": 1"), "12.json").status().code(), Code::kCorrupt);
  EXPECT_NE(ParseChangeRefusal(Written("\"5\""), "12.json").status().Message().find("pilot_job"),
            std::string::npos);
  std::string other = Written();
  other.replace(other.find("refusal/1"), 9, "refusal/2");
  EXPECT_FALSE(ParseChangeRefusal(other, "12.json").ok());
  EXPECT_FALSE(ParseChangeRefusal("{", "12.json").ok());
  std::string zero = Written();
  zero.replace(zero.find("\"job_id\": 12"), 12, "\"job_id\": 0");
  EXPECT_FALSE(ParseChangeRefusal(zero, "12.json").ok());
}

}  // namespace
}  // namespace pilot::job
