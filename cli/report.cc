// pilot report JOBID|RESULTS.json [-o FILE]: the HTML report with plots.
#include "core/decide/report.h"

#include <ctime>
#include <fstream>

#include "cli/options.h"
#include "cli/pilot_input.h"
#include "core/base/atomic_file.h"
#include "core/base/rfc3339.h"

namespace pilot::cli {

namespace {
constexpr size_t kMaxMetricsBytes = 32u << 20;  // metrics.jsonl read at most
}  // namespace

int RunReport(const Invocation& inv) {
  CommandLine cl("pilot report [OPTIONS] JOBID|RESULTS.json",
                 "Write one self-contained HTML page (inline SVG plots, no scripts, no network)\n"
                 "with the verdict, the memory and time measurements, the hardware fit and the\n"
                 "budget of a pilot. metrics.jsonl beside results.json adds per-step plots.");
  cl.options.add_options()("output,o", po::value<std::string>()->default_value("report.html"),
                           "the HTML file to write ('-' = standard output)")(
      "config", po::value<std::string>()->default_value(""),
      "the pilot's config (default: the job's copy, or results.json's config_path)")(
      "policy", PolicyValue(), PolicyHelp().c_str());
  cl.hidden.add_options()("source", po::value<std::string>(), "job id or results.json");
  cl.positional.add("source", 1);
  po::variables_map vm;
  if (auto rc = ParseCommandArgs(inv, cl, vm)) return *rc;
  if (!vm.count("source")) return UsageError(inv, "expected a JOBID or a results.json");

  Result<PilotInput> in =
      LoadPilotInput(vm["source"].as<std::string>(), vm["config"].as<std::string>(),
                     vm["policy"].as<std::string>());
  if (!in.ok()) {
    inv.err << in.status().ToString() << "\n";
    return in.status().code() == Code::kInvalid ? kExitUsage : kExitNo;
  }
  ReportInput r;
  r.label = in->label;
  r.generated_at = FormatRfc3339(static_cast<int64_t>(std::time(nullptr)));
  r.results = in->results;
  if (in->verdict) r.verdict = &*in->verdict;
  std::optional<Plan> plan;
  if (in->config && in->results.single && in->results.single->shape.params > 0) {
    PlanQuery q;
    q.native_extensions = ExtensionsToQualify(in->results);
    Result<Plan> p = MakePlan(*in->results.single, *in->config, in->catalog, in->policy, q,
                              CalibrationFrom(*in->results.single));
    if (p.ok()) {
      plan = std::move(p).value();
      r.plan = &*plan;
      r.policy = &in->policy;
    } else {
      r.plan_error = p.status().ToString();
    }
    r.checkpoint_interval = in->config->run.checkpoint_interval;
  } else {
    r.plan_error = in->config ? "no single-stage measurements" : in->config_error;
  }
  Result<std::string> metrics =
      ReadPilotFile(in->policy, in->metrics_path, kMaxMetricsBytes, in->from_job);
  if (metrics.ok()) {
    size_t skipped = 0;
    r.metrics = ParseMetricsJsonl(*metrics, &skipped);
    if (skipped > 0) {
      inv.err << "pilot: report: " << in->metrics_path << ": skipped " << skipped
              << " unreadable lines\n";
    }
  } else if (metrics.status().code() != Code::kNotFound) {
    inv.err << "pilot: report: " << metrics.status().Message() << " (per-step plots left out)\n";
  }
  const std::string html = RenderReportHtml(r);
  const std::string out = vm["output"].as<std::string>();
  if (out == "-") {
    inv.out << html;
    return kExitOk;
  }
  Status s = WriteFileAtomic(out, html, 0644);
  if (!s.ok()) {
    inv.err << s.ToString() << "\n";
    return kExitNo;
  }
  inv.out << "wrote " << out << "\n";
  return kExitOk;
}

}  // namespace pilot::cli
