// `mlaverify show`: turns a dump's replay (or a scenario's run on a backend) into viz::Picture.
// For a dump the heatmap is the server's o against the model; for a scenario, the backend's.
#include "cli/show.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "cli/backends.h"
#include "cli/dump_commands.h"
#include "cli/json_writer.h"
#include "dump/diagnose.h"
#include "dump/dump.h"
#include "dump/replay.h"
#include "mlaverify/error.h"
#include "model/attention.h"
#include "model/mask.h"
#include "model/tree.h"
#include "model/validate.h"
#include "props/case.h"
#include "scenarios/scenario.h"
#include "viz/show.h"

namespace mlaverify::cli {
namespace {

// One request's tree and mask as the kernel reads them (padded rows: the raw bits, no tree).
viz::RequestPicture request_picture(const VerifyParams& p, int32_t i, bool padded,
                                    const std::vector<int32_t>* parents) {
  viz::RequestPicture r;
  const RequestExtent e = request_extent(p, i);
  const int32_t D = e.draft_nodes;
  r.prefix_len = e.prefix_len;
  r.padded = padded;
  const model::BitRows block = model::draft_block(p, i);
  r.visible.resize(static_cast<size_t>(D) * D);
  for (int32_t t = 0; t < D; ++t) {
    for (int32_t j = 0; j < D; ++j) r.visible[static_cast<size_t>(t) * D + j] = block.test(t, j);
  }
  // The tree: the metadata's parents when given (then mask cells that disagree are marked),
  // else the mask decoded; a padded row's garbage mask is no tree, so it is drawn as a chain.
  model::DraftTree tree = model::DraftTree::chain(D);
  bool known = false;
  if (parents != nullptr) {
    tree = model::DraftTree::from_parents(*parents);
    known = true;
  } else if (!padded) {
    try {
      tree = model::DraftTree::from_ancestor_bits(block);
    } catch (const InvalidInput&) {
    }
  }
  r.parents = tree.parents();
  if (known) {
    r.expected.resize(r.visible.size());
    for (int32_t t = 0; t < D; ++t) {
      for (int32_t j = 0; j < D; ++j) r.expected[static_cast<size_t>(t) * D + j] = tree.visible(t, j);
    }
  }
  std::ostringstream label;
  label << (padded ? "padded " : "") << "request " << i << " (D=" << D << ", P=" << e.prefix_len
        << ")";
  r.label = label.str();
  return r;
}

viz::ErrorPicture error_picture(const VerifyParams& p, int32_t real_bs,
                                const dump::Comparison& c) {
  viz::ErrorPicture e;
  e.tokens = p.qo_indptr[p.batch_size];
  e.heads = p.num_heads;
  e.columns = kLatentDim;
  e.ratio = c.ratio;
  e.request_begin.assign(p.qo_indptr, p.qo_indptr + p.batch_size + 1);
  e.token_padded.assign(static_cast<size_t>(e.tokens), 0);
  for (int32_t i = real_bs; i < p.batch_size; ++i) {
    for (int64_t t = p.qo_indptr[i]; t < p.qo_indptr[i + 1]; ++t) {
      e.token_padded[static_cast<size_t>(t)] = 1;
      for (int32_t h = 0; h < p.num_heads; ++h) {
        for (int k = 0; k < kLatentDim; ++k) {
          e.ratio[(static_cast<size_t>(t) * p.num_heads + h) * kLatentDim + k] = 0.f;  // not judged
        }
      }
    }
  }
  // The worst elements of the real requests, worst first (at most 5).
  std::vector<const dump::RequestResult*> rs;
  for (const auto& r : c.requests) {
    if (!r.padded && r.worst_column >= 0) rs.push_back(&r);
  }
  std::sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->worst_ratio > b->worst_ratio; });
  for (size_t k = 0; k < std::min<size_t>(5, rs.size()); ++k) {
    const dump::RequestResult& r = *rs[k];
    e.worst.push_back({r.request, r.worst_token, r.worst_head, r.worst_column,
                       std::fabs(r.worst_got - r.worst_ref), r.worst_bound});
  }
  return e;
}

std::string g(double v) {
  std::ostringstream s;
  s << std::setprecision(3) << v;
  return s.str();
}

}  // namespace

