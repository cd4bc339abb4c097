// Fused CPU inference path of LearnedOptimizerModel::step: one pass per coordinate, no
// intermediate tensors, OpenMP over coordinates. The composite `step` (learned_model.cpp) stays the
// readable reference (meta-training differentiates through it); tests compare the two.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <vector>

#include "flt/optim/learned_model.h"

namespace flt::optim {
namespace {

constexpr float kBeta1 = 0.9f, kBeta2 = 0.99f, kBetaV = 0.999f;
constexpr float kMaxGradient = 1e18f, kRatioClip = 10.0f, kMaxLogMagnitude = 6.0f;
constexpr float kLogSignK = 5.0f;
constexpr int64_t kMaxWidth = 64;  // bound on hidden / key / feature widths of the fused path

inline void log_sign(float x, float* out) {
  const float threshold = std::exp(-kLogSignK);
  const float a = std::abs(x);
  if (a >= threshold) {
    out[0] = std::log(a) / kLogSignK;
    out[1] = x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f);
  } else {
    out[0] = -1.0f;
    out[1] = x * std::exp(kLogSignK);
  }
}

inline float clip(float x, float bound) { return std::min(bound, std::max(-bound, x)); }

/// y = W x + b for a row-major (rows, cols) W.
inline void affine(const float* w, const float* b, const float* x, int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    float acc = b ? b[r] : 0.0f;
    const float* wr = w + r * cols;
    for (int64_t c = 0; c < cols; ++c) acc += wr[c] * x[c];
    y[r] = acc;
  }
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

torch::Tensor contiguous_float(const torch::Tensor& t) { return t.detach().to(at::kFloat).contiguous(); }

}  // namespace

bool LearnedOptimizerModelImpl::fused_supported() const {
  const int64_t widest = std::max({options.hidden(), options.key_dim(), options.features(),
                                   4 * options.key_dim(), 2 * options.rpe_features() + options.key_dim()});
  if (widest > kMaxWidth) return false;
  if (options.memory() == Memory::kFLT) return flt->feature_map->options.kind() == attention::FeatureKind::kPositive;
  if (options.memory() == Memory::kPerformer) return feature_map->options.kind() == attention::FeatureKind::kPositive;
  return true;
}

