#include "optim/muon_exchange.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/error.h"

namespace vescale {
namespace {

using Coordinates = std::vector<std::vector<int64_t>>;

/// `full`'s region `box`.
at::Tensor box_of(const at::Tensor& full, const Box& box) {
  at::Tensor out = full;
  for (size_t d = 0; d < box.sizes.size(); ++d)
    out = out.narrow(static_cast<int64_t>(d), box.offsets[d], box.sizes[d]);
  return out;
}

/// `flat`'s elements [offset, offset + n), advancing `offset`.
at::Tensor take(const at::Tensor& flat, int64_t& offset, int64_t n) {
  at::Tensor out = flat.narrow(0, offset, n);
  offset += n;
  return out;
}

/// The pieces as one flat buffer (an empty one of `like`'s type for none).
at::Tensor joined(const std::vector<at::Tensor>& pieces, const at::Tensor& like) {
  if (pieces.empty()) return like.new_empty({0});
  return pieces.size() == 1 ? pieces.front() : at::cat(pieces);
}

/// (member, elements) of what a rank receives from each peer.
using Incoming = std::vector<std::vector<std::pair<size_t, int64_t>>>;

/// One stage's all-to-all over `group`: `to[q]`, joined, to rank q; from rank q the members'
/// pieces `from[q]` names, each cut out of what came. *Collective.*
std::vector<std::vector<at::Tensor>> exchange(const comm::Group& group,
                                              const std::vector<std::vector<at::Tensor>>& to,
                                              const Incoming& from, const at::Tensor& like,
                                              size_t members) {
  std::vector<at::Tensor> inputs;
  std::vector<std::vector<int64_t>> shapes;
  for (int q = 0; q < group.size(); ++q) {
    inputs.push_back(joined(to[q], like));
    int64_t total = 0;
    for (const auto& entry : from[q])
      total += entry.second;
    shapes.push_back({total});
  }
  const std::vector<at::Tensor> received = group.all_to_all(inputs, shapes);
  std::vector<std::vector<at::Tensor>> out(members);  // per member, its pieces in rank order
  for (int q = 0; q < group.size(); ++q) {
    int64_t offset = 0;
    for (const auto& [m, count] : from[q])
      out[m].push_back(take(received[q], offset, count));
  }
  return out;
}

}  // namespace

double newton_schulz_flops(int64_t rows, int64_t cols, int64_t steps) {
  const auto m = static_cast<double>(std::min(rows, cols));
  const auto n = static_cast<double>(std::max(rows, cols));
  return static_cast<double>(steps) * (4.0 * m * m * n + 2.0 * m * m * m);
}

MuonExchange::MuonExchange(std::vector<DTensorSpec> specs, int64_t ns_steps)
    : specs_(std::move(specs)), ns_steps_(ns_steps) {
  // Classes in the order of their keys, the same on every rank that shares a group.
  std::map<std::pair<std::vector<std::string>, std::vector<int>>, Class> by_key;
  for (size_t j = 0; j < specs_.size(); ++j) {
    const DTensorSpec& s = specs_[j];
    VS_CHECK(s.shape.size() == 2, "[optim] Muon exchange: a matrix, not {}", s.str());
    // A dim of one rank splits nothing.
    std::vector<int> split;
    for (int d : s.split_dims())
      if (s.mesh.size(d) > 1) split.push_back(d);
    auto key = std::make_pair(s.mesh.dim_names(), split);
    auto it = by_key.find(key);
    if (it == by_key.end())
      it = by_key.emplace(key, Class{s.mesh, key.second, s.mesh.coordinate(), {}, {}, {}}).first;
    it->second.matrices.push_back(j);
  }
  for (auto& [key, c] : by_key) {
    // Largest first, each to the least loaded owner (the first of equals), by its FLOPs.
    std::vector<int64_t> sizes;
    for (int d : c.dims)
      sizes.push_back(c.mesh.size(d));
    std::vector<double> load(static_cast<size_t>(c10::multiply_integers(sizes)), 0.0);
    const auto flops = [this](size_t j) {
      return newton_schulz_flops(specs_[j].shape[0], specs_[j].shape[1], ns_steps_);
    };
    std::vector<size_t> order(c.matrices.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return flops(c.matrices[a]) > flops(c.matrices[b]);
    });
    c.owner.assign(c.matrices.size(), {});
    for (size_t m : order) {
      const auto least =
          static_cast<int64_t>(std::min_element(load.begin(), load.end()) - load.begin());
      load[least] += flops(c.matrices[m]);
      std::vector<int64_t> coordinate(sizes.size());
      for (size_t i = sizes.size(), rest = least; i-- > 0; rest /= sizes[i])
        coordinate[i] = static_cast<int64_t>(rest) % sizes[i];
      c.owner[m] = coordinate;
    }
    // What each stage moves, from the specs alone: computed once, read every step.
    c.share.assign(c.dims.size(), std::vector<std::vector<int64_t>>(c.matrices.size()));
    for (size_t i = 0; i < c.dims.size(); ++i) {
      for (size_t m = 0; m < c.matrices.size(); ++m) {
        for (int64_t q = 0; q < c.mesh.size(c.dims[i]); ++q) {
          std::vector<int64_t> x = c.me;
          x[c.dims[i]] = q;
          c.share[i][m].push_back(elements(c.matrices[m], held(c, i, x)));
        }
      }
    }
    classes_.push_back(std::move(c));
  }
}

