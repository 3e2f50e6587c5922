// `mlaverify replay` of scenario files: each against the chosen backend, and against the mutant
// that found it, if any. A file that does not load is reported and the others still run.
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "cli/backends.h"
#include "cli/commands.h"
#include "mlaverify/error.h"
#include "props/campaign.h"
#include "props/case.h"
#include "scenarios/scenario.h"
#include "sim/sim_scenario.h"

namespace mlaverify::cli {
namespace {

// The rate a case's FLOPs are turned into an estimate of seconds with: the model and the CPU
// backend on this project's 2-core machine run at 10-25 GFLOP/s (README: the CPU backend's
// benchmark); 2 GFLOP/s keeps the estimate an upper bound on a slower machine.
constexpr double kReplayFlopsPerSecond = 2e9;

std::string cost_text(const props::CaseCost& c) {
  std::ostringstream s;
  s << std::setprecision(3) << static_cast<double>(c.bytes) / (1 << 20) << " MiB, ~"
    << c.flops / kReplayFlopsPerSecond << " s";
  return s.str();
}

bool is_sim_scenario_file(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  return f && sim::is_sim_scenario(text.str());
}

// A simulation scenario (sim/sim_scenario.h): the simulation re-run to its step without the
// planted fault on the chosen backend (pass: the code is right), then, when one was planted and
// recorded runs are checked, with it (it must fail again: "reproduced").
ReplayEntry replay_sim_file(const std::filesystem::path& file, Backend& backend,
                            const ReplayOptions& options) {
  ReplayEntry e;
  e.file = file.string();
  const sim::SimScenario s = sim::load_sim_scenario(file);
  e.property = "simulate:" + s.kind;
  const sim::SimReplay clean = sim::replay(s, backend, false);
  e.status = clean.reproduced ? "fail" : "pass";
  if (clean.reproduced) {
    const sim::SimFailure& f = clean.result.failures.front();
    e.detail = "step " + std::to_string(f.step) + " [" + f.kind + "]: " + f.detail;
  }
  if (options.check_recorded && s.config.fault != sim::PlantedFault::None) {
    e.recorded_backend = "fault:" + sim::to_string(s.config.fault) + " (" + s.backend + ")";
    e.recorded = sim::replay(s, backend, true).reproduced ? "reproduced" : "not_reproduced";
  } else if (options.check_recorded && s.backend.starts_with(kMutantPrefix)) {
    e.recorded_backend = s.backend;
    BackendPtr recorded = make_backend_or_mutant(s.backend);
    e.recorded = sim::replay(s, *recorded, true).reproduced ? "reproduced" : "not_reproduced";
  }
  return e;
}

// One file: its entry, with InvalidInput (a file that does not load, an unknown property or
// recorded mutant) turned into a bad-input entry naming the field and index.
ReplayEntry replay_file(const std::filesystem::path& file, Backend& backend,
                        const ReplayOptions& options) {
  ReplayEntry e;
  e.file = file.string();
  try {
    if (is_sim_scenario_file(file)) return replay_sim_file(file, backend, options);
    const scenarios::Scenario s = scenarios::load_scenario(file);
    e.property = s.property;
    // Said, and budgeted, before anything is built: a legal scenario can ask for gigabytes.
    const props::CaseCost cost = props::estimate_cost(s.spec);
    if (cost.bytes > options.max_memory || cost.flops / kReplayFlopsPerSecond > options.max_seconds) {
      throw InvalidInput("case", -1,
                         "this case needs about " + cost_text(cost) + ", over the budget of " +
                             std::to_string(options.max_memory >> 20) + " MiB and " +
                             std::to_string(static_cast<int64_t>(options.max_seconds)) +
                             " s (raise --max-memory / --max-seconds)");
    }
    if (options.progress != nullptr &&
        (cost.bytes > (int64_t{256} << 20) || cost.flops / kReplayFlopsPerSecond > 1)) {
      *options.progress << "     " << file.filename().string() << ": estimated " << cost_text(cost)
                        << "\n";
    }
    const props::PropertyResult r = props::replay(s, backend);
    e.status = r.skipped ? "skip" : r.ok ? "pass" : "fail";
    if (r.skipped || !r.ok) e.detail = r.detail;
    if (!options.check_recorded || !s.backend.starts_with(kMutantPrefix)) return e;
    e.recorded_backend = s.backend;
    if (s.backend.starts_with(std::string(kMutantPrefix) + "cpu_fault:")) {
      // Faults live only in the CPU backend's test build (cpu/faults.h), never in this binary;
      // tests/props replays these files on that build and requires them to fail there.
      e.recorded = "test_build_fault";
      return e;
    }
    BackendPtr recorded = make_backend_or_mutant(s.backend);
    const props::PropertyResult m = props::replay(s, *recorded);
    e.recorded = !m.ok && !m.skipped ? "reproduced" : "not_reproduced";
  } catch (const InvalidInput& err) {
    e.status = "bad_input";
    e.field = err.field();
    e.index = err.index();
    e.detail = err.what();
    e.recorded.clear();
  }
  return e;
}

ReplayEntry bad_path(const std::filesystem::path& p, const std::string& why) {
  ReplayEntry e;
  e.file = p.string();
  e.status = "bad_input";
  e.field = "path";
  e.detail = "path: " + why + " (" + p.string() + ")";
  return e;
}

}  // namespace

ReplayResult run_replay(const ReplayOptions& options, std::ostream& out) {
  BackendPtr backend = make_backend_or_mutant(options.backend);
  return run_replay(*backend, options, out);
}

ReplayResult run_replay(Backend& backend, const ReplayOptions& options, std::ostream& out) {
  ReplayResult res;
  res.backend = backend.name();
  // Printed as each file finishes, so a long replay shows where it is.
  auto record = [&](ReplayEntry e) {
    if (e.status == "bad_input") {
      ++res.bad_input;
      out << "BAD  " << e.file << ": " << e.detail << "\n";
      res.entries.push_back(std::move(e));
      return;
    }
    const std::string name = std::filesystem::path(e.file).filename().string();
    (e.status == "pass" ? res.passed : e.status == "fail" ? res.failed : res.skipped)++;
    out << (e.status == "pass"   ? "pass "
            : e.status == "fail" ? "FAIL "
                                 : "SKIP ")
        << name << " [" << e.property << " on " << res.backend << "]";
    if (!e.detail.empty()) out << ": " << e.detail;
    out << "\n";
    if (e.recorded == "test_build_fault") {
      out << "     recorded on " << e.recorded_backend
          << ": a test-build fault, re-checked by mutants_tests\n";
      ++res.test_build_only;
    } else if (!e.recorded.empty()) {
      const bool ok = e.recorded == "reproduced";
      out << "     " << (ok ? "reproduced on " : "NOT reproduced on ") << e.recorded_backend
          << "\n";
      (ok ? res.reproduced : res.not_reproduced)++;
    }
    res.entries.push_back(std::move(e));
  };
  for (const std::filesystem::path& p : options.paths) {
    std::vector<std::filesystem::path> files;
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      files = scenarios::list_scenarios(p);
      if (files.empty()) record(bad_path(p, "folder has no *.json scenario file"));
    } else if (!std::filesystem::exists(p, ec)) {
      record(bad_path(p, "no such file or folder"));
    } else {
      files.push_back(p);
    }
    ReplayOptions with_log = options;
    with_log.progress = &out;
    for (const std::filesystem::path& f : files) {
      record(replay_file(f, backend, with_log));
    }
  }

