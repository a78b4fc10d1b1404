#include "train/model_factory.h"

#include "dmodule/parallelize.h"
#include "models/gpt.h"
#include "models/mlp.h"

namespace vescale {

std::shared_ptr<Module> build_model(const JobConfig& c) {
  if (c.model == "mlp")
    return std::make_shared<models::MLP>(
        models::MLPConfig{c.d_in, c.d_hidden, c.d_out, c.n_layers});
  models::GPTConfig g;
  g.vocab_size = c.vocab_size;
  g.block_size = c.block_size;
  g.n_layer = c.n_layer;
  g.n_head = c.n_head;
  g.n_embd = c.n_embd;
  g.dropout = c.dropout;
  g.vocab_multiple = c.vocab_multiple;
  auto gpt = std::make_shared<models::GPT>(g, c.tp);
  gpt->dropout_state().seed = static_cast<uint64_t>(c.seed);
  return gpt;
}

Plan job_plan(const JobConfig& c) {
  return c.plan.empty() ? replicate_plan(c.model) : Plan::load(c.plan);
}

}  // namespace vescale
