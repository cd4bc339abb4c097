// FAVOR+ attention over a feature map: the normaliser's floor, the entry point (the blocked passes
// of favor_blocks.cpp without autograd) and the fused autograd function whose backward recomputes
// each block's features.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <vector>

#include "favor_blocks.h"
#include "favor_composite_guard.h"
#include "flt/attention/feature_map.h"
#include "flt/kernels/linear_attention.h"
#include "precomputed_input.h"

namespace flt::attention {

using namespace detail;  // PrecomputedInput and the blocked passes (favor_blocks.h)

torch::Tensor favor_floor(const torch::Tensor& phi_q, const torch::Tensor& key_mass, double eps) {
  torch::NoGradGuard no_grad;
  const auto largest = at::amax(phi_q, -1, /*keepdim=*/true);
  return (largest * key_mass.to(phi_q.scalar_type())).clamp_min(1.0).mul_(eps);
}

torch::Tensor favor_key_mass(const torch::Tensor& phi_k, bool causal) {
  torch::NoGradGuard no_grad;
  const auto per_key = phi_k.sum(-1, /*keepdim=*/true);  // (B, H, Lk, 1)
  return causal ? per_key.cumsum(-2) : per_key.sum(-2, /*keepdim=*/true);
}

namespace {

bool records_grad(const FeatureMapImpl& map, const PrecomputedInput& q, const PrecomputedInput& k,
                  const torch::Tensor& v) {
  if (!at::GradMode::is_enabled()) return false;
  const auto any = [](const std::vector<torch::Tensor>& tensors) {
    return std::any_of(tensors.begin(), tensors.end(),
                       [](const torch::Tensor& t) { return t.defined() && t.requires_grad(); });
  };
  const auto input = [&](const PrecomputedInput& x) {
    return any(x.blocks) || any(x.scales) || any(x.projections) || any(x.half_squared_norms);
  };
  return v.requires_grad() || (map.projection.defined() && map.projection.requires_grad()) ||
         input(q) || input(k);
}

// ---- the fused autograd function ----------------------------------------------------------------

// The slots of a PrecomputedInput in one order: blocks, scales, projections, half squared norms.
std::vector<torch::Tensor*> input_slots(PrecomputedInput& x) {
  std::vector<torch::Tensor*> slots;
  for (auto* list : {&x.blocks, &x.scales, &x.projections, &x.half_squared_norms})
    for (auto& t : *list) slots.push_back(&t);
  return slots;
}

// Whether slot `i` of x (input_slots order) has a row per token (`PrecomputedInput::rows` narrows
// it): blocks, projections and per-token norms; scales and constant norms are whole in every block.
bool row_slot(const PrecomputedInput& x, size_t i) {
  const size_t blocks = x.blocks.size(), scales = x.scales.size();
  const size_t projections = x.projections.size();
  if (i < blocks) return true;
  if (i < blocks + scales) return false;
  if (i < blocks + scales + projections) return true;
  const auto& n = x.half_squared_norms[i - blocks - scales - projections];
  return n.size(-2) != 1;
}

// A PrecomputedInput as a flat list of its defined tensors (appended to `flat`) and a layout that
// puts them back: the four slot counts, then per slot its index in `flat` or -1.
std::vector<int64_t> flatten_input(PrecomputedInput x, std::vector<torch::Tensor>& flat) {
  std::vector<int64_t> layout = {static_cast<int64_t>(x.blocks.size()),
                                 static_cast<int64_t>(x.scales.size()),
                                 static_cast<int64_t>(x.projections.size()),
                                 static_cast<int64_t>(x.half_squared_norms.size())};
  for (auto* slot : input_slots(x)) {
    layout.push_back(slot->defined() ? static_cast<int64_t>(flat.size()) : -1);
    if (slot->defined()) flat.push_back(*slot);
  }
  return layout;
}

PrecomputedInput unflatten_input(const std::vector<int64_t>& layout,
                                 const std::vector<torch::Tensor>& flat,
                                 std::shared_ptr<const detail::BlockRows> leading_rows) {
  PrecomputedInput x(torch::Tensor{});
  x.leading_rows = std::move(leading_rows);
  x.blocks.resize(layout[0]);
  x.scales.resize(layout[1]);
  x.projections.resize(layout[2]);
  x.half_squared_norms.resize(layout[3]);
  const auto slots = input_slots(x);
  for (size_t i = 0; i < slots.size(); ++i)
    if (layout[4 + i] >= 0) *slots[i] = flat[layout[4 + i]];
  return x;
}

// One block's features computed again (`features` on the block's rows of x), handed to `use`
// without graph; the dL/dphi that `use` returns (undefined: none) is taken to the block's share of
// the inputs and added to the gradients of the whole inputs (`grads`, indexed like the flat list;
// those `wanted`). The features are recomputed on leaves cut from the block's inputs, so their
// gradients follow the feature map's own formula (in-place exp, shifts, norms, scales folded into
// W) and the graph spans one block.
template <typename Features, typename Use>
void with_block_features(const PrecomputedInput& x, const std::vector<int64_t>& layout,
                         const std::vector<bool>& wanted, int64_t start, int64_t n,
                         const Features& features, const Use& use,
                         std::vector<torch::Tensor>& grads) {
  PrecomputedInput part = x.rows(start, n);
  std::vector<torch::Tensor> leaves;
  std::vector<std::pair<int64_t, bool>> targets;  // flat index, row slot
  const auto slots = input_slots(part);
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t index = layout[4 + i];
    if (index < 0 || !wanted[index]) {
      if (slots[i]->defined()) *slots[i] = slots[i]->detach();
      continue;
    }
    *slots[i] = slots[i]->detach().requires_grad_();
    leaves.push_back(*slots[i]);
    targets.emplace_back(index, row_slot(part, i));
  }
  torch::Tensor phi;
  {
    at::AutoGradMode enable(!leaves.empty());
    phi = features(part);
  }
  const torch::Tensor grad_phi = use(phi.detach());
  if (leaves.empty() || !grad_phi.defined()) return;
  const auto block_grads = torch::autograd::grad({phi}, leaves, {grad_phi},
                                                 /*retain_graph=*/false, /*create_graph=*/false,
                                                 /*allow_unused=*/true);
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto [index, rows] = targets[i];
    auto& total = grads[index];
    if (rows) {  // each block writes its own rows of the whole gradient, allocated once
      auto mine = total.narrow(-2, start, n);
      if (block_grads[i].defined()) {
        mine.copy_(block_grads[i]);
      } else {
        mine.zero_();
      }
    } else if (block_grads[i].defined()) {
      total = total.defined() ? total.add_(block_grads[i]) : block_grads[i].clone();
    }
  }
}