Coordinates MuonExchange::held(const Class& c, size_t stages, std::vector<int64_t> at) {
  if (stages == 0) return {at};
  Coordinates out;
  const int d = c.dims[stages - 1];
  for (int64_t q = 0; q < c.mesh.size(d); ++q) {
    at[d] = q;
    const Coordinates from = held(c, stages - 1, at);
    out.insert(out.end(), from.begin(), from.end());
  }
  return out;
}

bool MuonExchange::holds(const Class& c, size_t m, size_t stages) {
  for (size_t t = 0; t < stages; ++t)
    if (c.me[c.dims[t]] != c.owner[m][t]) return false;
  return true;
}

int64_t MuonExchange::elements(size_t j, const Coordinates& coordinates) const {
  int64_t out = 0;
  for (const auto& x : coordinates)
    out += c10::multiply_integers(specs_[j].local_box(x).sizes);
  return out;
}

at::Tensor MuonExchange::assemble(size_t j, const Coordinates& coordinates,
                                  const at::Tensor& data) const {
  at::Tensor whole = at::zeros(specs_[j].shape, data.options());
  int64_t offset = 0;
  for (const auto& x : coordinates) {
    const Box box = specs_[j].local_box(x);
    box_of(whole, box).copy_(take(data, offset, c10::multiply_integers(box.sizes)).view(box.sizes));
  }
  return whole;
}

at::Tensor MuonExchange::cut(size_t j, const Coordinates& coordinates,
                             const at::Tensor& whole) const {
  std::vector<at::Tensor> boxes;
  for (const auto& x : coordinates)
    boxes.push_back(box_of(whole, specs_[j].local_box(x)).reshape({-1}));
  return joined(boxes, whole);
}

