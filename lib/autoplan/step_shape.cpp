#include "autoplan/step_shape.h"

#include "core/error.h"

namespace vescale::autoplan {

Shape shape_of(const JobConfig& c, const Layout& layout, const LayoutModel& lm) {
  const std::optional<TransformerShape> model = c.family().transformer_shape(c.model_spec());
  VS_USER_CHECK(model.has_value(),
                "plan auto models transformer families; {} has model.name = '{}'", c.source,
                c.model);
  double vocab = static_cast<double>(model->vocab_size);
  for (const auto& p : lm.plan.parameters)
    if (p.fqn == model->vocab_weight) vocab = static_cast<double>(p.shape[0]);
  const double b = static_cast<double>(c.micro_batch_size());
  const double t = static_cast<double>(c.seq_len);
  return {c,
          lm,
          *model,
          vocab,
          static_cast<double>(c.tp),
          static_cast<double>(c.dp * c.cp),  // the replicas
          static_cast<double>(c.microbatches),
          b,
          t,
          static_cast<double>(model->n_embd),
          static_cast<double>(model->n_head),
          static_cast<double>(c.cp),
          b * t / static_cast<double>(c.cp),
          layout.sp && c.tp > 1,
          bytes_of(job_dtype(c)),
          static_cast<double>(c.ep),
          static_cast<double>(c.dp * c.cp / c.ep)};
}

}  // namespace vescale::autoplan