// dL/dboth for both = [numerator, denominator] from g = dL/dout, the output out = num / d and
// d = max(den, floor): [g / d, -(g . out) / d]; the floor carries no gradient, and at den = floor
// half of it reaches den, as at::maximum's backward gives. -> (B, H, n, Dv + 1)
torch::Tensor output_gradient(const torch::Tensor& out, const torch::Tensor& den,
                              const torch::Tensor& floor, const torch::Tensor& g) {
  const auto d = at::maximum(den, floor);
  const auto share = at::where(den < floor, 0.0, at::where(den == floor, 0.5, 1.0));
  return at::cat({g / d, (g * out).sum(-1, /*keepdim=*/true).div_(d).neg_().mul_(share)}, -1);
}

// The same from both itself (the causal scan forms it again in the backward).
torch::Tensor both_gradient(const torch::Tensor& both, const torch::Tensor& floor,
                            const torch::Tensor& g) {
  const int64_t dv = both.size(-1) - 1;
  return output_gradient(both.narrow(-1, 0, dv) / favor_normaliser(both, floor),
                         both.narrow(-1, dv, 1), floor.to(both.scalar_type()), g);
}

// The makers of q's and k's block 0 (`PrecomputedInput::leading_rows`; null where it is formed):
// kept for the backward, which makes each block's rows again as it does the features.
struct LeadingRows : torch::CustomClassHolder {
  LeadingRows(std::shared_ptr<const detail::BlockRows> q,
              std::shared_ptr<const detail::BlockRows> k)
      : q(std::move(q)), k(std::move(k)) {}
  std::shared_ptr<const detail::BlockRows> q, k;
};

// The non-tensor part of a fused call (the tensors go in one flat list: q's, k's, then v).
struct FavorCall {
  const FeatureMapImpl* map;
  std::vector<int64_t> q_layout, k_layout;
  std::shared_ptr<const detail::BlockRows> q_rows, k_rows;
  double eps;
  bool causal;
};

