// An outside program on mlaverify's libraries: a model batch (two requests, a tree and a chain,
// two prefix splits), the CPU backend run on it, its max error against the model printed; then
// the same backend through one property (props) and the shipped scenario folder (scenarios); the
// CUDA backend through the same property where the package has mlaverify::cuda and a device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>

#include "cpu/cpu_backend.h"
#include "mlaverify/verify_params.h"
#include "model/attention.h"
#include "model/batch.h"
#include "props/properties.h"
#include "scenarios/scenario.h"
#ifdef MLAV_CONSUMER_CUDA
#include "cuda/cuda_backend.h"
#endif

int main() try {
  using namespace mlaverify;
  model::BatchSpec spec;
  spec.requests.push_back({model::DraftTree::from_parents({-1, 0, 0, 1, 1, 2}), 70});
  spec.requests.push_back({model::DraftTree::chain(3), 5});
  spec.num_heads = 4;
  spec.num_splits = 2;
  spec.seed = 11;
  model::VerifyBatch batch = model::VerifyBatch::build(spec);
  const model::RefResult ref = model::reference_verify(batch.params());

  BackendPtr cpu = cpu::make_cpu_backend();
  batch.poison_outputs();
  cpu->run(batch.params());
  double max_err = 0, max_ref = 0;
  bool finite = true;
  for (int64_t t = 0; t < batch.real_tokens(); ++t) {
    for (int32_t h = 0; h < spec.num_heads; ++h) {
      for (int32_t k = 0; k < kLatentDim; ++k) {
        const double o = batch.o_lat_value(t, h, k);
        finite = finite && std::isfinite(o);
        max_err = std::max(max_err, std::abs(o - ref.o(t, h, k)));
        max_ref = std::max(max_ref, std::abs(ref.o(t, h, k)));
      }
    }
  }
  std::printf("consumer: %s vs model, %lld tokens x %d heads: max |o - ref| = %.3e (max |ref| %.3e)\n",
              cpu->name().c_str(), static_cast<long long>(batch.real_tokens()), spec.num_heads,
              max_err, max_ref);

  props::Case c;
  c.num_heads = 4;
  c.num_splits = 3;
  c.seed = 5;
  c.requests.push_back({});
  c.requests.back().parents = {-1, 0, 1, 0};
  c.requests.back().prefix_len = 65;
  const props::PropertyResult r = props::check_vs_model(*cpu, c);
  std::printf("consumer: props::check_vs_model: %s %s\n", r.ok ? "pass" : "FAIL", r.detail.c_str());

  const auto files = scenarios::list_scenarios(MLAV_SCENARIO_CASES_DIR);
  std::printf("consumer: %zu shipped scenarios under %s\n", files.size(), MLAV_SCENARIO_CASES_DIR);

  bool cuda_ok = true;
#ifdef MLAV_CONSUMER_CUDA
  if (const Support dev = cuda::cuda_device_available(); dev) {
    BackendPtr gpu = cuda::make_cuda_backend();
    const props::PropertyResult g = props::check_vs_model(*gpu, c);
    cuda_ok = g.ok;
    std::printf("consumer: mlaverify::cuda: %s %s\n", g.ok ? "pass" : "FAIL", g.detail.c_str());
  } else {
    std::printf("consumer: mlaverify::cuda linked; not run: %s\n", dev.reason.c_str());
  }
#endif

  // A sanity bound only (bf16 output: 2^-8 relative, plus the sums); props derives the real one.
  const bool ok = finite && max_err <= 0x1.0p-5 * max_ref && max_ref > 0 && r.ok &&
                  !files.empty() && cuda_ok;
  std::printf("consumer: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "consumer: %s\n", e.what());
  return 1;
}
