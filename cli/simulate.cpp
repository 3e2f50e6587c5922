// `mlaverify simulate`: runs sim::simulate through a backend named as every command names one,
// writes the CSV, the summary table, the plots and a scenario per failing step.
#include "cli/simulate.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/json_writer.h"
#include "cli/progress.h"
#include "mlaverify/error.h"
#include "sim/sim_scenario.h"
#include "viz/plot.h"

namespace mlaverify::cli {

std::vector<int32_t> load_accept_trace(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidInput(path.string() + ": file", -1, "cannot be read");
  std::stringstream s;
  s << f.rdbuf();
  return sim::parse_accept_trace(s.str(), path.string());
}

namespace {

void plot_metrics(const std::vector<sim::StepMetrics>& steps, const std::string& title,
                  const std::filesystem::path& stem) {
  viz::LineChart chart;
  chart.title = title;
  auto panel = [&](const char* name, auto value, bool only_run = false) {
    viz::LinePanel p;
    p.y_label = name;
    for (const sim::StepMetrics& m : steps) {
      if (only_run && m.backend_ms < 0) continue;
      p.x.push_back(static_cast<double>(m.step));
      p.y.push_back(value(m));
    }
    chart.panels.push_back(std::move(p));
  };
  panel("runs per request", [](const sim::StepMetrics& m) { return m.runs_per_request; });
  panel("free-list runs", [](const sim::StepMetrics& m) { return double(m.free_list_runs); });
  panel("pages partially used", [](const sim::StepMetrics& m) { return double(m.partial_pages); });
  panel("slots moved by defrag", [](const sim::StepMetrics& m) { return double(m.slots_moved); });
  panel("live requests", [](const sim::StepMetrics& m) { return double(m.live_requests); });
  // The kernel's own time where the backend measures it (CUDA events), else Backend::run's wall.
  const bool timed = std::any_of(steps.begin(), steps.end(),
                                 [](const sim::StepMetrics& m) { return m.kernel_ms >= 0; });
  if (timed) {
    panel("kernel time (ms)", [](const sim::StepMetrics& m) { return m.kernel_ms; }, true);
  } else {
    panel("backend time (ms)", [](const sim::StepMetrics& m) { return m.backend_ms; }, true);
  }
  viz::render_lines(chart, stem);
}

std::string fmt(double v, int prec = 3) {
  std::ostringstream s;
  s << std::setprecision(prec) << v;
  return s.str();
}

}  // namespace

SimulateResult run_simulate(const SimulateOptions& options, std::ostream& out) {
  SimulateResult res;
  sim::SimConfig cfg = options.config;
  if (!options.trace_file.empty()) cfg.trace = sim::load_trace(options.trace_file.string());
  if (!options.accept_trace_file.empty()) {
    cfg.accept_trace = load_accept_trace(options.accept_trace_file);
  }
  sim::validate(cfg);
  BackendPtr backend = make_backend_or_mutant(options.backend);
  std::optional<Progress> bar;
  if (options.progress != nullptr) bar.emplace(*options.progress, options.progress_bar);
  const int32_t total = static_cast<int32_t>(cfg.steps);
  res.sim = sim::simulate(cfg, *backend, [&](const sim::StepMetrics& m) {
    if (bar) bar->update(static_cast<int32_t>(m.step + 1), total);
  });
  const sim::SimResult& r = res.sim;

  if (!options.csv.empty()) {
    std::ofstream f(options.csv, std::ios::binary);
    if (!f) throw InvalidInput("csv", -1, "cannot write " + options.csv.string());
    f << sim::metrics_csv(r.steps);
  }
  // Summary.
  double rpr_sum = 0, rpr_max = 0, flr_sum = 0, mrl_sum = 0;
  int64_t pp_max = 0, moved = 0, defrags = 0;
  std::vector<double> ms, kernel_ms;
  for (const sim::StepMetrics& m : r.steps) {
    rpr_sum += m.runs_per_request;
    rpr_max = std::max(rpr_max, m.runs_per_request);
    flr_sum += static_cast<double>(m.free_list_runs);
    mrl_sum += m.mean_run_length;
    pp_max = std::max(pp_max, m.partial_pages);
    moved += m.slots_moved;
    defrags += m.slots_moved > 0;
    if (m.backend_ms >= 0) ms.push_back(m.backend_ms);
    if (m.kernel_ms >= 0) kernel_ms.push_back(m.kernel_ms);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(kernel_ms.begin(), kernel_ms.end());
  const double n = std::max<double>(1, static_cast<double>(r.steps.size()));
  const std::string title =
      "simulate: " + backend->name() + ", page " + std::to_string(cfg.page_size) + " (" +
      (cfg.allocator == model::AllocatorKind::Paged ? "paged" : "token") + "), defrag " +
      sim::to_string(cfg.defrag) + ", tree " + sim::to_string(cfg.tree) + ", " + cfg.preset +
      " tp" + std::to_string(cfg.tp);
  out << title << "\n";
  out << "  steps                  " << r.steps_run << " of " << cfg.steps << " in "
      << fmt(r.seconds) << " s: " << fmt(r.steps_per_second, 4) << " steps/s\n";
  out << "  attention checked      " << r.checked_steps << " steps (every " << cfg.check_every
      << ")\n";
  out << "  requests finished      " << r.requests_finished << ", tokens accepted "
      << r.tokens_accepted << "\n";
  out << "  runs per request       mean " << fmt(rpr_sum / n) << ", max " << fmt(rpr_max) << "\n";
  out << "  mean run length        mean " << fmt(mrl_sum / n) << "\n";
  out << "  free-list runs         mean " << fmt(flr_sum / n) << "\n";
  out << "  pages partially used   max " << pp_max << "\n";
  out << "  defragmentation        " << defrags << " compactions moved " << moved << " slots\n";
  out << "  leaked slots (max)     " << r.max_leaked << "\n";
  if (!ms.empty()) {
    out << "  backend time           median " << fmt(ms[ms.size() / 2]) << " ms, max "
        << fmt(ms.back()) << " ms over " << ms.size() << " launches (wall time of Backend::run)\n";
  }
  if (!kernel_ms.empty()) {
    out << "  kernel time            median " << fmt(kernel_ms[kernel_ms.size() / 2]) << " ms, max "
        << fmt(kernel_ms.back()) << " ms over " << kernel_ms.size()
        << " launches (the backend's own device timer)\n";
  }
  if (cfg.fault != sim::PlantedFault::None) {
    out << "  planted fault          " << sim::to_string(cfg.fault)
        << (r.fault_applied ? " applied at step " + std::to_string(r.fault_applied_step)
                            : std::string(" never applied"))
        << "\n";
  }
  out << "  failures               " << r.failures.size() << "\n";
  for (const sim::SimFailure& f : r.failures) {
    out << "FAIL step " << f.step << " [" << f.kind << "]: " << f.detail << "\n";
  }
  if (!r.failures.empty()) {
    std::filesystem::create_directories(options.scenario_dir);
    const sim::SimFailure& f = r.failures.front();
    sim::SimScenario s{cfg, f.step, f.kind, f.detail, options.backend};
    const std::filesystem::path file =
        options.scenario_dir / ("sim_" + f.kind + "_step" + std::to_string(f.step) + ".json");
    sim::save_sim_scenario(file, s);
    res.scenarios.push_back(file);
    out << "scenario written to " << file.string() << " (mlaverify replay " << file.string()
        << ")\n";
  }
  if (!options.plot.empty()) {
    plot_metrics(r.steps, title, options.plot);
    out << "plots written to " << options.plot.string() << ".svg and .png\n";
  }
  if (!r.failures.empty()) {
    res.exit_code = kExitFail;
  } else if (r.checked_steps == 0 && cfg.check_every > 0) {
    out << "NOT VERIFIED: no step's attention was checked\n";
    res.exit_code = kExitFail;
  } else {
    res.exit_code = kExitPass;
  }
  return res;
}

void write_simulate_json(const SimulateResult& r, std::ostream& out) {
  JsonWriter w(out);
  w.begin_object();
  w.key("command").value("simulate");
  w.key("exit_code").value(static_cast<int64_t>(r.exit_code));
  w.key("steps_run").value(r.sim.steps_run);
  w.key("seconds").value(r.sim.seconds);
  w.key("steps_per_second").value(r.sim.steps_per_second);
  w.key("checked_steps").value(r.sim.checked_steps);
  w.key("requests_finished").value(r.sim.requests_finished);
  w.key("tokens_accepted").value(r.sim.tokens_accepted);
  w.key("max_leaked_slots").value(r.sim.max_leaked);
  w.key("fault_applied_step").value(r.sim.fault_applied_step);
  w.key("failures").begin_array();
  for (const sim::SimFailure& f : r.sim.failures) {
    w.begin_object();
    w.key("step").value(f.step);
    w.key("kind").value(f.kind);
    w.key("detail").value(f.detail);
    w.end_object();
  }
  w.end_array();
  w.key("scenarios").begin_array();
  for (const std::filesystem::path& p : r.scenarios) w.value(p.string());
  w.end_array();
  w.end_object();
  out << "\n";
}

int simulate(const SimulateOptions& options, std::ostream& out) {
  return run_simulate(options, out).exit_code;
}

}  // namespace mlaverify::cli