// FAVOR+ attention as one autograd function (favor_attention). The forward is the blocked one; it
// keeps the inputs, W, the keys' shift and (non-causal) the keys' summary S and mass, the output
// and each query's denominator and floor (so the backward does not form phi_q S again). With
// g = dL/dout and both_i = [num_i, den_i] (dL/dboth_i by `both_gradient`), vv_j = [v_j, 1]:
//   non-causal, both_i = phi_q_i S, S = sum_j phi_k_j vv_j^T:
//     dL/dphi_q_i = dL/dboth_i S^T,  dL/dS = sum_i phi_q_i^T dL/dboth_i,
//     dL/dphi_k_j = dL/dS vv_j,      dL/dv_j = (phi_k_j dL/dS)[:Dv]
//   in two passes over blocks, queries (dL/dphi_q and dL/dS) then keys;
//   causal, both_i = phi_q_i sum_{j <= i} phi_k_j vv_j^T (the backward of
//   kernels::linear_attention_numerator's scans, block by block with carried states):
//     dL/dphi_q_i = sum_{j <= i} (dL/dboth_i . vv_j) phi_k_j    (forward pass over blocks)
//     dL/dphi_k_j = sum_{i >= j} (vv_j . dL/dboth_i) phi_q_i    (reverse pass)
//     dL/dvv_j = sum_{i >= j} (phi_k_j . phi_q_i) dL/dboth_i    (reverse pass)
//   where the forward pass keeps dL/dboth (B, H, L, Dv + 1) for the reverse one.
// Each block's feature gradients go to the inputs through `with_block_features`.
class FavorFunction : public torch::autograd::Function<FavorFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const FavorCall& call,
                               at::TensorList tensors) {
    const std::vector<torch::Tensor> flat(tensors.begin(), tensors.end());
    const auto q = unflatten_input(call.q_layout, flat, call.q_rows);
    const auto k = unflatten_input(call.k_layout, flat, call.k_rows);
    const auto& v = flat.back();
    const FeatureMapImpl& map = *call.map;
    const int64_t rows = favor_block_rows(map, v);
    torch::Tensor out, den_floor;
    if (call.causal) {
      const auto shift =
          detail::causal_key_shift(map, k.first_token());  // as key_features(k, causal)
      out = favor_blocked_causal(map, q, k, v, call.eps, rows, shift);
      ctx->saved_data["shift"] = shift;
    } else {
      KeySummary keys;
      out = favor_non_causal(map, q, k, v, call.eps, &keys, &den_floor);
      ctx->saved_data["den_floor"] = den_floor;
      ctx->saved_data["summary"] = keys.summary;
      ctx->saved_data["mass"] = keys.mass;
      ctx->saved_data["shift"] = keys.shift;
    }
    auto saved = flat;
    saved.push_back(map.projection);  // undefined for kElu
    saved.push_back(call.causal ? torch::Tensor() : out);
    ctx->save_for_backward(saved);
    ctx->saved_data["q_layout"] = call.q_layout;
    ctx->saved_data["k_layout"] = call.k_layout;
    ctx->saved_data["leading_rows"] =
        c10::IValue::make_capsule(c10::make_intrusive<LeadingRows>(call.q_rows, call.k_rows));
    ctx->saved_data["eps"] = call.eps;
    ctx->saved_data["causal"] = call.causal;
    ctx->saved_data["kind"] = static_cast<int64_t>(map.options.kind());
    ctx->saved_data["input_dim"] = map.options.input_dim();
    ctx->saved_data["features"] = map.options.features();
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto flat = ctx->get_saved_variables();
    const auto out = flat.back();  // undefined where causal
    flat.pop_back();
    const auto w = flat.back();
    flat.pop_back();
    const FeatureMapImpl map(
        FeatureMapOptions(ctx->saved_data["input_dim"].toInt(), ctx->saved_data["features"].toInt())
            .kind(static_cast<FeatureKind>(ctx->saved_data["kind"].toInt())),
        w);
    const auto leading = c10::static_intrusive_pointer_cast<LeadingRows>(
        ctx->saved_data["leading_rows"].toCapsule());
    Backward b{map,
               ctx->saved_data["q_layout"].toIntVector(),
               ctx->saved_data["k_layout"].toIntVector(),
               leading->q,
               leading->k,
               flat,
               {},
               ctx->saved_data["eps"].toDouble(),
               grad_outputs[0],
               /*batch=*/-1,
               /*first_head=*/0,
               /*head_count=*/-1,
               /*into=*/{}};
    b.wanted.resize(flat.size());
    for (size_t i = 0; i < flat.size(); ++i) b.wanted[i] = ctx->needs_input_grad(i);
    const bool causal = ctx->saved_data["causal"].toBool();
    std::vector<torch::Tensor> grads;
    if (at::GradMode::is_enabled()) {
      grads = b.composite(causal);  // create_graph
    } else if (causal) {
      grads = b.causal(ctx->saved_data["shift"].toTensor());
    } else {
      grads =
          b.non_causal({ctx->saved_data["summary"].toTensor(), ctx->saved_data["mass"].toTensor(),
                        ctx->saved_data["shift"].toTensor()},
                       out, ctx->saved_data["den_floor"].toTensor());
    }
    torch::autograd::variable_list result = {torch::Tensor()};  // FavorCall
    result.insert(result.end(), grads.begin(), grads.end());
    return result;
  }

 private:
  // What a backward works from: the map over the saved W, the inputs (flat, with their layouts
  // and the makers of their block 0), which of them need gradients, eps and dL/dout.
  struct Backward {
    const FeatureMapImpl& map;
    std::vector<int64_t> q_layout, k_layout;
    std::shared_ptr<const detail::BlockRows> q_rows, k_rows;
    std::vector<torch::Tensor> flat;
    std::vector<bool> wanted;
    double eps;
    torch::Tensor g;
    // The panel this backward covers (PrecomputedInput::batch and heads; -1: the whole call).
    int64_t batch = -1, first_head = 0, head_count = -1;
    // Where the gradients with a row per token go (a panel's slices of the whole call's); where
    // undefined, `allocate` makes them.
    std::vector<torch::Tensor> into;

    PrecomputedInput input(const std::vector<int64_t>& layout,
                           const std::shared_ptr<const detail::BlockRows>& rows) const {
      auto x = unflatten_input(layout, flat, rows);
      x.batch = batch;
      x.first_head = first_head;
      x.head_count = head_count;
      return x;
    }
    PrecomputedInput q() const { return input(q_layout, q_rows); }
    PrecomputedInput k() const { return input(k_layout, k_rows); }
    const torch::Tensor& v() const { return flat.back(); }
    size_t v_index() const { return flat.size() - 1; }
    bool needs(const std::vector<int64_t>& layout) const {
      return std::any_of(layout.begin() + 4, layout.end(),
                         [&](int64_t index) { return index >= 0 && wanted[index]; });
    }
    // Whole gradients of the inputs with a row per token, allocated once (every block writes its
    // rows); the rest undefined until a block adds to them.
    std::vector<torch::Tensor> allocate() const {
      std::vector<torch::Tensor> grads(flat.size());
      for (const auto* layout : {&q_layout, &k_layout}) {
        auto x = unflatten_input(*layout, flat, nullptr);
        const auto slots = input_slots(x);
        for (size_t i = 0; i < slots.size(); ++i) {
          const int64_t index = (*layout)[4 + i];
          if (index >= 0 && wanted[index] && row_slot(x, i) && !grads[index].defined())
            grads[index] = given(index);
        }
      }
      if (wanted[v_index()]) grads[v_index()] = given(v_index());
      return grads;
    }
    // `into[index]` where given, else a new tensor of flat[index]'s shape.
    torch::Tensor given(size_t index) const {
      if (index < into.size() && into[index].defined()) return into[index];
      return at::empty(flat[index].sizes(), flat[index].options());
    }

    // create_graph: the composite path again, differentiably (double backward; rare, and its
    // features are those of the whole sequence).
    std::vector<torch::Tensor> composite(bool causal) const {
      std::vector<torch::Tensor> inputs, grads(flat.size());
      std::vector<size_t> indices;
      for (size_t i = 0; i < flat.size(); ++i) {
        if (!wanted[i]) continue;
        inputs.push_back(flat[i]);
        indices.push_back(i);
      }
      const auto out = favor_composite(map, q(), k(), v(), causal, eps);
      const auto found = torch::autograd::grad({out}, inputs, {g}, /*retain_graph=*/true,
                                               /*create_graph=*/true, /*allow_unused=*/true);
      for (size_t i = 0; i < inputs.size(); ++i) grads[indices[i]] = found[i];
      return grads;
    }

    // In the forward's panels: each panel's inputs, dL/dout and key summary sliced, its gradients
    // those of a call on the panel alone, added to the whole inputs' (where an input is broadcast
    // over batch or heads, FLT's position block shared by the batch, every panel adds to it).
    std::vector<torch::Tensor> non_causal(const KeySummary& keys, const torch::Tensor& out,
                                          const torch::Tensor& den_floor) const {
      const int64_t batch_size = v().size(0), heads = v().size(1);
      const auto [group, rows] = favor_panels(map, q().length(), v().size(2), v());
      // A head too long for a panel: blocks of tokens across every head (fewer, larger steps; one
      // head at a time made L = 2048-4096 at m = 64 slower, docs/benchmarks.md).
      if (group == 1 && heads > 1)
        return non_causal_panel(keys, out, den_floor, favor_block_rows(map, v()));
      if (batch_size == 1 && group == heads) return non_causal_panel(keys, out, den_floor, rows);
      // An input broadcast over the panels (fewer than 3 dims, or batch or heads of 1 where the
      // panels split them) takes the sum of every panel's gradient; the others' gradients are
      // written by each panel into its slice.
      const auto shared = [&](const torch::Tensor& t) {
        if (t.dim() < 3) return true;
        const bool over_heads = t.size(-3) == 1 && group < heads;
        const bool over_batch = (t.dim() < 4 || t.size(-4) == 1) && batch_size > 1;
        return over_heads || over_batch;
      };
      auto grads = allocate();
      std::vector<bool> summed(flat.size());
      for (size_t i = 0; i < flat.size(); ++i) {
        summed[i] = !grads[i].defined() || shared(flat[i]);
        if (summed[i]) grads[i] = torch::Tensor();
      }
      for (int64_t b = 0; b < batch_size; ++b) {
        for (int64_t h = 0; h < heads; h += group) {
          const int64_t n = std::min(group, heads - h);
          const auto panel = [&](const torch::Tensor& t) { return detail::heads_of(t, b, h, n); };
          Backward part = *this;
          for (auto& t : part.flat) t = panel(t);
          part.g = panel(g);
          part.batch = b;
          part.first_head = h;
          part.head_count = n;
          part.into.assign(flat.size(), torch::Tensor());
          for (size_t i = 0; i < flat.size(); ++i)
            if (!summed[i]) part.into[i] = panel(grads[i]);
          const KeySummary panel_keys{panel(keys.summary), panel(keys.mass), panel(keys.shift)};
          const auto found = part.non_causal_panel(panel_keys, panel(out), panel(den_floor), rows);
          for (size_t i = 0; i < found.size(); ++i) {
            if (!summed[i] || !found[i].defined()) continue;
            if (!grads[i].defined()) grads[i] = at::zeros(flat[i].sizes(), flat[i].options());
            panel(grads[i]).add_(found[i]);
          }
        }
      }
      return grads;
    }

    std::vector<torch::Tensor> non_causal_panel(const KeySummary& keys, const torch::Tensor& out,
                                                const torch::Tensor& den_floor,
                                                int64_t rows) const {
      const auto& summary = keys.summary;
      const auto q = this->q(), k = this->k();
      const auto& v = this->v();
      const int64_t dv = v.size(3);
      const int64_t lq = q.length(), lk = v.size(2);
      const bool query_need = needs(q_layout), key_need = needs(k_layout);
      const bool value_need = wanted[v_index()];
      auto grads = allocate();
      // Queries: dL/dphi_q to q's inputs, dL/dS summed.
      auto grad_summary = at::zeros_like(summary);
      const auto summary_t = summary.transpose(-2, -1);
      const auto query_features = [&](const PrecomputedInput& x) {
        return detail::query_features(map, x);
      };
      for (int64_t start = 0; start < lq; start += rows) {
        const int64_t n = std::min(rows, lq - start);
        with_block_features(
            q, q_layout, wanted, start, n, query_features,
            [&](const torch::Tensor& phi_q) {
              const auto kept = den_floor.narrow(2, start, n);
              const auto grad_both = output_gradient(out.narrow(2, start, n), kept.narrow(-1, 0, 1),
                                                     kept.narrow(-1, 1, 1), g.narrow(2, start, n));
              if (key_need || value_need)
                grad_summary.add_(at::matmul(phi_q.transpose(-2, -1), grad_both));
              return query_need ? at::matmul(grad_both, summary_t) : torch::Tensor();
            },
            grads);
      }
      // Keys: dL/dv and dL/dphi_k to k's inputs.
      const auto key_features = [&](const PrecomputedInput& x) {
        return detail::key_features(map, x, keys.shift);
      };
      // dL/dphi_k = [v, 1] dL/dS^T as v dL/dS_num^T plus the row dL/dS_den^T (no [v, 1] copy).
      const auto grad_numerator_t = grad_summary.narrow(-1, 0, dv).transpose(-2, -1);
      const auto grad_mass_t = grad_summary.narrow(-1, dv, 1).transpose(-2, -1);
      for (int64_t start = 0; start < lk && (key_need || value_need); start += rows) {
        const int64_t n = std::min(rows, lk - start);
        with_block_features(
            k, k_layout, wanted, start, n, key_features,
            [&](const torch::Tensor& phi_k) {
              if (value_need) {
                grads[v_index()]
                    .narrow(2, start, n)
                    .copy_(at::matmul(phi_k, grad_summary.narrow(-1, 0, dv)));
              }
              return key_need
                         ? at::matmul(v.narrow(2, start, n), grad_numerator_t).add_(grad_mass_t)
                         : torch::Tensor();
            },
            grads);
      }
      return grads;
    }

    std::vector<torch::Tensor> causal(const torch::Tensor& shift) const {
      const auto q = this->q(), k = this->k();
      const auto& v = this->v();
      const int64_t rows = favor_block_rows(map, v), dv = v.size(3), length = v.size(2);
      const bool query_need = needs(q_layout), key_need = needs(k_layout);
      const bool value_need = wanted[v_index()];
      auto grads = allocate();
      const auto zeros = [&](int64_t rows_, int64_t cols) {
        return at::zeros({v.size(0), v.size(1), rows_, cols}, v.options());
      };
      const int64_t features = map.output_dim();
      // Forward pass: the outputs' scan again (carry), dL/dboth kept, dL/dphi_q by the forward
      // scan of (dL/dboth, vv, phi_k) from its own carried state.
      auto grad_both = at::empty({v.size(0), v.size(1), length, dv + 1}, v.options());
      CausalCarry carry;
      torch::Tensor query_state;  // sum_{j before the block} vv_j phi_k_j^T: (B, H, Dv + 1, M)
      const auto query_features = [&](const PrecomputedInput& x) {
        return detail::query_features(map, x);
      };
      for (int64_t start = 0; start < length; start += rows) {
        const int64_t n = std::min(rows, length - start);
        const auto phi_k = detail::key_features(map, k.rows(start, n), shift);
        const auto values = with_ones(v.narrow(2, start, n));
        with_block_features(
            q, q_layout, wanted, start, n, query_features,
            [&](const torch::Tensor& phi_q) {
              torch::Tensor floor;
              const auto both = causal_block(phi_q, phi_k, values, carry, eps, floor);
              const auto block = both_gradient(both, floor, g.narrow(2, start, n));
              grad_both.narrow(2, start, n).copy_(block);
              if (!query_need) return torch::Tensor();
              if (!query_state.defined()) query_state = zeros(dv + 1, features);
              return kernels::causal_linear_attention_block(block, values, phi_k, query_state);
            },
            grads);
      }
      if (!key_need && !value_need) return grads;
      // Reverse pass: dL/dphi_k by the reverse scan of (vv, dL/dboth, phi_q), dL/dv by that of
      // (phi_k, phi_q, dL/dboth), each from the later blocks' carried state.
      torch::Tensor key_state, value_state;  // (B, H, Dv + 1, M), (B, H, M, Dv + 1)
      const auto key_features = [&](const PrecomputedInput& x) {
        return detail::key_features(map, x, shift);
      };
      const int64_t last = (length - 1) / rows * rows;
      for (int64_t start = last; start >= 0; start -= rows) {
        const int64_t n = std::min(rows, length - start);
        const auto phi_q = detail::query_features(map, q.rows(start, n));
        const auto block = grad_both.narrow(2, start, n);
        with_block_features(
            k, k_layout, wanted, start, n, key_features,
            [&](const torch::Tensor& phi_k) {
              if (value_need) {
                if (!value_state.defined()) value_state = zeros(features, dv + 1);
                const auto grad_values = kernels::causal_linear_attention_block(
                    phi_k, phi_q, block, value_state, /*reverse=*/true);
                grads[v_index()].narrow(2, start, n).copy_(grad_values.narrow(-1, 0, dv));
              }
              if (!key_need) return torch::Tensor();
              if (!key_state.defined()) key_state = zeros(dv + 1, features);
              return kernels::causal_linear_attention_block(with_ones(v.narrow(2, start, n)), block,
                                                            phi_q, key_state,
                                                            /*reverse=*/true);
            },
            grads);
      }
      return grads;
    }
  };
};

