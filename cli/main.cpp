// The mlaverify command line. CLI11 lives in this translation unit only (slow to compile); each
// command is a plain function in commands.h.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <exception>
#include <iostream>

#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/dump_commands.h"
#include "cli/show.h"
#include "mlaverify/error.h"

int main(int argc, char** argv) {
  using namespace mlaverify;
  CLI::App app{"mlaverify: verification toolkit for MLA tree-verify attention kernels"};
  app.require_subcommand(1);

  cli::SelfcheckOptions self;
  CLI::App* selfcheck = app.add_subcommand(
      "selfcheck", "Check the reference model against itself and the CPU backend over the presets");
  selfcheck->add_option("--cases", self.cases_per_config, "Generated batches per (preset, tp)")
      ->check(CLI::Range(1, 1000));
  selfcheck->add_option("--seed", self.seed, "Seed of the generated batches");

  cli::FuzzOptions fz;
  CLI::App* fuzz = app.add_subcommand("fuzz", "Run a fuzz campaign of every property on a backend");
  fuzz->add_option("--backend", fz.backend, "model, cpu, cpu-folded, cuda, or mutant:<name>");
  fuzz->add_option("--cases", fz.cases, "Random cases")->check(CLI::Range(1, 1000000));
  fuzz->add_option("--seed", fz.seed, "Seed: the campaign is a function of it");
  fuzz->add_option("--property", fz.properties, "Only these properties (repeatable)");
  fuzz->add_option("--out", fz.out_dir, "Folder for shrunk failing scenarios");

  cli::ReplayOptions rp;
  CLI::App* replay = app.add_subcommand("replay", "Replay scenario files on a backend");
  replay->add_option("--backend", rp.backend, "model, cpu, cpu-folded, cuda, or mutant:<name>");
  replay->add_option("paths", rp.paths, "Scenario files or folders")->required();
  replay->add_flag("!--no-recorded", rp.check_recorded,
                   "Skip re-running scenarios on the mutant that found them");
  cli::DumpOptions dopt;
  replay->add_flag("--json", dopt.json, "Machine-readable output (server dumps)");
  replay->add_option("--max-memory", dopt.max_memory, "Bytes a dump may hold in memory");
  replay->add_option("--max-seconds", dopt.max_seconds, "Refuse dumps whose model pass is longer");

  std::vector<std::filesystem::path> dumps;
  CLI::App* diagnose = app.add_subcommand(
      "diagnose", "Explain a server dump's disagreement: the model under every known wrong reading");
  diagnose->add_option("dumps", dumps, "Server dumps (.safetensors)")->required();
  diagnose->add_option("--reading", dopt.readings, "Only these readings (repeatable)");
  diagnose->add_flag("--json", dopt.json, "Machine-readable output");
  diagnose->add_option("--max-memory", dopt.max_memory, "Bytes a dump may hold in memory");
  diagnose->add_option("--max-seconds", dopt.max_seconds, "Refuse dumps whose model pass is longer");

  cli::ShowOptions sh;
  CLI::App* show = app.add_subcommand(
      "show", "Draw a scenario or dump: trees, the mask as read, the error heatmap (SVG + PNG)");
  show->add_option("file", sh.input, "A scenario (.json) or a server dump (.safetensors)")
      ->required();
  show->add_option("--out", sh.out, "Output stem: writes <stem>.svg and <stem>.png");
  show->add_option("--backend", sh.backend, "Scenario: the backend whose error is drawn (cpu)");
  show->add_flag("--json", sh.json, "Machine-readable output");

  CLI::App* backends = app.add_subcommand("backends", "List the backends this build can run");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*selfcheck) return cli::selfcheck(self, std::cout);
    if (*fuzz) return cli::fuzz(fz, std::cout);
    if (*replay) {
      bool all_dumps = true;
      for (const auto& path : rp.paths) all_dumps = all_dumps && cli::is_dump_path(path);
      if (all_dumps) {
        // A dump is judged against the model; a backend runs on it only when named.
        if (replay->get_option("--backend")->count() > 0) dopt.backend = rp.backend;
        int rc = 0;
        for (const auto& path : rp.paths) rc = std::max(rc, cli::replay_dump(path, dopt, std::cout));
        return rc;
      }
      return cli::replay(rp, std::cout);
    }
    if (*show) return cli::show(sh, std::cout);
    if (*diagnose) {
      int rc = 0;
      for (const auto& path : dumps) rc = std::max(rc, cli::diagnose_dump(path, dopt, std::cout));
      return rc;
    }
    if (*backends) {
      for (const std::string& name : cli::backend_names()) std::cout << name << "\n";
      return 0;
    }
  } catch (const InvalidInput& e) {
    std::cerr << "mlaverify: invalid input: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "mlaverify: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
