#include "config/job_config.h"

#include "config/config_schema.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <type_traits>

#include "core/error.h"
#include "train/preflight.h"

namespace vescale {
namespace {

std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  try {
    JobConfig::parse(text, "job.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JobConfig, DefaultsFileAndOverrides) {
  const JobConfig c = JobConfig::parse("[training]\nsteps = 7\n[parallel]\ntp = 2\n", "job.toml",
                                       {"training.seed=5", "parallel.plan=gpt/megatron-sp",
                                        "optimizer.lr=1e-2", "job.name=\"quoted\""});
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.seed, 5);
  EXPECT_EQ(c.plan, "gpt/megatron-sp");
  EXPECT_DOUBLE_EQ(c.lr, 1e-2);
  EXPECT_EQ(c.name, "quoted");
  EXPECT_EQ(c.global_batch_size, 8);  // default
  EXPECT_FALSE(c.checkpoint_async);   // default
  EXPECT_TRUE(JobConfig::parse("[checkpoint]\nasync = true\n", "j").checkpoint_async);
  EXPECT_EQ(c.world_size(), 2);
  EXPECT_NE(c.text.find("[training]\nsteps = 7"), std::string::npos) << c.text;
  // A float key accepts an integer.
  EXPECT_DOUBLE_EQ(JobConfig::parse("[optimizer]\nlr = 1\n", "j").lr, 1.0);
  EXPECT_EQ(collect_overrides({"--a.b=1", "--c.d", "2"}),
            (std::vector<std::string>{"a.b=1", "c.d=2"}));
}

TEST(JobConfig, ErrorsNameFileLineAndKey) {
  EXPECT_NE(error_of("[training]\nstpes = 3\n")
                .find("config job.toml:2: unknown key 'training.stpes' (did you mean "
                      "'training.steps'?)"),
            std::string::npos);
  EXPECT_NE(error_of("[training]\nsteps = 1.5\n")
                .find("config job.toml:2: key 'training.steps' must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of("", {"model.nme=gpt"}).find("(did you mean 'model.name'?)"),
            std::string::npos);
  EXPECT_NE(
      error_of("[model]\nname = \"bert\"\n").find("model.name = \"bert\" is not one of gpt, mlp"),
      std::string::npos);
  EXPECT_NE(error_of("[parallel]\npp_schedule = \"1f1f\"\n")
                .find("parallel.pp_schedule = \"1f1f\" is not one of gpipe, 1f1b"),
            std::string::npos);
  EXPECT_NE(error_of("[parallel]\npp_split = [\"a\", 2]\n")
                .find("key 'parallel.pp_split' must be a string or a list of strings"),
            std::string::npos);
  EXPECT_NE(error_of("[training]\nseq_len = 128\n").find("longer than model.block_size = 64"),
            std::string::npos);
  EXPECT_NE(error_of("[data]\nsource = \"text\"\n").find("needs data.path"), std::string::npos);
  EXPECT_NE(error_of("steps = 3\n").find("must be a [section]"), std::string::npos);
  EXPECT_NE(error_of("", {"checkpoint.async=yes"})
                .find("override --checkpoint.async=yes: key 'checkpoint.async' must be true or "
                      "false"),
            std::string::npos);
}

TEST(JobConfig, ExpertRanksAreCarvedFromDpThenCp) {
  // NOTE [Expert parallelism]: gcd(ep, dp) of ep's ranks from dp, the rest from cp.
  const std::string moe = "[model]\nname = \"mixtral\"\n[training]\nglobal_batch_size = 12\n";
  auto mesh = [&](std::vector<std::string> overrides) {
    const MeshDims dims = JobConfig::parse(moe, "job.toml", std::move(overrides)).mesh_dims();
    return dim_names_text(dims) + " = " + dim_sizes_text(dims);
  };
  EXPECT_EQ(mesh({"parallel.dp=4", "parallel.ep=2"}), "pp x dp x ep x tp = 1 x 2 x 2 x 1");
  EXPECT_EQ(mesh({"parallel.cp=2", "parallel.ep=2"}), "pp x dp x cp_ep x tp = 1 x 1 x 2 x 1");
  EXPECT_EQ(mesh({"parallel.dp=2", "parallel.cp=4", "parallel.ep=4"}),
            "pp x dp x ep x cp x cp_ep x tp = 1 x 1 x 2 x 2 x 2 x 1");
  EXPECT_EQ(mesh({"parallel.dp=3", "parallel.cp=2", "parallel.ep=2"}),
            "pp x dp x cp_ep x tp = 1 x 3 x 2 x 1");
  EXPECT_NE(error_of(moe, {"parallel.dp=3", "parallel.cp=2", "parallel.ep=4"})
                .find("config job.toml: parallel.ep = 4 is carved from the data ranks and must "
                      "divide parallel.dp x parallel.cp = 3 x 2"),
            std::string::npos);
}

TEST(JobConfig, DpAutoIsTheWorldOverTheOtherDims) {
  // NOTE [Elastic training]: dp = world / (pp x cp x tp); the global batch stays.
  const std::string text = "[parallel]\ndp = \"auto\"\ntp = 2\n";
  const JobConfig c = JobConfig::parse(text, "job.toml", {}, 8);
  EXPECT_TRUE(c.dp_auto);
  EXPECT_EQ(c.dp, 4);
  EXPECT_EQ(c.world_size(), 8);
  EXPECT_EQ(c.micro_batch_size(), 2);
  const JobConfig two = JobConfig::parse("", "job.toml", {"parallel.dp=auto", "parallel.tp=2"}, 4);
  EXPECT_EQ(two.dp, 2);
  EXPECT_TRUE(two.dp_auto);
  EXPECT_FALSE(JobConfig::parse("", "job.toml", {"parallel.dp=2"}, 4).dp_auto);
  // A later value replaces "auto", and "auto" a number.
  EXPECT_EQ(JobConfig::parse(text, "job.toml", {"parallel.dp=1"}, 8).dp, 1);
  EXPECT_EQ(JobConfig::parse("[parallel]\ndp = 3\n", "j", {"parallel.dp=\"auto\""}, 2).dp, 2);
  auto error = [](const std::string& t, std::vector<std::string> o, int64_t world) {
    try {
      JobConfig::parse(t, "job.toml", std::move(o), world);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error(text, {}, 0)
                .find("config job.toml:2: parallel.dp = \"auto\" takes dp from the "
                      "number of ranks: start the job under a launcher"),
            std::string::npos);
  EXPECT_NE(error(text, {}, 5)
                .find("config job.toml:2: parallel.dp = \"auto\" on 5 ranks: 5 is "
                      "not a multiple of parallel.pp x cp x tp = 1 x 1 x 2"),
            std::string::npos);
  EXPECT_NE(error("", {"parallel.dp=auto"}, 3)
                .find("training.global_batch_size = 8 is not divisible by parallel.dp x "
                      "parallel.microbatches = 3 x 1"),
            std::string::npos);
  EXPECT_NE(error("", {"parallel.tp=auto"}, 3).find("key 'parallel.tp' must be an integer"),
            std::string::npos);
}

TEST(JobConfig, PipelineKeysAndStringLists) {
  // The config reads pp > 1 (train refuses it until the executor lands; plan schedule reads it).
  const JobConfig defaults = JobConfig::parse("[parallel]\npp = 2\n", "job.toml");
  EXPECT_EQ(defaults.pp, 2);
  EXPECT_EQ(defaults.pp_schedule, PpSchedule::k1F1B);
  EXPECT_EQ(defaults.pp_virtual, 1);
  EXPECT_EQ(defaults.pp_split, std::vector<std::string>{"balanced"});
  EXPECT_NE(defaults.text.find("pp_split = 'balanced'\n"), std::string::npos) << defaults.text;

  const std::vector<std::string> two{"transformer.h.2", "head"};
  const JobConfig file = JobConfig::parse(
      "[parallel]\npp_split = [\"transformer.h.2\", \"head\"]\npp_virtual = 2\n", "job.toml");
  EXPECT_EQ(file.pp_split, two);
  EXPECT_EQ(file.pp_virtual, 2);
  // The effective text reads back to the same value.
  EXPECT_NE(file.text.find("pp_split = ['transformer.h.2', 'head']\n"), std::string::npos)
      << file.text;
  EXPECT_EQ(JobConfig::parse(file.text, "again").pp_split, two);
  // On the command line: an array, a quoted string, a bare word.
  EXPECT_EQ(
      JobConfig::parse("", "j", {"parallel.pp_split=[\"transformer.h.2\", \"head\"]"}).pp_split,
      two);
  EXPECT_EQ(JobConfig::parse("", "j", {"parallel.pp_split=\"transformer.h.1\""}).pp_split,
            std::vector<std::string>{"transformer.h.1"});
  EXPECT_EQ(JobConfig::parse("", "j", {"parallel.pp_split=balanced"}).pp_split,
            std::vector<std::string>{"balanced"});
  EXPECT_EQ(JobConfig::parse("", "j", {"parallel.pp_split=[]"}).pp_split,
            std::vector<std::string>{});
  EXPECT_EQ(JobConfig::parse("", "j", {"parallel.pp_schedule=zbv"}).pp_schedule, PpSchedule::kZbv);
}

TEST(JobConfig, TrainingDeviceAndBackend) {
  const JobConfig defaults = JobConfig::parse("", "job.toml");
  EXPECT_EQ(defaults.device, DeviceSetting::kAuto);
  EXPECT_EQ(defaults.backend, comm::Backend::kAuto);
  EXPECT_NE(defaults.text.find("[training]\n"), std::string::npos);
  EXPECT_NE(defaults.text.find("device = 'auto'\n"), std::string::npos) << defaults.text;
  EXPECT_EQ(JobConfig::parse("[training]\ndevice = \"cpu\"\n", "job.toml").device,
            DeviceSetting::kCpu);
  EXPECT_EQ(JobConfig::parse("", "job.toml", {"training.device=cuda"}).device,
            DeviceSetting::kCuda);
  const JobConfig gpu = JobConfig::parse(
      "[training]\ndevice = \"cuda\"\n[comm]\nbackend = "
      "\"nccl\"\n",
      "job.toml");
  EXPECT_EQ(gpu.device, DeviceSetting::kCuda);
  EXPECT_EQ(gpu.backend, comm::Backend::kNccl);

  EXPECT_NE(error_of("[training]\ndevice = \"gpu\"\n")
                .find("config job.toml: training.device = \"gpu\" is not one of auto, cpu, cuda"),
            std::string::npos);
  EXPECT_NE(error_of("[training]\ndevice = 0\n")
                .find("config job.toml:2: key 'training.device' must be a string"),
            std::string::npos);
  EXPECT_NE(error_of("", {"training.device=cuda:1"}).find("is not one of auto, cpu, cuda"),
            std::string::npos);
  EXPECT_NE(error_of("[training]\ndevice = \"cpu\"\n[comm]\nbackend = \"nccl\"\n")
                .find("comm.backend = \"nccl\" moves CUDA tensors, but training.device = \"cpu\""),
            std::string::npos);
  // NOTE [Muon]: its keys, each refused in one line naming it.
  EXPECT_NE(error_of("", {"optimizer.name=\"muon\"", "optimizer.ns_steps=0"})
                .find("optimizer.ns_steps = 0 must be in [1, 100]"),
            std::string::npos);
  EXPECT_NE(error_of("", {"optimizer.name=\"muon\"", "optimizer.momentum=1"})
                .find("optimizer.momentum = 1 must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of("", {"optimizer.momentum=nan"})
                .find("key 'optimizer.momentum' must be a finite number, got nan"),
            std::string::npos);
  EXPECT_NE(error_of("", {"optimizer.name=\"muon\"", "optimizer.muon_scale=\"rms\""})
                .find("optimizer.muon_scale = \"rms\" is not one of adamw_rms, shape"),
            std::string::npos);
  EXPECT_EQ(error_of("", {"optimizer.name=\"muon\"",
                          "optimizer.adamw_params=[\"embedding\", \"norms\", \"bias\"]"}),
            "config job.toml: optimizer.adamw_params names \"norms\", not a role of embedding, "
            "lm_head, norm, bias or router (did you mean 'norm'?)");
  EXPECT_EQ(error_of("", {"optimizer.name=\"muon\"",
                          "optimizer.adamw_params=[\"norm\", \"bias\", \"norm\"]"}),
            "config job.toml: optimizer.adamw_params names \"norm\" twice");
  EXPECT_EQ(error_of("", {"optimizer.name=\"muon\"", "optimizer.adamw_params=[\"norm\"]"}),
            "config job.toml: optimizer.adamw_params = [\"norm\"] leaves out \"bias\": Muon "
            "orthogonalizes matrices, and norms and biases are vectors; keep it");
  EXPECT_NE(error_of("", {"optimizer.name=\"muon\"",
                          "optimizer.adamw_params=[\"hidden\", \"norm\", \"bias\"]"})
                .find("names \"hidden\", not a role of"),
            std::string::npos);
  // optimizer.momentum is SGD's 0.9 and Muon's 0.95 unless set.
  EXPECT_DOUBLE_EQ(JobConfig::parse("", "job.toml", {"optimizer.name=\"sgd\""}).momentum, 0.9);
  EXPECT_DOUBLE_EQ(JobConfig::parse("", "job.toml", {"optimizer.name=\"muon\""}).momentum, 0.95);
  EXPECT_DOUBLE_EQ(
      JobConfig::parse("", "job.toml", {"optimizer.name=\"muon\"", "optimizer.momentum=0.9"})
          .momentum,
      0.9);
  // Gloo takes CUDA tensors through host memory (NOTE [Gloo with CUDA tensors]).
  EXPECT_EQ(error_of("", {"training.device=cuda", "comm.backend=gloo"}), "(no error)");
}

// NOTE [Ranks sharing a GPU]: GPU code no GPU has run, so only with training.unverified_kernels.
TEST(JobConfig, RanksShareAGpuOnlyOptedIn) {
  const JobConfig cuda = JobConfig::parse("", "job.toml", {"training.device=\"cuda\""});
  EXPECT_FALSE(check_gpu_sharing(cuda, 2, 2));
  try {
    check_gpu_sharing(cuda, 4, 1);
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "config job.toml: 4 local ranks would share 1 GPU(s) over Gloo with CUDA tensors, a "
              "path no GPU has run yet (NOTE [GPU-verified]): set training.unverified_kernels = "
              "true to take it, or start at most 1 ranks a node");
  }
  const JobConfig opted = JobConfig::parse(
      "", "job.toml", {"training.device=\"cuda\"", "training.unverified_kernels=true"});
  EXPECT_TRUE(check_gpu_sharing(opted, 4, 1));
}

bool same_field(const JobConfig& a, const JobConfig& b, const ConfigKey& key) {
  return config_value(a, key) == config_value(b, key);
}

/// A command-line value other than `v`, of its type.
std::string changed_value(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return std::to_string(std::get<int64_t>(v) + 1);
    case 1:
      return fmt::format("{}", std::get<double>(v) + 0.25);
    case 2:
      return std::get<bool>(v) ? "false" : "true";
    case 5:
      return "[1, 1]";
    default:
      return "changed";
  }
}

TEST(JobConfig, EveryKeyFillsItsOwnField) {
  const JobConfig defaults = JobConfig::parse("", "j");
  const auto& schema = config_schema();
  for (size_t i = 0; i < schema.size(); ++i) {
    EXPECT_EQ(config_value(defaults, schema[i]), schema[i].default_value) << schema[i].name;
    for (size_t j = 0; j < i; ++j)
      EXPECT_FALSE(schema[i].field == schema[j].field) << schema[i].name << " " << schema[j].name;
  }
  // Each key set away from its default changes its own field and no other (keys whose rules
  // reject the changed value are skipped), but optimizer.name = "muon" Muon's momentum.
  size_t checked = 0;
  for (const auto& k : schema) {
    JobConfig c;
    try {
      // An enumerated key takes another of its names.
      const std::vector<std::string> names = k.choices();
      const std::string changed = names.empty() ? changed_value(k.default_value)
                                  : names.front() == std::get<std::string>(k.default_value)
                                      ? names.back()
                                      : names.front();
      c = JobConfig::parse("", "j", {k.name + "=" + changed});
    } catch (const UserError&) {
      continue;
    }
    ++checked;
    // The one default that follows another key: Muon's momentum (NOTE [Muon]).
    for (const auto& other : schema) {
      const bool follows = k.name == "optimizer.name" && other.name == "optimizer.momentum";
      EXPECT_EQ(same_field(c, defaults, other), other.name != k.name && !follows) << k.name;
    }
  }
  EXPECT_GE(checked, 40u);
}

TEST(JobConfig, NumbersOutsideTheirRangeAreErrors) {
  // Every default is in its own range, and each bound is where the docs say.
  for (const auto& k : config_schema()) {
    if (!k.range) continue;
    const double value = std::holds_alternative<int64_t>(k.default_value)
                             ? static_cast<double>(std::get<int64_t>(k.default_value))
                             : std::get<double>(k.default_value);
    EXPECT_TRUE(k.range->contains(value)) << k.name << " default " << value;
  }
  EXPECT_NE(error_of("[optimizer]\nbeta2 = 2.0\n")
                .find("config job.toml:2: optimizer.beta2 = 2 must be in [0, 1) (AdamW beta2)"),
            std::string::npos)
      << error_of("[optimizer]\nbeta2 = 2.0\n");
  EXPECT_NE(error_of("", {"optimizer.eps=0"}).find("optimizer.eps = 0 must be > 0"),
            std::string::npos);
  EXPECT_NE(error_of("[eval]\nwindows = 0\n").find("eval.windows = 0 must be >= 1"),
            std::string::npos);
  EXPECT_NE(error_of("[parallel]\ntp = 0\n").find("parallel.tp = 0 must be in [1, 65536]"),
            std::string::npos);
  EXPECT_NE(error_of("[parallel]\ndp = 65536\ntp = 65536\n").find("more than 1048576"),
            std::string::npos);
  EXPECT_EQ(error_of("[optimizer]\nbeta1 = 0.0\neps = 1e-30\n[training]\ngrad_clip = 0.0\n"),
            "(no error)");
}

}  // namespace
}  // namespace vescale