// Whether the fused function covers a call with autograd recording: on the CPU in float or double
// (the causal scan kernel's dtypes) with a W that needs no gradient. The others take the composite
// path: kLearnable's W is a parameter (its gradient, a sum over every block of the features'
// gradients against the inputs, is not written here), GPUs run the composite path's chunks at once.
bool fused_covers(const FeatureMapImpl& map, const PrecomputedInput& q, const PrecomputedInput& k,
                  const torch::Tensor& v) {
  if (FavorCompositeGuard::active()) return false;
  if (map.projection.defined() && map.projection.requires_grad()) return false;
  const auto dtype = v.scalar_type();
  if (dtype != torch::kFloat && dtype != torch::kDouble) return false;
  if (v.dim() != 4 || !v.device().is_cpu()) return false;
  const auto fits = [&](const PrecomputedInput& x) {
    for (size_t b = 0; b < x.blocks.size(); ++b) {
      const auto& t = x.blocks[b];
      if (!t.defined() && b == 0 && x.leading_rows) continue;  // made by rows on the CPU
      if (!t.defined() || !t.device().is_cpu() || t.scalar_type() != dtype || t.dim() < 2)
        return false;
    }
    for (const auto* list : {&x.scales, &x.projections, &x.half_squared_norms})
      for (const auto& t : *list)
        if (t.defined() && !t.device().is_cpu()) return false;
    return !x.blocks.empty();
  };
  return fits(q) && fits(k);
}

}  // namespace