int64_t LearnedOptimizerModelImpl::fused_step_(torch::Tensor param, const torch::Tensor& grad, torch::Tensor state,
                                               int64_t t, double lr) {
  TORCH_CHECK(fused_supported(), "LearnedOptimizerModel: this configuration has no fused path");
  TORCH_CHECK(param.scalar_type() == at::kFloat && param.is_contiguous() && param.dim() == 1,
              "fused_step_: param must be a contiguous float32 vector, got ", param.sizes(), " ",
              param.scalar_type());
  TORCH_CHECK(state.scalar_type() == at::kFloat && state.is_contiguous() && state.size(0) == param.size(0) &&
                  state.size(1) == state_size(),
              "fused_step_: state must be contiguous float32 (", param.size(0), ", ", state_size(), "), got ",
              state.sizes());
  torch::NoGradGuard no_grad;
  const auto g_all = contiguous_float(grad.reshape({-1}));
  const int64_t n = param.size(0);
  const Memory memory = options.memory();
  const int64_t dk = options.key_dim(), dv = options.value_dim(), m = options.features();
  const int64_t hidden = options.hidden(), memory_floats = memory_size(), reads = read_size();
  const int64_t inputs = kFeatures + reads;

  // Weights as contiguous float32 (a few hundred floats: copied once per step).
  const auto w_in = contiguous_float(head_in->weight), b_in = contiguous_float(head_in->bias);
  const auto w_out = contiguous_float(head_out->weight), b_out = contiguous_float(head_out->bias);
  torch::Tensor wq, bq, wk, bk, wv, bv, proj, lstm_ih, lstm_hh, lstm_b;
  std::vector<float> rpe_q_logits(m, 0.0f), rpe_k_logits(m, 0.0f);  // w_i[:2r] . N1(t), w_i[:2r] . N2(t)
  float rpe_q_norm = 0.0f, rpe_k_norm = 0.0f;                       // |N1|^2 / 2, |N2|^2 / 2
  int64_t rpe_width = 0;
  float gamma = 0.0f;
  if (memory == Memory::kFLT || memory == Memory::kPerformer) {
    wq = contiguous_float(query->weight), bq = contiguous_float(query->bias);
    wk = contiguous_float(key->weight), bk = contiguous_float(key->bias);
    wv = contiguous_float(value->weight), bv = contiguous_float(value->bias);
    gamma = sigmoid(discount_logit.item<float>());
    if (memory == Memory::kFLT) {
      proj = contiguous_float(flt->feature_map->projection);  // (m, 2r + Dk)
      const auto position = torch::full({1, 1, 1}, static_cast<double>(t), torch::kFloat);
      const auto [n1, n2] = flt->rpe_features(position);
      const auto q_rpe = contiguous_float(n1.reshape({-1})), k_rpe = contiguous_float(n2.reshape({-1}));
      rpe_width = q_rpe.numel();
      const float* pw = proj.data_ptr<float>();
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t c = 0; c < rpe_width; ++c) {
          rpe_q_logits[i] += pw[i * proj.size(1) + c] * q_rpe.data_ptr<float>()[c];
          rpe_k_logits[i] += pw[i * proj.size(1) + c] * k_rpe.data_ptr<float>()[c];
        }
      }
      rpe_q_norm = 0.5f * q_rpe.pow(2).sum().item<float>();
      rpe_k_norm = 0.5f * k_rpe.pow(2).sum().item<float>();
    } else {
      proj = contiguous_float(feature_map->projection);  // (m, Dk)
    }
  } else if (memory == Memory::kLSTM) {
    lstm_ih = contiguous_float(lstm->weight_ih), lstm_hh = contiguous_float(lstm->weight_hh);
    lstm_b = contiguous_float(lstm->bias_ih + lstm->bias_hh);
  }
  const float td = static_cast<float>(t);
  const float c1 = 1.0f / (1.0f - std::pow(kBeta1, td)), c2 = 1.0f / (1.0f - std::pow(kBeta2, td));
  const float cv = 1.0f / (1.0f - std::pow(kBetaV, td));
  const float quarter = std::pow(static_cast<float>(dk), -0.25f);
  const float inv_sqrt_m = 1.0f / std::sqrt(static_cast<float>(m));
  const float step_scale = static_cast<float>(options.step_scale());
  const float flr = static_cast<float>(lr);
  float* p_ptr = param.data_ptr<float>();
  float* s_ptr = state.data_ptr<float>();
  const float* g_ptr = g_all.data_ptr<float>();
  const int64_t stride = state.size(1);
  std::atomic<int64_t> skipped{0};

  at::parallel_for(0, n, 2048, [&](int64_t begin, int64_t end) {
    std::array<float, kMaxWidth> x{}, q{}, k{}, v{}, phi_q{}, phi_k{}, read{}, h{}, gates{};
    std::array<float, 2 * kMaxWidth> in{};
    int64_t local_skipped = 0;
    for (int64_t i = begin; i < end; ++i) {
      float* s = s_ptr + i * stride;
      const float graw = g_ptr[i];
      if (!std::isfinite(graw)) {
        ++local_skipped;
        continue;
      }
      const float g = clip(graw, kMaxGradient);
      const float m1 = kBeta1 * s[0] + (1 - kBeta1) * g;
      const float m2 = kBeta2 * s[1] + (1 - kBeta2) * g;
      const float vv = kBetaV * s[2] + (1 - kBetaV) * g * g;
      const float m1h = m1 * c1, m2h = m2 * c2;
      const float rms = std::sqrt(vv * cv + 1e-30f);
      const float adam_direction = clip(m1h / rms, kRatioClip);
      x[0] = clip(g / rms, kRatioClip);
      x[1] = adam_direction;
      x[2] = clip(m2h / rms, kRatioClip);
      log_sign(g, &x[3]);
      log_sign(m1h, &x[5]);
      float rms_code[2];
      log_sign(rms, rms_code);
      x[7] = rms_code[0];
      log_sign(p_ptr[i], &x[8]);
      float* mem = s + kMoments;
      std::array<float, 3 * kMaxWidth> new_memory{};
      if (memory == Memory::kFLT || memory == Memory::kPerformer) {
        affine(wq.data_ptr<float>(), bq.data_ptr<float>(), x.data(), dk, kFeatures, q.data());
        affine(wk.data_ptr<float>(), bk.data_ptr<float>(), x.data(), dk, kFeatures, k.data());
        affine(wv.data_ptr<float>(), bv.data_ptr<float>(), x.data(), dv, kFeatures, v.data());
        float q_norm = rpe_q_norm, k_norm = rpe_k_norm;
        for (int64_t d = 0; d < dk; ++d) {
          q[d] = std::tanh(q[d]) * quarter;
          k[d] = std::tanh(k[d]) * quarter;
          q_norm += 0.5f * q[d] * q[d];
          k_norm += 0.5f * k[d] * k[d];
        }
        const float* pw = proj.data_ptr<float>();
        const int64_t cols = proj.size(1);
        float shift = -INFINITY;
        for (int64_t f = 0; f < m; ++f) {
          float lq = rpe_q_logits[f] - q_norm, lk = rpe_k_logits[f] - k_norm;
          for (int64_t d = 0; d < dk; ++d) {
            lq += pw[f * cols + rpe_width + d] * q[d];
            lk += pw[f * cols + rpe_width + d] * k[d];
          }
          phi_q[f] = lq;
          phi_k[f] = std::exp(lk) * inv_sqrt_m;  // unshifted keys (bounded inputs)
          shift = std::max(shift, lq);
        }
        float denominator = 0.0f;
        for (int64_t e = 0; e < dv; ++e) read[e] = 0.0f;
        for (int64_t f = 0; f < m; ++f) {
          phi_q[f] = std::exp(phi_q[f] - shift) * inv_sqrt_m;  // per-token shift, as query_features
          const float z = gamma * mem[m * dv + f] + phi_k[f];
          new_memory[m * dv + f] = z;
          denominator += phi_q[f] * z;
          for (int64_t e = 0; e < dv; ++e) {
            const float sv = gamma * mem[f * dv + e] + phi_k[f] * v[e];
            new_memory[f * dv + e] = sv;
            read[e] += phi_q[f] * sv;
          }
        }
        const float inv = 1.0f / std::max(denominator, 1e-20f);
        for (int64_t e = 0; e < dv; ++e) read[e] *= inv;
      } else if (memory == Memory::kLSTM) {
        // Gates i, f, g, o (LibTorch's order) from x and the previous h.
        affine(lstm_ih.data_ptr<float>(), lstm_b.data_ptr<float>(), x.data(), 4 * dk, kFeatures, gates.data());
        const float* whh = lstm_hh.data_ptr<float>();
        for (int64_t r = 0; r < 4 * dk; ++r) {
          for (int64_t c = 0; c < dk; ++c) gates[r] += whh[r * dk + c] * mem[c];
        }
        for (int64_t d = 0; d < dk; ++d) {
          const float ig = sigmoid(gates[d]), fg = sigmoid(gates[dk + d]);
          const float gg = std::tanh(gates[2 * dk + d]), og = sigmoid(gates[3 * dk + d]);
          const float c = fg * mem[dk + d] + ig * gg;
          const float hh = og * std::tanh(c);
          new_memory[d] = hh;
          new_memory[dk + d] = c;
          read[d] = hh;
        }
      }
      for (int64_t f = 0; f < kFeatures; ++f) in[f] = x[f];
      for (int64_t e = 0; e < reads; ++e) in[kFeatures + e] = read[e];
      affine(w_in.data_ptr<float>(), b_in.data_ptr<float>(), in.data(), hidden, inputs, h.data());
      for (int64_t j = 0; j < hidden; ++j) h[j] = std::tanh(h[j]);
      float out[2];
      affine(w_out.data_ptr<float>(), b_out.data_ptr<float>(), h.data(), 2, hidden, out);
      const float update = -step_scale * (adam_direction + out[0]) * std::exp(clip(out[1], kMaxLogMagnitude));
      if (!std::isfinite(update)) {
        ++local_skipped;
        continue;
      }
      p_ptr[i] += flr * update;
      s[0] = m1;
      s[1] = m2;
      s[2] = vv;
      for (int64_t j = 0; j < memory_floats; ++j) mem[j] = new_memory[j];
    }
    skipped += local_skipped;
  });
  return skipped.load();
}

}  // namespace flt::optim