  const int32_t ran = res.passed + res.failed;
  if (res.entries.empty()) res.not_verified.push_back("no scenario given");
  if (res.skipped > 0 && !options.allow_skipped) {
    res.not_verified.push_back(std::to_string(res.skipped) + " scenario(s) skipped by " +
                               res.backend + ": their properties were not checked");
  } else if (ran == 0 && res.skipped > 0) {
    res.not_verified.push_back("every scenario was skipped by " + res.backend);
  }
  out << "replay: " << res.passed << " passed, " << res.failed << " failed, " << res.bad_input
      << " bad input, " << res.skipped << " skipped";
  if (options.check_recorded) {
    out << "; recorded mutants " << res.reproduced << " reproduced, " << res.not_reproduced
        << " not, " << res.test_build_only << " test-build faults left to mutants_tests";
  }
  out << "\n";
  for (const std::string& line : res.not_verified) out << "NOT VERIFIED: " << line << "\n";

  // A mismatch is the strongest finding and wins; then bad input (the run is incomplete through
  // the files' fault, or there was nothing to run); then nothing verified.
  if (res.failed > 0 || res.not_reproduced > 0) {
    res.exit_code = kExitFail;
  } else if (res.bad_input > 0 || res.entries.empty()) {
    res.exit_code = kExitBadInput;
  } else if (!res.not_verified.empty()) {
    res.exit_code = kExitFail;
  } else {
    res.exit_code = kExitPass;
  }
  return res;
}

int replay(const ReplayOptions& options, std::ostream& out) {
  return run_replay(options, out).exit_code;
}

BackendsResult run_backends() { return {backend_names(), mutant_names()}; }

}  // namespace mlaverify::cli