void detail::share_leading_projection(const FeatureMapImpl& map, PrecomputedInput& q,
                                      PrecomputedInput& k) {
  if (!shares_leading_block(map, q, k)) return;
  const auto projection = detail::project_block(map, k, 0);
  q.projections = {projection};
  k.projections = {projection};
}

torch::Tensor detail::favor_attention(const FeatureMapImpl& map, PrecomputedInput q,
                                      PrecomputedInput k, const torch::Tensor& v, bool causal,
                                      double eps) {
  if (records_grad(map, q, k, v) || !v.device().is_cpu()) {
    if (!fused_covers(map, q, k, v))
      return favor_composite(map, std::move(q), std::move(k), v, causal, eps);
    FavorCall call{&map, {}, {}, q.leading_rows, k.leading_rows, eps, causal};
    std::vector<torch::Tensor> flat;
    call.q_layout = flatten_input(std::move(q), flat);
    call.k_layout = flatten_input(std::move(k), flat);
    flat.push_back(v);
    return FavorFunction::apply(call, at::TensorList(flat));
  }
  if (!causal) return favor_non_causal(map, q, k, v, eps);
  const int64_t rows = std::min(kInferenceBlockRows, favor_block_rows(map, v));
  return favor_blocked_causal(map, q, k, v, eps, rows,
                              detail::causal_key_shift(map, k.first_token()));
}

torch::Tensor favor_attention(const FeatureMapImpl& map, FeatureInput q, FeatureInput k,
                              const torch::Tensor& v, bool causal, double eps) {
  return detail::favor_attention(map, std::move(q), std::move(k), v, causal, eps);
}

namespace {
thread_local int composite_guards = 0;
}  // namespace

FavorCompositeGuard::FavorCompositeGuard() {
  ++composite_guards;
}
FavorCompositeGuard::~FavorCompositeGuard() {
  --composite_guards;
}
bool FavorCompositeGuard::active() {
  return composite_guards > 0;
}

}  // namespace flt::attention