int show(const ShowOptions& o, std::ostream& out) {
  std::filesystem::path stem = o.out.empty() ? o.input.filename().replace_extension() : o.out;
  viz::Picture pic;
  dump::Comparison cmp;
  std::string what;
  try {
    if (is_dump_path(o.input)) {
      dump::ServerDump d = dump::ServerDump::load(o.input);
      const VerifyParams p = d.params();
      for (int32_t i = 0; i < d.batch_size(); ++i) {
        const std::vector<int32_t>* parents =
            (!d.padded(i) && i < static_cast<int32_t>(d.parents().size())) ? &d.parents()[i]
                                                                           : nullptr;
        pic.requests.push_back(request_picture(p, i, d.padded(i), parents));
      }
      std::ostringstream title;
      title << o.input.filename().string() << ": " << d.real_batch_size() << " requests";
      if (d.batch_size() > d.real_batch_size()) {
        title << " + " << (d.batch_size() - d.real_batch_size()) << " padded";
      }
      title << ", H = " << d.num_heads() << (d.preset().empty() ? "" : ", " + d.preset());
      pic.title = title.str();
      if (d.has_o()) {
        const dump::Reference ref = dump::reference(d, dump::KernelAssumptions{});
        cmp = dump::compare(p, d.real_batch_size(), d.server_o(), d.server_lse(), ref.o, ref.lse,
                            ref.bound);
        pic.errors = error_picture(p, d.real_batch_size(), cmp);
        what = "the server's o";
        pic.caption = "Heatmap: |server o - model| / bound per element (max over 8 columns per "
                      "pixel), bound for a bf16-in, fp32-accumulate, bf16-out kernel (docs/spec.md "
                      "§10.4). " +
                      std::string(cmp.pass() ? "Every real element is within bound"
                                             : "Red elements exceed their bound") +
                      ": worst " + g(cmp.worst_ratio()) + "x, relative Frobenius " +
                      g(cmp.rel_frobenius()) + ". Padded rows are hatched and not judged.";
      } else {
        pic.caption = "The dump holds no server o: no heatmap.";
      }
    } else {
      const scenarios::Scenario s = scenarios::load_scenario(o.input);
      model::VerifyBatch batch = props::build_batch(s.spec);
      const std::string backend_name = o.backend.empty() ? "cpu" : o.backend;
      BackendPtr backend = make_backend(backend_name);
      const props::RunOutput run = props::run_backend(*backend, batch);
      const VerifyParams p = batch.params();
      for (int32_t i = 0; i < batch.batch_size(); ++i) {
        const bool padded = i >= batch.real_batch_size();
        const std::vector<int32_t>* parents = padded ? nullptr : &batch.tree(i).parents();
        pic.requests.push_back(request_picture(p, i, padded, parents));
      }
      const dump::BoundTerms bound = dump::bound_terms(p, dump::KernelAssumptions{});
      const model::RefResult ref = model::reference_verify(p);
      cmp = dump::compare(p, batch.real_batch_size(), run.o, run.lse, ref.o_lat, ref.lse, bound);
      pic.errors = error_picture(p, batch.real_batch_size(), cmp);
      pic.title = o.input.filename().string() + ": " + scenarios::summary(s.spec) + " on " +
                  backend_name;
      what = "backend " + backend_name;
      pic.caption = "Heatmap: |" + backend_name + " o - model| / bound per element (the bound of "
                    "docs/spec.md §10.4). Worst " + g(cmp.worst_ratio()) + "x. Property " +
                    s.property + ", found on " + s.backend + ".";
    }
    viz::render(pic, stem);
  } catch (const InvalidInput& e) {
    out << "mlaverify: bad input: " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    out << "mlaverify: bad input: " << o.input.string() << ": " << e.what() << "\n";
    return 2;
  }
  const int rc = cmp.pass() ? 0 : 1;
  if (o.json) {
    JsonWriter j(out);
    j.begin_object().field("command", "show").field("exit_code", int64_t{rc});
    j.field("file", o.input.string());
    j.field("svg", stem.string() + ".svg").field("png", stem.string() + ".png");
    j.field("pass", cmp.pass()).field("worst_ratio", cmp.worst_ratio()).end_object();
    out << "\n";
  } else {
    out << "show " << o.input.string() << ": wrote " << stem.string() << ".svg and "
        << stem.string() << ".png (" << what << ": worst element " << g(cmp.worst_ratio())
        << "x its bound" << (cmp.pass() ? ", within bound" : ", FAILS") << ")\n";
  }
  return rc;
}

}  // namespace mlaverify::cli