void MuonExchange::run_class(const Class& c, const std::vector<at::Tensor>& pieces,
                             const std::function<at::Tensor(const at::Tensor&)>& orthogonalize,
                             std::vector<at::Tensor>& out) const {
  const size_t k = c.dims.size(), members = c.matrices.size();
  const at::Tensor& like = pieces[c.matrices.front()];
  std::vector<at::Tensor> data(members);  // this rank's boxes of each member it holds
  for (size_t m = 0; m < members; ++m) {
    const at::Tensor& piece = pieces[c.matrices[m]];
    VS_CHECK(piece.scalar_type() == like.scalar_type(),
             "[optim] Muon exchange: matrices of one class in {} and {}",
             c10::toString(piece.scalar_type()), c10::toString(like.scalar_type()));
    data[m] = piece.reshape({-1});
  }
  // Each gather stage moves the holders' boxes to the owners' coordinate on its dim.
  for (size_t i = 0; i < k; ++i) {
    const int d = c.dims[i];
    const comm::Group& group = c.mesh.group(d);
    const int n = group.size();
    VS_CHECK(group.rank() == c.me[d], "[optim] Muon exchange: rank {} of {} at coordinate {}",
             group.rank(), group.label(), c.me[d]);
    std::vector<std::vector<at::Tensor>> to(n);
    Incoming from(n);
    for (size_t m = 0; m < members; ++m) {
      if (!holds(c, m, i)) continue;
      to[c.owner[m][i]].push_back(data[m]);
      if (c.owner[m][i] != c.me[d]) continue;
      for (int q = 0; q < n; ++q)
        from[q].emplace_back(m, c.share[i][m][q]);
    }
    const std::vector<std::vector<at::Tensor>> gathered = exchange(group, to, from, like, members);
    for (size_t m = 0; m < members; ++m)
      data[m] = holds(c, m, i + 1) ? joined(gathered[m], like) : at::Tensor();
  }
  const Coordinates all = held(c, k, c.me);
  for (size_t m = 0; m < members; ++m) {
    if (!holds(c, m, k)) continue;
    const size_t j = c.matrices[m];
    const at::Tensor whole = k == 0 ? data[m].view(specs_[j].shape) : assemble(j, all, data[m]);
    data[m] = cut(j, all, orthogonalize(whole));
  }
  // Each scatter stage, in reverse, returns every rank of its dim its share of the holders'.
  for (size_t i = k; i-- > 0;) {
    const int d = c.dims[i];
    const comm::Group& group = c.mesh.group(d);
    const int n = group.size();
    std::vector<std::vector<at::Tensor>> to(n);
    Incoming from(n);
    for (size_t m = 0; m < members; ++m) {
      if (holds(c, m, i + 1)) {
        int64_t offset = 0;
        for (int q = 0; q < n; ++q)
          to[q].push_back(take(data[m], offset, c.share[i][m][q]));
      }
      if (holds(c, m, i)) from[c.owner[m][i]].emplace_back(m, c.share[i][m][c.me[d]]);
    }
    const std::vector<std::vector<at::Tensor>> back = exchange(group, to, from, like, members);
    for (size_t m = 0; m < members; ++m)
      data[m] = back[m].empty() ? at::Tensor() : back[m].front();
  }
  for (size_t m = 0; m < members; ++m)
    out[c.matrices[m]] = data[m];
}

std::vector<at::Tensor> MuonExchange::run(
    const std::vector<at::Tensor>& pieces,
    const std::function<at::Tensor(const at::Tensor&)>& orthogonalize) const {
  VS_CHECK(pieces.size() == specs_.size(), "[optim] Muon exchange: {} pieces for {} matrices",
           pieces.size(), specs_.size());
  std::vector<at::Tensor> out(pieces.size());
  for (const Class& c : classes_)
    run_class(c, pieces, orthogonalize, out);
  return out;
}

std::map<std::string, int64_t> MuonExchange::sent_bytes(int64_t element_bytes) const {
  std::map<std::string, int64_t> out;
  for (const Class& c : classes_) {
    const std::vector<std::string> names = c.mesh.dim_names();
    for (size_t i = 0; i < c.dims.size(); ++i) {
      const int d = c.dims[i];
      int64_t elements_out = 0;
      for (size_t m = 0; m < c.matrices.size(); ++m) {
        const std::vector<int64_t>& share = c.share[i][m];
        // Gather: its boxes to the owner's coordinate, unless it is there.
        if (holds(c, m, i) && c.owner[m][i] != c.me[d]) elements_out += share[c.me[d]];
        // Scatter: the other ranks' shares of what it holds.
        if (!holds(c, m, i + 1)) continue;
        for (size_t q = 0; q < share.size(); ++q)
          if (static_cast<int64_t>(q) != c.me[d]) elements_out += share[q];
      }
      out[names[d]] += elements_out * element_bytes;
    }
  }
  return out;
}

std::map<std::string, int64_t> MuonExchange::all_to_alls() const {
  std::map<std::string, int64_t> out;
  for (const Class& c : classes_)
    for (int d : c.dims)
      out[c.mesh.dim_names()[d]] += 2;
  return out;
}

bool MuonExchange::owns(size_t j) const {
  for (const Class& c : classes_)
    for (size_t m = 0; m < c.matrices.size(); ++m)
      if (c.matrices[m] == j) return holds(c, m, c.dims.size());
  return false;
}

double MuonExchange::owned_flops() const {
  double out = 0;
  for (size_t j = 0; j < specs_.size(); ++j)
    if (owns(j)) out += newton_schulz_flops(specs_[j].shape[0], specs_[j].shape[1], ns_steps_);
  return out;
}

}  // namespace vescale
