// vescale-optimizer-steps: our optimizers, stepped on gradients a client wrote, so that
// tests/clients/test_optimizers.py can set them beside torch.optim's on the same numbers.
//
//   vescale-optimizer-steps IN.safetensors OUT.safetensors
//
// IN holds every parameter's start, `param/<name>`, the gradient of each step k, `grad/<k>/<name>`,
// and the options in its metadata: optimizer ("adamw" or "muon"), steps, lr, weight_decay, beta1,
// beta2, eps, and for Muon momentum, nesterov ("true"/"false"), ns_steps, muon_scale ("adamw_rms"
// or "shape"). A parameter of 2 or more dims has weight decay, as in training; under Muon the
// names that begin with "matrix." are its matrices and the others AdamW's (NOTE [Muon]). OUT holds
// each parameter after each step, `param/<k>/<name>`, in the parameters' dtype.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "dtensor/dtensor.h"
#include "hf/safetensors.h"
#include "mesh/device_mesh.h"
#include "optim/adamw.h"
#include "optim/muon.h"
#include "support/run_ranks.h"

namespace vescale {
namespace {

struct Input {
  std::map<std::string, std::string> options;
  std::vector<std::string> names;                        ///< the parameters, in the file's order
  std::map<std::string, at::Tensor> start;               ///< by name
  std::vector<std::map<std::string, at::Tensor>> grads;  ///< by step, then name
};

const std::string& option(const Input& in, const std::string& key) {
  const auto it = in.options.find(key);
  VS_CHECK(it != in.options.end(), "[optimizer-steps] the input's metadata has no '{}'", key);
  return it->second;
}
double number(const Input& in, const std::string& key) {
  return std::stod(option(in, key));
}

Input read_input(const std::string& path) {
  const hf::SafetensorsFile file(path);
  Input in;
  in.options = file.metadata();
  const auto steps = static_cast<size_t>(number(in, "steps"));
  in.grads.resize(steps);
  for (const std::string& name : file.names()) {
    if (name.rfind("param/", 0) == 0) {
      in.names.push_back(name.substr(6));
      in.start[name.substr(6)] = file.read(name);
    }
  }
  for (size_t k = 0; k < steps; ++k)
    for (const std::string& name : in.names)
      in.grads[k][name] = file.read("grad/" + std::to_string(k) + "/" + name);
  return in;
}

void run(const std::string& in_path, const std::string& out_path) {
  const Input in = read_input(in_path);
  const std::string kind = option(in, "optimizer");
  VS_CHECK(kind == "adamw" || kind == "muon",
           "[optimizer-steps] optimizer = '{}': use adamw or muon", kind);
  const AdamWOptions adamw{number(in, "lr"), number(in, "beta1"), number(in, "beta2"),
                           number(in, "eps"), number(in, "weight_decay")};
  std::vector<hf::TensorEntry> entries;
  std::vector<std::pair<std::string, at::Tensor>> outputs;
  testing::run_ranks(1, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{1}, {"dp"}});
    std::vector<std::unique_ptr<DTensor>> params;
    std::vector<ParamView> views;
    std::vector<bool> matrix;
    for (const std::string& name : in.names) {
      const at::Tensor& start = in.start.at(name);
      params.push_back(std::make_unique<DTensor>(
          start.clone(), DTensorSpec(mesh, {Placement::replicate()}, start.sizes().vec())));
      params.back()->requires_grad_();
      views.push_back(ParamView::whole(name, params.back().get(), params.back()->spec()));
      matrix.push_back(name.rfind("matrix.", 0) == 0);
    }
    std::unique_ptr<Optimizer> optimizer;
    if (kind == "adamw") {
      optimizer = std::make_unique<AdamW>(views, adamw);
    } else {
      MuonOptions muon;
      muon.momentum = number(in, "momentum");
      muon.nesterov = option(in, "nesterov") == "true";
      muon.ns_steps = static_cast<int64_t>(number(in, "ns_steps"));
      muon.match_adamw_rms = option(in, "muon_scale") == "adamw_rms";
      muon.weight_decay = number(in, "weight_decay");
      optimizer = std::make_unique<Muon>(views, matrix, muon, adamw);
    }
    for (size_t k = 0; k < in.grads.size(); ++k) {
      for (size_t i = 0; i < in.names.size(); ++i)
        params[i]->to_local().mutable_grad() = in.grads[k].at(in.names[i]).clone();
      optimizer->step(adamw.lr);
      for (size_t i = 0; i < in.names.size(); ++i) {
        const std::string name = "param/" + std::to_string(k) + "/" + in.names[i];
        const at::Tensor value = params[i]->to_local().detach().clone();
        entries.push_back({name, value.scalar_type(), value.sizes().vec()});
        outputs.emplace_back(name, value);
      }
    }
  });
  hf::SafetensorsWriter writer(out_path, entries);
  for (const auto& [name, value] : outputs)
    writer.write(name, value);
  writer.finish();
}

}  // namespace
}  // namespace vescale

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: vescale-optimizer-steps IN.safetensors OUT.safetensors\n");
    return 2;
  }
  try {
    vescale::run(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
