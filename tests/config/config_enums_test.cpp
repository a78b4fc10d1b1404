// The enumerated config keys (config/config_enums.h): each parses once into its enum, gives back
// its name wherever the config is printed or saved, and a name its table lacks is a one-line
// error naming the key, the choices and the nearest one.
#include "config/config_enums.h"

#include <gtest/gtest.h>

#include <set>

#include "config/config_schema.h"
#include "config/job_config.h"
#include "core/error.h"
#include "parallel/pipeline/schedule.h"

namespace vescale {
namespace {

std::string parse_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    JobConfig::parse(text, "job.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigEnums, AKeyParsesIntoItsEnum) {
  const JobConfig c = JobConfig::parse(
      "[training]\nactivation_checkpoint = \"selective\"\ndtype = \"bfloat16\"\n"
      "[lr_scheduler]\ndecay = \"constant\"\n",
      "job.toml", {"optimizer.name=sgd", "parallel.pp_schedule=zb-h1", "checkpoint.format=merged"});
  EXPECT_EQ(c.activation_checkpoint, Recompute::kSelective);
  EXPECT_EQ(c.dtype, c10::kBFloat16);
  EXPECT_EQ(c.decay, LrDecay::kConstant);
  EXPECT_EQ(c.optimizer, OptimizerKind::kSgd);
  EXPECT_EQ(c.pp_schedule, PpSchedule::kZbH1);
  EXPECT_EQ(c.checkpoint_format, CheckpointFormat::kMerged);
  const JobConfig defaults = JobConfig::parse("", "job.toml");
  EXPECT_EQ(defaults.data_source, DataSource::kSynthetic);
  EXPECT_EQ(defaults.on_nonfinite, OnNonfinite::kStop);
  EXPECT_EQ(defaults.device, DeviceSetting::kAuto);
  EXPECT_EQ(defaults.backend, comm::Backend::kAuto);
  // The effective text (what checkpoints and logs keep) still says the names.
  EXPECT_NE(c.text.find("activation_checkpoint = 'selective'\n"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("pp_schedule = 'zb-h1'\n"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("dtype = 'bfloat16'\n"), std::string::npos) << c.text;
}

TEST(ConfigEnums, AnUnknownNameIsOneLineWithTheChoicesAndTheNearest) {
  EXPECT_EQ(parse_error("[lr_scheduler]\ndecay = \"cosin\"\n"),
            "config job.toml: lr_scheduler.decay = \"cosin\" is not one of cosine, constant (did "
            "you mean 'cosine'?)");
  EXPECT_EQ(parse_error("", {"optimizer.name=adam"}),
            "config job.toml: optimizer.name = \"adam\" is not one of adamw, sgd, muon (did you "
            "mean 'adamw'?)");
  EXPECT_EQ(parse_error("", {"training.activation_checkpoint=ful"}),
            "config job.toml: training.activation_checkpoint = \"ful\" is not one of none, full, "
            "selective (did you mean 'full'?)");
  const std::string far = parse_error("[data]\nsource = \"parquet\"\n");
  EXPECT_EQ(far,
            "config job.toml: data.source = \"parquet\" is not one of synthetic, text, tokens");
  EXPECT_EQ(far.find('\n'), std::string::npos);
  // Not a string at all: the type error at its line, as for any key.
  EXPECT_NE(parse_error("[training]\ndtype = 32\n")
                .find("config job.toml:2: key 'training.dtype' must be a string"),
            std::string::npos);
}

TEST(ConfigEnums, EveryEnumeratedKeyRoundTripsEachName) {
  size_t keys = 0;
  for (const ConfigKey& k : config_schema()) {
    const std::vector<std::string> names = k.choices();
    if (names.empty()) continue;
    ++keys;
    // The help (and so the config reference) lists every choice; the default is one.
    for (const std::string& name : names)
      EXPECT_NE(k.help.find(name), std::string::npos) << k.name << " help lacks " << name;
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end())
                  .count(std::get<std::string>(k.default_value)),
              1u)
        << k.name;
    for (const std::string& name : names) {
      std::vector<std::string> overrides{k.name + "=" + name, "data.path=\"somewhere\""};
      // A Muon key is refused under another optimizer (set away from its default).
      if (k.name == "optimizer.muon_scale") overrides.push_back("optimizer.name=\"muon\"");
      const JobConfig c = JobConfig::parse("", "j", overrides);
      EXPECT_EQ(config_value(c, k), ConfigValue(name)) << k.name;
    }
  }
  // activation_checkpoint, pp_schedule, data.source, device, dtype, on_nonfinite, optimizer,
  // muon_scale, decay, checkpoint.format, backend.
  EXPECT_EQ(keys, 11u);
}

TEST(ConfigEnums, PipelineSchedulesAreTheSchedulersNames) {
  EXPECT_EQ(names_of(PpSchedule{}).names(), pipeline::schedule_names());
}

TEST(ConfigEnums, TablesNameEveryValueOnce) {
  auto distinct = [](const std::vector<std::string>& names) {
    return std::set<std::string>(names.begin(), names.end()).size() == names.size();
  };
  EXPECT_TRUE(distinct(names_of(Recompute{}).names()));
  EXPECT_TRUE(distinct(names_of(LrDecay{}).names()));
  EXPECT_TRUE(distinct(names_of(OptimizerKind{}).names()));
  EXPECT_TRUE(distinct(names_of(MuonScale{}).names()));
  EXPECT_TRUE(distinct(names_of(DataSource{}).names()));
  EXPECT_TRUE(distinct(names_of(OnNonfinite{}).names()));
  EXPECT_TRUE(distinct(names_of(c10::ScalarType{}).names()));
  EXPECT_EQ(names_of(c10::ScalarType{}).choices(), "float32, float64 or bfloat16");
  EXPECT_EQ(config_name(Recompute::kSelective), std::string("selective"));
  EXPECT_EQ(config_name(PpSchedule::kInterleaved1F1B), std::string("interleaved-1f1b"));
}

}  // namespace
}  // namespace vescale
