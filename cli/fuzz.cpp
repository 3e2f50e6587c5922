// `mlaverify fuzz` and `mlaverify replay`: a fuzz campaign against a named backend, and replays of
// scenario files (each against the chosen backend, and against the mutant that found it, if any).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <ostream>

#include "cli/backends.h"
#include "cli/commands.h"
#include "mlaverify/error.h"
#include "props/campaign.h"
#include "props/mutants.h"
#include "scenarios/scenario.h"

namespace mlaverify::cli {
namespace {

constexpr std::string_view kMutantPrefix = "mutant:";

// "mutant:<name>" wraps the CPU backend in a catalog mutant; any other name is a plain backend.
BackendPtr backend_or_mutant(std::string_view name) {
  if (name.starts_with(kMutantPrefix)) {
    std::string_view mutant = name.substr(kMutantPrefix.size());
    // A recorded label reads "mutant:<name>(<inner>)": the inner backend is always cpu here.
    if (size_t paren = mutant.find('('); paren != std::string_view::npos) {
      mutant = mutant.substr(0, paren);
    }
    for (const props::MutantInfo& m : props::all_mutants()) {
      if (m.name == mutant) return props::make_mutant(m.mutant, make_backend("cpu"));
    }
    std::string known;
    for (const props::MutantInfo& m : props::all_mutants()) {
      known += (known.empty() ? "" : ", ") + std::string(m.name);
    }
    throw InvalidInput("backend", -1,
                       "unknown mutant '" + std::string(mutant) + "' (known: " + known + ")");
  }
  return make_backend(name);
}

}  // namespace

int fuzz(const FuzzOptions& options, std::ostream& out) {
  BackendPtr backend = backend_or_mutant(options.backend);
  props::CampaignOptions campaign;
  campaign.cases = options.cases;
  campaign.seed = options.seed;
  campaign.properties = options.properties;
  campaign.out_dir = options.out_dir;
  out << "mlaverify fuzz: backend " << backend->name() << ", " << options.cases
      << " cases, seed " << options.seed << " (replay the campaign with --seed " << options.seed
      << ")\n";
  // A line per tenth of the campaign on stderr, so a long run shows it is alive.
  campaign.on_case = [&](int32_t done, int32_t total) {
    if (done == total || done % std::max(1, total / 10) == 0) {
      std::cerr << "  " << done << "/" << total << " cases\n";
    }
  };
  const props::FuzzReport report = props::run_campaign(*backend, campaign);
  out << report.to_string();
  for (const props::Failure& f : report.failures) {
    out << "FAILED " << f.property << " at case " << f.case_index << ", shrunk in "
        << f.shrink_steps << " steps to " << f.shrunk.spec.batch_size() << " request(s), "
        << f.shrunk.spec.total_draft() << " node(s), prefix " << f.shrunk.spec.total_prefix()
        << ": " << f.detail << "\n";
    if (!f.file.empty()) out << "  scenario written to " << f.file.string() << "\n";
  }
  return report.ok() ? 0 : 1;
}

int replay(const ReplayOptions& options, std::ostream& out) {
  BackendPtr backend = backend_or_mutant(options.backend);
  std::vector<std::filesystem::path> files;
  for (const std::filesystem::path& p : options.paths) {
    if (std::filesystem::is_directory(p)) {
      for (const std::filesystem::path& f : scenarios::list_scenarios(p)) files.push_back(f);
    } else {
      files.push_back(p);
    }
  }
  int passed = 0, failed = 0, reproduced = 0, not_reproduced = 0, test_build_only = 0;
  for (const std::filesystem::path& file : files) {
    const scenarios::Scenario s = scenarios::load_scenario(file);
    const props::PropertyResult r = props::replay(s, *backend);
    out << (r.skipped ? "SKIP " : r.ok ? "pass " : "FAIL ") << file.filename().string() << " ["
        << s.property << " on " << backend->name() << "]";
    if (r.skipped || !r.ok) out << ": " << r.detail;
    out << "\n";
    if (!r.skipped) (r.ok ? passed : failed)++;
    // A scenario found on a mutant must still fail there: the file reproduces its bug.
    if (options.check_recorded && s.backend.starts_with(std::string(kMutantPrefix) + "cpu_fault:")) {
      // Faults live only in the CPU backend's test build (cpu/faults.h), never in this binary;
      // tests/props replays these files on that build and requires them to fail there.
      out << "     recorded on " << s.backend << ": a test-build fault, re-checked by mutants_tests\n";
      ++test_build_only;
    } else if (options.check_recorded && s.backend.starts_with(kMutantPrefix)) {
      BackendPtr recorded = backend_or_mutant(s.backend);
      const props::PropertyResult m = props::replay(s, *recorded);
      const bool still_fails = !m.ok && !m.skipped;
      out << "     " << (still_fails ? "reproduced on " : "NOT reproduced on ") << s.backend << "\n";
      (still_fails ? reproduced : not_reproduced)++;
    }
  }
  out << "replay: " << passed << " passed, " << failed << " failed";
  if (options.check_recorded) {
    out << "; recorded mutants " << reproduced << " reproduced, " << not_reproduced << " not, "
        << test_build_only << " test-build faults left to mutants_tests";
  }
  out << "\n";
  return failed == 0 && not_reproduced == 0 ? 0 : 1;
}

}  // namespace mlaverify::cli
