// The mlaverify command line. CLI11 lives in this translation unit only (slow to compile); each
// command is a plain function in commands.h, registered below as one row of the subcommand table.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/convert.h"
#include "cli/dump_commands.h"
#include "cli/json_io.h"
#include "cli/progress.h"
#include "cli/show.h"
#include "cli/simulate.h"
#include "mlaverify/error.h"

namespace {

using namespace mlaverify;

constexpr const char* kExitCodes =
    "Exit codes (every command):\n"
    "  0  pass: everything asked for was checked, and it held\n"
    "  1  mismatch, or nothing verified: a property failed, a scenario no longer fails on the\n"
    "     mutant that found it, or the backend skipped every case of a property (or a scenario)\n"
    "  2  bad input: usage error, unknown backend/property/mutant, a file that is unreadable or\n"
    "     malformed, a folder without scenario files, shard reports that are not one campaign\n"
    "With --json, stdout holds one JSON document (also on errors) and the summary goes to stderr.";

// One row of the table: the subcommand, whether it was asked for --json, and what it runs
// (writing the human summary to the stream it is given).
struct Command {
  CLI::App* app = nullptr;
  bool json = false;
  std::function<int(std::ostream& human, bool json)> run;
};

// Runs a command with the exit-code contract: InvalidInput is 2 (bad input), any other error 1.
int run_guarded(Command& c) {
  std::ostream& human = c.json ? std::cerr : std::cout;
  const std::string name = c.app->get_name();
  try {
    return c.run(human, c.json);
  } catch (const InvalidInput& e) {
    std::cerr << "mlaverify " << name << ": bad input: " << e.what() << "\n";
    if (c.json) {
      cli::write_error_json(name, cli::kExitBadInput, e.field(), e.index(), e.what(), std::cout);
    }
    return cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "mlaverify " << name << ": error: " << e.what() << "\n";
    if (c.json) cli::write_error_json(name, cli::kExitFail, "", -1, e.what(), std::cout);
    return cli::kExitFail;
  }
}

// --backend's help: the names, mutants and plugins (cli/backends.h, include/mlaverify/c_api.h).
constexpr const char* kBackendHelp =
    "model, cpu, cpu-folded, cuda, mutant:<name>, or plugin:PATH.so[?ITEMS]: a kernel behind the "
    "C ABI (include/mlaverify/c_api.h). ITEMS are &-separated: 'guarded' runs every call in a "
    "worker process with guard regions around the outputs (out-of-bounds writes, crashes and "
    "hangs become failing cases), 'timeout=SECONDS' bounds each guarded call (default 60); the "
    "rest is the plugin's config";

void write_json_if(bool json, auto&&... args) {
  if (json) cli::write_json(args..., std::cout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mlaverify: verification toolkit for MLA tree-verify attention kernels"};
  app.require_subcommand(1);
  app.footer(kExitCodes);
  app.set_version_flag("--version", "mlaverify " MLAV_VERSION);
  std::vector<Command> commands;
  auto add = [&](const char* name, const char* help) -> Command& {
    Command& c = commands.emplace_back();
    c.app = app.add_subcommand(name, help);
    c.app->add_flag("--json", c.json, "Machine-readable result on stdout (summary on stderr)");
    c.app->footer(kExitCodes);
    return c;
  };
  commands.reserve(16);

  cli::SelfcheckOptions self;
  {
    Command& c =
        add("selfcheck",
            "Check the reference model against itself and the CPU backend over the presets");
    c.app->add_option("--cases", self.cases_per_config, "Generated batches per (preset, tp)")
        ->check(CLI::Range(1, 1000));
    c.app->add_option("--seed", self.seed, "Seed of the generated batches");
    c.run = [&](std::ostream& human, bool json) {
      const cli::SelfcheckResult r = cli::run_selfcheck(self, human);
      write_json_if(json, r);
      return r.exit_code;
    };
  }

  cli::FuzzOptions fz;
  std::string shard;
  std::filesystem::path report_file;
  {
    Command& c = add("fuzz", "Run a fuzz campaign of every property on a backend");
    c.app->add_option("--backend", fz.backend, kBackendHelp);
    c.app->add_option("--cases", fz.cases, "Random cases")
        ->check(CLI::Range(1, mlaverify::cli::kMaxCampaignCases));
    c.app->add_option("--seed", fz.seed, "Seed: the campaign is a function of it");
    c.app->add_option("--property", fz.properties, "Only these properties (repeatable)");
    c.app->add_option("--out", fz.out_dir, "Folder for shrunk failing scenarios");
    c.app->add_option("--shard", shard,
                      "K/N: run only the campaign's cases i with i % N == K (0 <= K < N); the N "
                      "shards together run exactly the unsharded campaign's cases");
    c.app->add_option("--report", report_file, "Write the result as JSON here (for merge)");
    c.app->add_flag("--coverage", fz.coverage,
                    "Print which value of every field and which edge the cases took");
    c.run = [&](std::ostream& human, bool json) {
      if (!shard.empty()) cli::parse_shard(shard, fz.shard_index, fz.shard_count);
      fz.progress = &std::cerr;
      fz.progress_bar = cli::stderr_is_terminal();
      const cli::CampaignReport r = cli::run_fuzz(fz, human);
      if (!report_file.empty()) {
        cli::save_report(report_file, r);
        human << "report written to " << report_file.string() << "\n";
      }
      write_json_if(json, "fuzz", r);
      return r.exit_code;
    };
  }

  cli::MergeOptions mg;
  {
    Command& c = add("merge", "Combine the --report files of a campaign's shards into one result");
    c.app->add_option("reports", mg.reports, "Report files, one per shard")->required();
    c.run = [&](std::ostream& human, bool json) {
      const cli::CampaignReport r = cli::run_merge(mg, human);
      write_json_if(json, "merge", r);
      return r.exit_code;
    };
  }

  cli::ReplayOptions rp;
  cli::DumpOptions dump_opts;
  {
    Command& c = add("replay",
                     "Replay scenario files on a backend, or server dumps (.safetensors) against "
                     "the model");
    c.app->add_option("--backend", rp.backend,
                      std::string(kBackendHelp) + " (dumps: also run it)");
    c.app->add_option("paths", rp.paths, "Scenario files, server dumps, or folders")->required();
    c.app->add_flag("!--no-recorded", rp.check_recorded,
                    "Skip re-running scenarios on the mutant that found them");
    c.app->add_flag("--allow-skipped", rp.allow_skipped,
                    "A scenario the backend cannot run is reported but does not fail the replay "
                    "(at least one must still run)");
    c.app->add_option("--max-memory", dump_opts.max_memory,
                      "Bytes a dump or scenario may hold in memory (default 8 GiB)");
    c.app->add_option("--max-seconds", dump_opts.max_seconds,
                      "Refuse a dump or scenario whose estimated model time is longer (600)");
    CLI::App* app_replay = c.app;
    c.run = [&, app_replay](std::ostream& human, bool json) {
      // Server dumps go to replay_dump, scenarios (and folders of them) to run_replay; a folder
      // may hold both.
      std::vector<std::filesystem::path> dumps, scenario_paths;
      for (const auto& path : rp.paths) {
        if (cli::is_dump_path(path)) {
          dumps.push_back(path);
          continue;
        }
        bool has_json = !std::filesystem::is_directory(path);
        if (std::filesystem::is_directory(path)) {
          std::vector<std::filesystem::path> found;
          for (const auto& e : std::filesystem::directory_iterator(path)) {
            if (cli::is_dump_path(e.path())) found.push_back(e.path());
            if (e.path().extension() == ".json") has_json = true;
          }
          std::sort(found.begin(), found.end());
          dumps.insert(dumps.end(), found.begin(), found.end());
          if (!has_json && !found.empty()) continue;  // a folder of dumps only
        }
        scenario_paths.push_back(path);
      }
      if (app_replay->get_option("--backend")->count() > 0) dump_opts.backend = rp.backend;
      dump_opts.json = json;
      rp.max_memory = dump_opts.max_memory;
      rp.max_seconds = dump_opts.max_seconds;
      int rc = cli::kExitPass;
      if (json && dumps.size() + (scenario_paths.empty() ? 0 : 1) > 1) std::cout << "[";
      bool first = true;
      for (const auto& d : dumps) {
        if (json && !first) std::cout << ",";
        first = false;
        rc = std::max(rc, cli::replay_dump(d, dump_opts, json ? std::cout : human));
      }
      if (!scenario_paths.empty()) {
        rp.paths = scenario_paths;
        if (json && !first) std::cout << ",";
        const cli::ReplayResult r = cli::run_replay(rp, human);
        write_json_if(json, r);
        rc = std::max(rc, r.exit_code);
      }
      if (json && dumps.size() + (scenario_paths.empty() ? 0 : 1) > 1) std::cout << "]\n";
      return rc;
    };
  }

  std::vector<std::filesystem::path> diagnose_paths;
  {
    Command& c = add("diagnose",
                     "Explain a server dump's disagreement: the model under every known wrong "
                     "reading of its inputs, ranked by how well each explains the server's o");
    c.app->add_option("dumps", diagnose_paths, "Server dumps (.safetensors)")->required();
    c.app->add_option("--reading", dump_opts.readings, "Only these readings (repeatable)");
    c.app->add_option("--max-memory", dump_opts.max_memory, "Bytes a dump may hold in memory");
    c.app->add_option("--max-seconds", dump_opts.max_seconds,
                      "Refuse a dump whose model pass is estimated longer");
    c.run = [&](std::ostream& human, bool json) {
      dump_opts.json = json;
      int rc = cli::kExitPass;
      if (json && diagnose_paths.size() > 1) std::cout << "[";
      for (size_t k = 0; k < diagnose_paths.size(); ++k) {
        if (json && k > 0) std::cout << ",";
        rc = std::max(rc, cli::diagnose_dump(diagnose_paths[k], dump_opts,
                                             json ? std::cout : human));
      }
      if (json && diagnose_paths.size() > 1) std::cout << "]\n";
      return rc;
    };
  }

  cli::ShowOptions sh;
  {
    Command& c = add("show",
                     "Draw a scenario or a server dump: draft trees, the mask as the kernel reads "
                     "it, and the per-element error heatmap (SVG and PNG)");
    c.app->add_option("file", sh.input, "A scenario (.json) or a server dump (.safetensors)")
        ->required();
    c.app->add_option("--out", sh.out, "Output stem: writes <stem>.svg and <stem>.png");
    c.app->add_option("--backend", sh.backend,
                      std::string("Scenario: the backend whose error is drawn (cpu); ") +
                          kBackendHelp);
    c.run = [&](std::ostream& human, bool json) {
      sh.json = json;
      return cli::show(sh, json ? std::cout : human);
    };
  }

  cli::ConvertOptions cv;  // convert (cli/convert.h): a mask file (docs/spec.md §11) re-encoded
  {
    Command& c = add("convert",
                     "Re-encode a mask file or server dump in another mask format, every other "
                     "tensor kept (docs/spec.md §11)");
    c.app->add_option("in", cv.in, "Mask file or server dump (.safetensors)")->required();
    c.app->add_option("out", cv.out, "Output file")->required();
    c.app->add_option("--to", cv.to,
                      "full_mask (or full), qlen_only, qlen_only_bitpacking, flashinfer_packed, "
                      "draft_bits, or parents (the trees as a JSON list of parent arrays)")
        ->required();
    c.app->add_option("--indptr", cv.indptr, "mask_indptr convention: csr or offsets");
    c.app->add_option("--word-bytes", cv.word_bytes, "qlen_only_bitpacking word: 1, 2 or 4");
    c.app->add_option("--max-memory", cv.max_memory, "Bytes the input may hold (default 8 GiB)");
    c.run = [&](std::ostream& human, bool json) {
      cv.json = json;
      return cli::convert(cv, json ? std::cout : human);
    };
  }

  cli::SimulateOptions sim_opts;  // simulate (cli/simulate.h): a rank's KV pool over many steps
  std::string tree = "ddtree", defrag = "off", allocator = "auto", fault = "none";
  {
    sim::SimConfig& sc = sim_opts.config;
    Command& c = add("simulate",
                     "Simulate one rank serving speculative decoding: requests arrive, each step's "
                     "verify batch runs through a backend; allocator invariants checked every "
                     "step, attention against the model every --check-every steps");
    c.app->add_option("--backend", sim_opts.backend, "model, cpu, cuda, plugin:..., mutant:<name>");
    c.app->add_option("--steps", sc.steps, "Steps to simulate")->check(CLI::Range(1, 100000000));
    c.app->add_option("--seed", sc.seed, "Seed: the whole run is a function of it");
    c.app->add_option("--check-every", sc.check_every,
                      "Run the backend and compare with the model every N steps (0: never)");
    c.app->add_option("--run-every", sc.run_every,
                      "Also run (and time) the backend every N steps without comparing (0: only "
                      "on checked steps)");
    c.app->add_option("--trace", sim_opts.trace_file,
                      "Requests: arrival_step,prompt_len,output_len per line (docs/spec.md §13)");
    c.app->add_option("--arrival-rate", sc.arrival_rate, "Mean arrivals per step (Poisson)");
    c.app->add_option("--prompt-min", sc.prompt_min, "Prompt length, uniform from");
    c.app->add_option("--prompt-max", sc.prompt_max, "Prompt length, uniform to");
    c.app->add_option("--output-min", sc.output_min, "Output length, uniform from");
    c.app->add_option("--output-max", sc.output_max, "Output length, uniform to");
    c.app->add_option("--max-running", sc.max_running, "Requests verified per step at most");
    c.app->add_option("--tree", tree, "ddtree (best-first budget), eagle (top-k), mtp (chain)");
    c.app->add_option("--tree-budget", sc.tree_budget, "DDTree nodes");
    c.app->add_option("--eagle-topk", sc.eagle_topk, "EAGLE nodes kept per depth");
    c.app->add_option("--eagle-depth", sc.eagle_depth, "EAGLE depth");
    c.app->add_option("--mtp-len", sc.mtp_len, "MTP chain length");
    c.app->add_option("--accept-prob", sc.accept_prob,
                      "Per-depth acceptance probabilities (the last repeats)")->delimiter(',');
    c.app->add_option("--accept-trace", sim_opts.accept_trace_file,
                      "Recorded accepted path lengths, one per verification, cycled");
    c.app->add_option("--pool-size", sc.pool_size, "Allocatable KV slots");
    c.app->add_option("--page-size", sc.page_size, "Tokens per page (1, 16, 64, ...)");
    c.app->add_option("--allocator", allocator, "token, paged, or auto (token for page size 1)");
    c.app->add_flag("--need-sort", sc.need_sort, "Freed slots wait and are merged sorted");
    c.app->add_option("--defrag", defrag, "off, tier0, tier1-threshold, tier1-every");
    c.app->add_option("--frag-threshold", sc.frag_threshold,
                      "tier1-threshold: compact when runs per request exceed this");
    c.app->add_option("--defrag-every", sc.defrag_every, "tier1-every: compact every N steps");
    c.app->add_option("--graph-sizes", sc.graph_sizes, "CUDA-graph capture sizes (pad up)")
        ->delimiter(',');
    c.app->add_option("--num-splits", sc.num_splits, "Prefix chunks asked of the backend (split-KV)");
    c.app->add_option("--preset", sc.preset, "deepseek-v3, kimi-k2, kimi-k2-0905");
    c.app->add_option("--tp", sc.tp, "Tensor parallelism (heads on the rank = heads / tp)");
    c.app->add_option("--fault", fault,
                      "Plant a fault: stale-slot-after-accept, double-free, stranded-partial-tail");
    c.app->add_option("--fault-step", sc.fault_step, "First step the fault may act at");
    c.app->add_option("--csv", sim_opts.csv, "Per-step metrics as CSV");
    c.app->add_option("--plot", sim_opts.plot, "Plots: writes <stem>.svg and <stem>.png");
    c.app->add_option("--scenario-dir", sim_opts.scenario_dir, "Where failing steps are written");
    c.run = [&](std::ostream& human, bool json) {
      sim::SimConfig& sc = sim_opts.config;
      sc.tree = sim::parse_tree_kind(tree);
      sc.defrag = sim::parse_defrag_policy(defrag);
      sc.fault = sim::parse_fault(fault);
      if (allocator == "auto") {
        sc.allocator = sc.page_size > 1 ? model::AllocatorKind::Paged : model::AllocatorKind::Token;
      } else if (allocator == "token" || allocator == "paged") {
        sc.allocator = allocator == "paged" ? model::AllocatorKind::Paged : model::AllocatorKind::Token;
      } else {
        throw InvalidInput("allocator", -1, "token, paged or auto, got '" + allocator + "'");
      }
      sim_opts.progress = &std::cerr;
      sim_opts.progress_bar = cli::stderr_is_terminal();
      const cli::SimulateResult r = cli::run_simulate(sim_opts, human);
      if (json) cli::write_simulate_json(r, std::cout);
      return r.exit_code;
    };
  }

  {
    Command& c = add("backends", "List the backends (and mutants) this build can run");
    c.run = [&](std::ostream& human, bool json) {
      const cli::BackendsResult r = cli::run_backends();
      if (json) {
        cli::write_json(r, std::cout);
      } else {
        for (const std::string& name : r.backends) human << name << "\n";
      }
      return cli::kExitPass;
    };
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version: 0
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (104-114) would say nothing to a script: a usage error is bad input.
    std::cerr << "mlaverify: usage error: " << e.what() << "\n";
    std::string help = "mlaverify --help";
    for (const Command& c : commands) {
      if (c.app->parsed()) help = "mlaverify " + c.app->get_name() + " --help";
    }
    std::cerr << "run '" << help << "' for the options\n";
    return cli::kExitBadInput;
  }
  for (Command& c : commands) {
    if (*c.app) return run_guarded(c);
  }
  return cli::kExitBadInput;  // unreachable: require_subcommand(1)
}
