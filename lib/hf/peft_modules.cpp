#include "hf/peft_modules.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "hf/lora_merge.h"

namespace vescale::hf {

std::vector<PeftModule> peft_modules(const JobConfig& config, const HFLayout& layout) {
  std::vector<PeftModule> modules;
  std::map<std::string, size_t> index;
  std::map<std::pair<std::string, int64_t>, int64_t> parts_of;  // (module, expert) -> count
  for (const auto& [linear, shape] : adapted_linears(config)) {
    const auto fused = layout.linears.find(linear);
    const HFLinear place =
        fused == layout.linears.end() ? HFLinear{linear, 0, shape[0]} : fused->second;
    auto [it, fresh] = index.emplace(place.module, modules.size());
    if (fresh) {
      PeftModule m;
      m.name = m.key = place.module;
      m.rows = place.rows;
      m.in = shape[1];
      m.experts = std::max<int64_t>(place.experts, 1);
      m.stacked = place.experts > 0;
      modules.push_back(std::move(m));
    }
    const int64_t part = parts_of[{place.module, place.expert}]++;
    modules[it->second].parts.push_back({linear, place.row_offset, shape[0], place.expert, part});
  }
  // peft wraps a module's stacked parameters one inside the other in the module's order of
  // them, the first innermost: its factors are under "<module>.base_layer" once for each
  // adapted parameter after it ("experts.base_layer.lora_A.weight" for gate_up_proj beside an
  // adapted down_proj).
  for (PeftModule& m : modules) {
    if (!m.stacked) continue;
    const size_t dot = m.name.rfind('.');
    const std::string parent = m.name.substr(0, dot), param = m.name.substr(dot + 1);
    const auto& order = layout.stacked_order;
    const auto at = std::find(order.begin(), order.end(), param);
    VS_CHECK(at != order.end(), "[peft] {}: not one of its module's stacked parameters", m.name);
    m.key = parent;
    for (auto later = at + 1; later != order.end(); ++later) {
      if (index.count(parent + "." + *later)) m.key += ".base_layer";
    }
  }
  return modules;
}

}  // namespace vescale::hf
