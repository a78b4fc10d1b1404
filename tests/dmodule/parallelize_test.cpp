// DModule end to end on threads-as-ranks: the MLP seed plan and the GPT zoo plans against the
// single-device model in float64 (loss, every gradient, parameters after 5 AdamW steps), deferred
// init, Megatron communication volume, patches and plug-ins.
#include "dmodule/parallelize.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <mutex>

#include "core/error.h"
#include "dmodule/fqn_glob.h"
#include "dtensor/ops.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "optim/adamw.h"
#include "parallel/grad_sync.h"
#include "support/errors.h"
#include "support/expect_close.h"
#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale {
namespace {

using testing::box_of;
using testing::error_of;
using testing::max_relative_error;
using testing::pattern;
using testing::run_ranks;

constexpr double kTol = 1e-10;

/// What a run produced on rank 0: losses per step, full gradients of step 0, full parameters
/// after the last step, and the init values.
struct RunResult {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> init, grads, params;
  int64_t tp_bytes_step0 = 0;
  int64_t init_peak = 0, param_bytes = 0;
};

using ModelFactory = std::function<std::shared_ptr<Module>(int64_t tp)>;
using LossFn = std::function<DTensor(Module&, const DeviceMesh&, int step)>;

/// Trains `steps` AdamW steps of the model on `mesh_spec` with `plan`; rank 0 fills the result.
RunResult train(const MeshSpec& mesh_spec, const std::string& plan_name, const ModelFactory& make,
                const LossFn& loss_fn, int steps) {
  RunResult result;
  std::mutex mutex;
  const int world = static_cast<int>(mesh_spec.numel());
  run_ranks(world, [&](const comm::Group& group) {
    DeviceMesh mesh(group, mesh_spec);
    auto model = make(mesh.numel());
    Plan plan = plan_name.empty() ? replicate_plan(model->type() == "GPT" ? "gpt" : "mlp")
                                  : Plan::load(plan_name);
    ParallelizeOptions options;
    options.dtype = at::kDouble;
    options.seed = 1234;
    auto pm = parallelize_module(model, mesh, plan, options);
    const bool rank0 = group.rank() == 0;
    auto gather = [&](std::map<std::string, at::Tensor>& into, bool grads) {
      for (auto& [fqn, p] : pm->parameters()) {
        at::Tensor full = grads ? p->get().grad().full_tensor() : p->get().full_tensor();
        if (rank0) into[fqn] = full.detach().clone();
      }
    };
    gather(result.init, false);
    std::vector<std::pair<std::string, DTensor*>> named;
    for (auto& [fqn, p] : pm->parameters())
      named.emplace_back(fqn, &p->get());
    AdamW opt(whole_views(named), AdamWOptions{1e-2, 0.9, 0.95, 1e-8, 0.1});
    std::vector<DTensor*> params;
    for (auto& [fqn, p] : named)
      params.push_back(p);
    // No data parallelism here: grad sync only reduces Partial gradients (over tp).
    GradSync grad_sync(params, std::nullopt, 25 << 20);
    for (int step = 0; step < steps; ++step) {
      pm->zero_grad();
      const int64_t before = group.stats().bytes("tp");
      DTensor loss = loss_fn(pm->module(), mesh, step);
      DTensor replicated = loss.redistribute(Placements(mesh.ndim(), Placement::replicate()));
      replicated.to_local().backward();
      grad_sync.finish();
      if (step == 0) {
        result.tp_bytes_step0 = group.stats().bytes("tp") - before;
        gather(result.grads, true);
      }
      if (rank0) result.losses.push_back(replicated.to_local().item<double>());
      opt.step(1e-2);
    }
    gather(result.params, false);
    if (rank0) {
      std::lock_guard<std::mutex> lock(mutex);
      result.init_peak = pm->init_peak_bytes();
      result.param_bytes = pm->param_bytes();
    }
  });
  return result;
}

/// Compares a parallel run with the reference; rows of vocabulary-padded tensors are compared
/// up to `real_rows` for the FQNs in `padded`. Prints and returns the worst relative error.
double compare(const RunResult& run, const RunResult& ref, const std::string& label,
               const std::map<std::string, int64_t>& padded = {}) {
  double worst = 0;
  for (size_t s = 0; s < ref.losses.size(); ++s) {
    worst = std::max(worst, std::abs(run.losses[s] - ref.losses[s]) / std::abs(ref.losses[s]));
  }
  const double loss_err = worst;
  auto rows = [&](const std::string& fqn, const at::Tensor& t) {
    auto it = padded.find(fqn);
    return it == padded.end() ? t : t.narrow(0, 0, it->second);
  };
  double grad_err = 0, param_err = 0;
  for (const auto& [fqn, g] : ref.grads) {
    grad_err =
        std::max(grad_err, max_relative_error(rows(fqn, run.grads.at(fqn)), rows(fqn, g), 1e-8));
  }
  // Parameters: the max-norm of the difference over the whole model, relative to the model's
  // max-norm. (Per element it would be meaningless for tensors that are 0 in exact arithmetic:
  // k_proj.bias gets a zero gradient, and AdamW turns its rounding noise into ~1e-11 updates.)
  double scale = 0, diff = 0;
  std::string worst_param;
  for (const auto& [fqn, p] : ref.params) {
    const at::Tensor a = rows(fqn, run.params.at(fqn)), r = rows(fqn, p);
    scale = std::max(scale, r.abs().max().item<double>());
    const double d = (a - r).abs().max().item<double>();
    if (d > diff) worst_param = fqn;
    diff = std::max(diff, d);
  }
  param_err = diff / std::max(scale, 1e-30);
  if (param_err > kTol) std::printf("  worst parameter: %s\n", worst_param.c_str());
  std::printf("%-40s loss %.2g  grads %.2g  params after %zu AdamW steps %.2g (relative)\n",
              label.c_str(), loss_err, grad_err, ref.losses.size(), param_err);
  EXPECT_LE(loss_err, kTol) << label;
  EXPECT_LE(grad_err, kTol) << label;
  EXPECT_LE(param_err, kTol) << label;
  return std::max({loss_err, grad_err, param_err});
}

// ---------------------------------------------------------------------------------------------
// MLP
// ---------------------------------------------------------------------------------------------

ModelFactory mlp_factory() {
  return [](int64_t) { return std::make_shared<models::MLP>(models::MLPConfig{12, 32, 6, 2}); };
}

LossFn mlp_loss() {
  return [](Module& model, const DeviceMesh& mesh, int step) {
    const Placements r(mesh.ndim(), Placement::replicate());
    DTensor x = distribute_tensor(pattern({10, 12}, 0.1 * step), mesh, r);
    DTensor target = distribute_tensor(pattern({10, 6}, 1.0 + step), mesh, r);
    DTensor d = ops::sub(model(x), target);
    return ops::mean(ops::mul(d, d));
  };
}

TEST(Parallelize, MlpSeedPlanMatchesSingleDevice) {
  const RunResult ref = train(MeshSpec{{1}, {"tp"}}, "", mlp_factory(), mlp_loss(), 5);
  for (const char* plan : {"mlp/tp", "mlp/tp-sp"}) {
    for (int tp : {2, 4}) {
      compare(train(MeshSpec{{tp}, {"tp"}}, plan, mlp_factory(), mlp_loss(), 5), ref,
              fmt::format("{} tp={}", plan, tp));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// GPT
// ---------------------------------------------------------------------------------------------

models::GPTConfig tiny_gpt(int64_t n_layer = 2) {
  models::GPTConfig c;
  c.vocab_size = 67;  // no TP degree divides it
  c.block_size = 8;
  c.n_layer = n_layer;
  c.n_head = 4;
  c.n_embd = 16;
  c.vocab_multiple = 1;
  return c;
}

ModelFactory gpt_factory(models::GPTConfig config) {
  return [config](int64_t tp) { return std::make_shared<models::GPT>(config, tp); };
}

LossFn gpt_loss(int64_t vocab) {
  return [vocab](Module& model, const DeviceMesh& mesh, int step) {
    const Placements r(mesh.ndim(), Placement::replicate());
    at::Tensor tokens = (at::arange(2 * 9, at::kLong) * 7 + 3 * step) % vocab;
    tokens = tokens.view({2, 9});
    DTensor idx = distribute_tensor(tokens.narrow(1, 0, 8).contiguous(), mesh, r);
    DTensor targets = distribute_tensor(tokens.narrow(1, 1, 8).contiguous(), mesh, r);
    return model({idx, targets}).at(0);
  };
}

TEST(Parallelize, GptZooPlansMatchSingleDevice) {
  const auto config = tiny_gpt();
  const RunResult ref =
      train(MeshSpec{{1}, {"tp"}}, "", gpt_factory(config), gpt_loss(config.vocab_size), 5);
  const std::map<std::string, int64_t> padded{{"transformer.wte.weight", config.vocab_size}};
  for (const char* plan : {"gpt/megatron-tp", "gpt/megatron-sp"}) {
    for (int tp : {2, 4}) {
      compare(
          train(MeshSpec{{tp}, {"tp"}}, plan, gpt_factory(config), gpt_loss(config.vocab_size), 5),
          ref, fmt::format("{} tp={} vocab 67->{}", plan, tp, config.padded_vocab(tp)), padded);
    }
  }
  compare(train(MeshSpec::parse("tp_a=2,tp_b=2"), "gpt/megatron-tp-2d", gpt_factory(config),
                gpt_loss(config.vocab_size), 5),
          ref, "gpt/megatron-tp-2d tp_a=2 x tp_b=2", padded);
  compare(train(MeshSpec{{2}, {"tp"}}, "gpt/dp-only", gpt_factory(config),
                gpt_loss(config.vocab_size), 5),
          ref, "gpt/dp-only tp=2", padded);
}

TEST(Parallelize, DeferredInitIsBitwiseAndLocal) {
  models::GPTConfig config = tiny_gpt();
  config.vocab_size = 256;
  config.n_embd = 64;
  config.vocab_multiple = 64;
  const RunResult whole = train(MeshSpec{{1}, {"tp"}}, "", gpt_factory(config), gpt_loss(256), 0);
  const RunResult tp4 =
      train(MeshSpec{{4}, {"tp"}}, "gpt/megatron-tp", gpt_factory(config), gpt_loss(256), 0);
  for (const auto& [fqn, value] : whole.init) {
    EXPECT_TRUE(at::equal(tp4.init.at(fqn), value))
        << fqn << " differs from the single-device init";
  }
  const double ratio = double(tp4.init_peak) / double(whole.init_peak);
  std::printf(
      "deferred init peak: whole %lld bytes, tp=4 rank 0 %lld bytes, ratio %.3f (parameters %lld "
      "vs %lld)\n",
      static_cast<long long>(whole.init_peak), static_cast<long long>(tp4.init_peak), ratio,
      static_cast<long long>(whole.param_bytes), static_cast<long long>(tp4.param_bytes));
  EXPECT_LT(ratio, 0.32);
}

TEST(Parallelize, GptStepCommunicationIsMegatronVolume) {
  // One block's bytes = the 2-layer step minus the 1-layer step.
  const int64_t b = 2, s = 8, h = 16, elem = 8;
  for (const char* plan : {"gpt/megatron-tp", "gpt/megatron-sp"}) {
    for (int tp : {2, 4}) {
      const auto one =
          train(MeshSpec{{tp}, {"tp"}}, plan, gpt_factory(tiny_gpt(1)), gpt_loss(67), 1);
      const auto two =
          train(MeshSpec{{tp}, {"tp"}}, plan, gpt_factory(tiny_gpt(2)), gpt_loss(67), 1);
      const int64_t block = two.tp_bytes_step0 - one.tp_bytes_step0;
      // Megatron: 2 all-reduces of b*s*h forward and 2 backward; an all-reduce moves 2(n-1)/n of it
      // (under SP: an all-gather plus a reduce-scatter, the same bytes).
      const int64_t analytic = 4 * (2 * (tp - 1) * b * s * h * elem / tp);
      // Under SP the block's two LayerNorms (4h parameters) have partial gradients: one all-reduce.
      const bool sp = std::string(plan).find("-sp") != std::string::npos;
      const int64_t ln_sync = sp ? 2 * (tp - 1) * 4 * h * elem / tp : 0;
      std::printf(
          "%s tp=%d: one block's step moves %lld bytes per rank = activations %lld (Megatron "
          "analytic %lld) "
          "+ LayerNorm grad sync %lld\n",
          plan, tp, static_cast<long long>(block), static_cast<long long>(block - ln_sync),
          static_cast<long long>(analytic), static_cast<long long>(ln_sync));
      EXPECT_EQ(block - ln_sync, analytic) << plan << " tp=" << tp;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Patches and plug-ins
// ---------------------------------------------------------------------------------------------

struct CountingAttention : models::CausalSelfAttention {
  using CausalSelfAttention::CausalSelfAttention;
  static inline std::atomic<int> calls{0};

 protected:
  Tensors forward(const Tensors& inputs) override {
    ++calls;
    return CausalSelfAttention::forward(inputs);
  }
};

TEST(Parallelize, PluginModuleTypeAndForwardPatch) {
  register_module_type("CountingAttention", [](const ModuleArgs& a) {
    return std::make_shared<CountingAttention>(a.integer("n_embd"), a.integer("n_head"),
                                               a.integer("n_layer"),
                                               a.object<models::DropoutState>("dropout"));
  });
  models::GPTConfig config = tiny_gpt();
  const RunResult ref = train(MeshSpec{{1}, {"tp"}}, "", gpt_factory(config), gpt_loss(67), 1);
  config.attention_type = "CountingAttention";
  CountingAttention::calls = 0;
  const RunResult plugged =
      train(MeshSpec{{2}, {"tp"}}, "gpt/megatron-tp", gpt_factory(config), gpt_loss(67), 1);
  EXPECT_EQ(CountingAttention::calls.load(), 2 * 2);  // 2 ranks x 2 layers
  compare(plugged, ref, "plug-in attention tp=2", {{"transformer.wte.weight", 67}});

  // A patch by FQN pattern replaces the MLP forward of every block with an equivalent one.
  std::atomic<int> patched_calls{0};
  run_ranks(2, [&](const comm::Group& group) {
    DeviceMesh mesh(group, MeshSpec{{2}, {"tp"}});
    auto model = std::make_shared<models::GPT>(tiny_gpt(), 2);
    ParallelizeOptions options;
    options.dtype = at::kDouble;
    options.seed = 1234;
    options.patches.push_back(
        {"transformer.h.*.mlp", "", [&](Module& self, const Tensors& in) -> Tensors {
           ++patched_calls;
           DTensor hidden = ops::gelu(self.child("c_fc")(in.at(0)));
           return {self.child("dropout")(self.child("c_proj")(hidden))};
         }});
    auto pm = parallelize_module(model, mesh, Plan::load("gpt/megatron-tp"), options);
    DTensor loss = gpt_loss(67)(pm->module(), mesh, 0);
    EXPECT_NEAR(loss.to_local().item<double>(), ref.losses[0], 1e-12);
  });
  EXPECT_EQ(patched_calls.load(), 2 * 2);
  EXPECT_THROW(create_module("NoSuchAttention", {}), UserError);
}

// ---------------------------------------------------------------------------------------------
// Plans: parsing and validation
// ---------------------------------------------------------------------------------------------

TEST(Plan, JsonAndTomlReadTheSame) {
  const Plan json = Plan::parse_json(R"J({"model": "mlp", "description": "d",
      "parameter": {"fc1.weight": ["S(0)"], "fc2.*": ["S(1)"]}, "forward": {"fc1.input": [["R"]]}})J",
                                     "a.json");
  const Plan toml = Plan::parse_toml(R"J(model = "mlp"
description = "d"
[parameter]
"fc1.weight" = ["S(0)"]
"fc2.*" = ["S(1)"]
[forward]
"fc1.input" = [["R"]]
)J",
                                     "a.toml");
  for (const Plan* p : {&json, &toml}) {
    ASSERT_EQ(p->parameter.size(), 2u);
    EXPECT_EQ(p->parameter[0].key, "fc1.weight");
    EXPECT_EQ(p->parameter[1].key, "fc2.*");
    EXPECT_EQ(p->parameter[1].placements[0], Placement::shard(1));
    ASSERT_EQ(p->forward.size(), 1u);
    EXPECT_EQ(p->forward[0].module, "fc1");
    EXPECT_TRUE(p->forward[0].input);
  }
  EXPECT_EQ(toml.parameter[1].line, 5);
  for (const auto& name : plan_zoo_names()) {
    const Plan p = Plan::load(name);
    EXPECT_FALSE(p.description.empty()) << name;
  }
  EXPECT_GE(plan_zoo_names().size(), 5u);
}

TEST(Plan, ErrorsNameFileKeyAndParameter) {
  run_ranks(2, [](const comm::Group& group) {
    DeviceMesh mesh(group, MeshSpec{{2}, {"tp"}});
    auto gpt = std::make_shared<models::GPT>(tiny_gpt(), 2);
    auto resolve = [&](const std::string& json) {
      return error_of([&] { resolve_plan(Plan::parse_json(json, "my-plan.json"), *gpt, mesh); });
    };
    // A misspelled top-level key.
    EXPECT_NE(error_of([] {
                Plan::parse_json(R"J({"paramter": {}})J", "my-plan.json");
              }).find("plan my-plan.json: unknown key 'paramter' (did you mean 'parameter'?)"),
              std::string::npos);
    // A misspelled parameter key, with the near match.
    const std::string typo =
        resolve(R"J({"parameter": {"transformer.h.*.attn.qproj.weight": ["S(0)"]}})J");
    EXPECT_NE(typo.find("key 'transformer.h.*.attn.qproj.weight' matches no parameter of gpt "
                        "(did you mean 'transformer.h.*.attn.q_proj.weight'?)"),
              std::string::npos)
        << typo;
    // A shard dim that does not fit.
    const std::string dim =
        resolve(R"J({"parameter": {"transformer.h.*.attn.c_proj.bias": ["S(1)"]}})J");
    EXPECT_NE(
        dim.find("S(1) does not fit parameter transformer.h.0.attn.c_proj.bias of shape [16]"),
        std::string::npos)
        << dim;
    // Placements for the wrong mesh.
    EXPECT_NE(resolve(R"J({"parameter": {"lm_head.weight": ["S(0)", "R"]}})J").find("the mesh"),
              std::string::npos);
    // A forward key for no module; a plan for another model.
    EXPECT_NE(
        resolve(R"J({"forward": {"transformer.h.*.atn.input": [["R"]]}})J").find("did you mean"),
        std::string::npos);
    EXPECT_NE(resolve(R"J({"model": "mlp"})J").find("written for model 'mlp'"), std::string::npos);
    // Overrides warn.
    const ResolvedPlan r = resolve_plan(
        Plan::parse_json(
            R"J({"parameter": {"**.weight": ["S(0)"], "transformer.ln_f.weight": ["R"]}})J",
            "o.json"),
        *gpt, mesh);
    EXPECT_TRUE(std::any_of(r.warnings.begin(), r.warnings.end(), [](const std::string& w) {
      return w.find("key 'transformer.ln_f.weight' overrides key '**.weight'") != std::string::npos;
    }));
  });
  EXPECT_NE(error_of([] { Plan::load("gpt/megatron-spp"); }).find("did you mean 'gpt/megatron-sp'"),
            std::string::npos);
}

TEST(Plan, GlobMatching) {
  EXPECT_TRUE(
      fqn_matches("transformer.h.*.attn.q_proj.weight", "transformer.h.11.attn.q_proj.weight"));
  EXPECT_FALSE(fqn_matches("transformer.h.*.weight", "transformer.h.1.attn.weight"));
  EXPECT_TRUE(fqn_matches("**.weight", "transformer.h.1.attn.weight"));
  EXPECT_TRUE(fqn_matches("**", "lm_head.weight"));
  EXPECT_TRUE(fqn_matches("transformer.**.bias", "transformer.ln_f.bias"));
  EXPECT_FALSE(fqn_matches("transformer.**.bias", "lm_head.weight"));
}

TEST(Parallelize, DumpListsEveryParameterAndHook) {
  auto gpt = std::make_shared<models::GPT>(tiny_gpt(), 4);
  DeviceMesh mesh = DeviceMesh::layout(MeshSpec{{4}, {"tp"}}, 0);
  const ResolvedPlan r = resolve_plan(Plan::load("gpt/megatron-sp"), *gpt, mesh);
  EXPECT_EQ(r.parameters.size(), gpt->named_parameters().size());
  EXPECT_EQ(r.hooks.size(), 2u + 4u * 2u);  // wte and ln_f outputs, 4 hooks per block
}

TEST(Parallelize, LoraFactorsFollowTheirWeights) {
  // NOTE [LoRA placements]: column-parallel q_proj (S(0)): B S(0), A whole; row-parallel c_proj
  // (S(1)): A S(1), B whole; a plan key that matches a factor is overridden.
  auto gpt = std::make_shared<models::GPT>(tiny_gpt(), 4);
  LoraSpec lora{2, 4.0, 0.0, {"q", "o"}, {1}};
  ModelSpec with_lora;
  with_lora.lora = lora;
  gpt->add_adapters(with_lora, {{"q", {"attn.q_proj"}}, {"o", {"attn.c_proj"}}});
  DeviceMesh mesh = DeviceMesh::layout(MeshSpec{{4}, {"tp"}}, 0);
  const ResolvedPlan r = resolve_plan(Plan::load("gpt/megatron-sp"), *gpt, mesh);
  std::map<std::string, std::string> placed;
  for (const auto& p : r.parameters)
    placed[p.fqn] = placements_str(p.placements);
  EXPECT_EQ(placed.at("transformer.h.1.attn.q_proj.lora_A.weight"), "[R]");
  EXPECT_EQ(placed.at("transformer.h.1.attn.q_proj.lora_B.weight"), "[S(0)]");
  EXPECT_EQ(placed.at("transformer.h.1.attn.c_proj.lora_A.weight"), "[S(1)]");
  EXPECT_EQ(placed.at("transformer.h.1.attn.c_proj.lora_B.weight"), "[R]");
  EXPECT_EQ(placed.count("transformer.h.0.attn.q_proj.lora_A.weight"), 0u);  // lora.layers = [1]
  // Only the factors train.
  for (const auto& [fqn, p] : gpt->named_parameters())
    EXPECT_EQ(p->trainable, fqn.find(".lora_") != std::string::npos) << fqn;
}

}  // namespace
}  // namespace vescale
