// Whole training runs on threads-as-ranks for parity tests: a small float64 GPT and MLP job,
// run_training under any layout (config overrides), the losses and the parameters read back
// from the merged checkpoint the run writes at its end, and the comparison that prints the
// error it measured.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace vescale::testing {

/// 5 float64 AdamW steps of 4 micro-batches of a 4-block GPT (vocab 64, width 16), a merged
/// checkpoint at the end.
extern const std::string kGptRun;
/// The same for a 4-layer MLP.
extern const std::string kMlpRun;
/// The same for a 4-layer Llama (vocab 64, width 32, 4 query and 2 key/value heads, SwiGLU 40).
extern const std::string kLlamaRun;
/// The same for a 4-layer Mixtral (the Llama's attention; 4 SwiGLU experts of 24, 2 per token).
extern const std::string kMixtralRun;

struct RunOutput {
  std::vector<double> losses;
  std::vector<double> aux_losses;                 ///< a mixture of experts': at each logged step
  std::map<std::string, at::Tensor> params;       ///< "model/<fqn>": full tensors
  double first_val_loss = 0, final_val_loss = 0;  ///< before the first step and after the last
};

/// A new folder name under the temp directory (not created; a stale one of that name removed).
std::string fresh_folder(const std::string& prefix = "vescale-run");

/// Trains `toml` with `overrides` in `folder` (removed afterwards unless `keep`) and reads back
/// the merged checkpoint of the last step when the run wrote one.
RunOutput train_in(const std::string& folder, const std::string& toml,
                   std::vector<std::string> overrides, bool keep = false);
RunOutput train(const std::string& toml, std::vector<std::string> overrides);

/// Trains 3 steps of `toml` under `from` and saves them in `format`, then resumes steps 4 and
/// on under `to` from that checkpoint; `common` applies to both runs. Returns the resumed run.
RunOutput resume_across(const std::string& toml, const std::vector<std::string>& from,
                        const std::string& format, const std::vector<std::string>& to,
                        const std::vector<std::string>& common);

/// Prints and checks the worst relative loss error (a resumed run: its last steps), that of the
/// auxiliary losses of a mixture of experts, and the parameters' max difference relative to
/// their max magnitude, each at most `tol`.
void expect_matches(const RunOutput& run, const RunOutput& ref, const std::string& label,
                    double tol = 1e-10);

/// Trains `toml` under `layout` with the boolean config key `key` on and off and expects the
/// same losses and parameters (and parameter names) within `tol`, printed as "<key> on vs off,
/// <label>": a fused path against the one it replaces.
void expect_switch_matches(const std::string& toml, std::vector<std::string> layout,
                           const std::string& key, const std::string& label, double tol);

/// Prints and checks the worst relative loss error of two curves of the same length.
void expect_curves_close(const RunOutput& run, const RunOutput& ref, const std::string& label,
                         double tol);

}  // namespace vescale::testing
