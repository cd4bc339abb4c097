#pragma once
// The one random-feature map of the library: FAVOR+ positive features (Choromanski et al. 2021),
// its hyperbolic variant, trigonometric RFF, elu + 1, ReLU features and a learnable map. Performer,
// FLT and the learned optimizer's memory cell all build their features here.
//
// Softmax-kernel maps (positive, hyperbolic, trigonometric) estimate exp(x . y):
//   positive     phi(x) = m^{-1/2} exp(W x - |x|^2 / 2 - c)                          (M = m)
//   hyperbolic   phi(x) = (2m)^{-1/2} [exp(W x - |x|^2/2 - c), exp(-W x - |x|^2/2 - c)]  (M = 2m)
//   trigonometric phi(x) = m^{-1/2} exp(|x|^2 / 2 - c) [cos W x, sin W x]            (M = 2m,
//   signed)
// The caller scales its inputs (Performer passes q D^{-1/4}). The shift c cancels in the attention
// ratio only when it is the same for every key of a query, so:
//   - queries: c is the token's own largest log-feature (cancels between numerator and
//     denominator); |x|^2/2 then cancels too: phi(x) = m^{-1/2} exp(W x - max_i w_i . x);
//   - keys, non-causal: c is the largest log-feature over all keys of the sequence;
//   - keys, causal or streaming: c = max_i (w_i . k_0 - |k_0|^2/2) from the FIRST key only (it is
//   in
//     every query's past). A max over the whole sequence would make causal outputs depend on future
//     tokens (performer-pytorch takes that max). A later key whose largest log-feature exceeds c by
//     more than 70 is saturated there (all its features scaled down by one factor); for FAVOR+
//     inputs x D^{-1/4} of comparable norms the spread is a few tens at most.
// Numerics: the exponent of feature i of token j is formed as (P_ij - max_i P_ij) + (level_j - c),
// P = W x (or [W x, -W x]), level_j = max_i P_ij - |x_j|^2/2 the token's largest log-feature, kept
// in double. The first term is finite or -inf for any finite input, the second is a per-token
// scalar, so huge inputs give features (mostly 0, the largest e^0) instead of inf - inf = NaN
// (|x|^2/2 overflowed float at |x| ~ 2^64). Limits: W x itself must be finite (|x| below ~1e37 in
// float), and beyond |x| ~ 1e154 (double inputs) levels saturate at double's finite extremes.
// W: rows drawn as blocks of orthogonal Gaussian directions, each row rescaled to the norm of an
// independent Gaussian vector (chi_D norms), stored as a buffer and redrawn only by `redraw(seed)`.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/types.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace flt::attention {

/// Default floor of the normaliser of the FAVOR+ variants (Performer, FLT; options and functional
/// forms), relative (`favor_floor`): the shifted features keep the normaliser far above it unless
/// it underflows.
constexpr double kFavorEps = 1e-30;

/// The normaliser floor of the FAVOR+ variants (Performer and FLT: forward, materialize and
/// streaming read), per query i: eps * max(1, max_m phi_q_im * mass_i), where mass_i = sum_m z_im
/// is the feature mass of the keys query i sees (z_i = sum_{j visible} phi_k_j). For positive
/// features the normaliser phi_q_i . z_i is at most max_m phi_q_im * mass_i (Hoelder), so the floor
/// is eps relative to the largest value it can take. An absolute floor let a causal query whose
/// features miss those of the keys (their shift is the first key's, and a later key reaches e^70)
/// divide by about eps: its output stayed finite, but d out / d phi_q, about e^70 / eps, overflowed
/// float and turned the gradients of q into inf and NaN (|q|, |k| of 1e2 and more). Relative to the
/// mass, d out / d phi_q_im <= |g| (|v| + |out|) / (eps max_m phi_q_im), whatever the shifts.
/// Signed (trigonometric) features whose mass cancels keep eps. No gradient (a guard, like the
/// shifts). Ordinary inputs never reach it: their outputs are those of the absolute floor.
/// phi_q: (B, H, Lq, M)  key_mass: broadcastable to (B, H, Lq, 1) -> (B, H, Lq, 1)
torch::Tensor favor_floor(const torch::Tensor& phi_q, const torch::Tensor& key_mass, double eps);
/// The key mass of `favor_floor` for a batch of keys: sum_m phi_k_jm summed over the keys each
/// query sees (a streaming state's is its normaliser summed over m).
/// phi_k: (B, H, Lk, M) -> (B, H, Lk, 1) causal (prefix sums), else (B, H, 1, 1)
torch::Tensor favor_key_mass(const torch::Tensor& phi_k, bool causal);

enum class FeatureKind {
  kPositive,       ///< FAVOR+ exp(Wx - |x|^2/2) (default)
  kHyperbolic,     ///< FAVOR+ with [exp(Wx), exp(-Wx)]: lower variance, 2m features
  kTrigonometric,  ///< Rahimi-Recht [cos Wx, sin Wx] for the softmax kernel: signed features
  kElu,            ///< elu(x) + 1 (linear attention; no projection, M = input dim)
  kRelu,           ///< m^{-1/2} relu(W x) (Performer's generalised ReLU kernel)
  kLearnable,      ///< elu(W x) + 1 with W a trainable parameter (initialised like FAVOR+)
};

/// "positive", "hyperbolic", "trigonometric", "elu", "relu", "learnable".
std::string feature_kind_name(FeatureKind kind);
/// Inverse of `feature_kind_name`; throws naming the unknown name.
FeatureKind feature_kind_from_name(const std::string& name);
/// The feature kinds attention may normalise by: all but kTrigonometric, whose signed estimate of
/// the softmax normaliser reaches 0 and below, so that attention on it diverged in the first steps
/// of training (the reason FAVOR+ has positive features). Throws naming `fn` and the kind.
void check_attention_feature_kind(const char* fn, FeatureKind kind);

/// Draws m rows of dimension `dim`: blocks of `dim` orthogonal directions (QR of a Gaussian block),
/// each row rescaled to the norm of an independent N(0, I_dim) vector, so rows are marginally
/// N(0, I) but orthogonal within a block. Deterministic in `seed`. -> (m, dim) double
torch::Tensor orthogonal_gaussian_rows(int64_t m, int64_t dim, uint64_t seed,
                                       bool orthogonal = true);

/// The input of a feature map: one tensor, or blocks that are its column blocks in order (the map
/// then never builds the concatenation; FLT passes [N1, q D^{-1/4}] this way, and its position
/// block of batch 1 is projected once for the whole batch). Blocks broadcast against each other
/// except in the last dimension. x: (..., L, Din) or blocks (..., L, Din_b) with sum_b Din_b = Din
struct FeatureInput {
  FeatureInput(const torch::Tensor& x) : blocks{x} {}  // NOLINT: implicit on purpose
  FeatureInput(std::initializer_list<torch::Tensor> parts) : blocks(parts) {}
  std::vector<torch::Tensor> blocks;
  /// Optional column scales, one per block (none, or an undefined tensor: 1). Block b enters the
  /// map as blocks[b] * scales[b], with the scale broadcast over the tokens: (..., 1, Din_b). A
  /// scale is folded into the projection's columns, so the scaled block is never built. FLT's
  /// position blocks N1 = [cos, sin] |a| sgn(a) and N2 = [cos, sin] |a| share one [cos, sin]
  /// tensor this way.
  std::vector<torch::Tensor> scales;
  /// Block b with its scale applied (a new tensor when it has one). -> (..., L, Din_b)
  torch::Tensor scaled(size_t b) const;
  /// Block b's scale, or an undefined tensor.
  torch::Tensor scale(size_t b) const { return b < scales.size() ? scales[b] : torch::Tensor(); }
  /// Each block's first token (dim -2), with the same scales: the input of `causal_key_shift`.
  /// -> (..., 1, Din_b)
  FeatureInput first_token() const { return rows(0, 1); }
  /// Tokens start .. start + length of every block (dim -2), with the same scales.
  /// -> (..., length, Din_b)
  FeatureInput rows(int64_t start, int64_t length) const;
  /// Tokens L (dim -2 of the blocks).
  int64_t length() const;
  /// The concatenated input (broadcast, then cat). -> (..., L, Din)
  torch::Tensor concatenated() const;
};

struct FeatureMapOptions {
  FeatureMapOptions(int64_t input_dim, int64_t features)
      : input_dim_(input_dim), features_(features) {}
  /// Dimension of the (already scaled) input vectors.
  TORCH_ARG(int64_t, input_dim);
  /// Random features m (the output has m or 2m columns, see `output_dim`).
  TORCH_ARG(int64_t, features);
  /// Which map (default FAVOR+ positive).
  TORCH_ARG(FeatureKind, kind) = FeatureKind::kPositive;
  /// Orthogonal blocks (true, default) or i.i.d. Gaussian rows.
  TORCH_ARG(bool, orthogonal) = true;
  /// Seed of the first draw; `redraw(seed)` draws again.
  TORCH_ARG(uint64_t, seed) = 0;
};

class FeatureMapImpl : public torch::nn::Cloneable<FeatureMapImpl> {
 public:
  explicit FeatureMapImpl(FeatureMapOptions options);
  /// A map over a given W (not drawn, not registered: for evaluating features, as the fused
  /// backward of `favor_attention` does with the W it saved). projection: (m, Din), undefined for
  /// kElu
  FeatureMapImpl(FeatureMapOptions options, torch::Tensor projection);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// Draws W again from `seed` (in place: the buffer keeps its identity, dtype and device).
  void redraw(uint64_t seed);

  /// Columns of the features: m, 2m (hyperbolic, trigonometric) or input_dim (elu).
  int64_t output_dim() const;
  /// True for maps whose features are all >= 0 (the normaliser is then positive).
  bool positive() const;

  /// Query features with the per-token shift. x: (..., L, Din) -> (..., L, M)
  torch::Tensor query_features(const FeatureInput& x) const;
  /// Key features with the sequence shift chosen for `causal` (see the file comment).
  /// x: (..., L, Din) -> (..., L, M)
  torch::Tensor key_features(const FeatureInput& x, bool causal) const;
  /// Key features with an explicit shift (streaming and RNN-style use, one step at a time).
  /// x: (..., L, Din)  shift: broadcastable to (..., 1, 1) -> (..., L, M)
  torch::Tensor key_features(const FeatureInput& x, const torch::Tensor& shift) const;
  /// The causal-safe key shift computed from the first key alone (zeros for maps without shifts).
  /// first_key: (..., 1, Din) -> (..., 1, 1)
  torch::Tensor causal_key_shift(const FeatureInput& first_key) const;

  /// Non-causal key features of one block of a sequence's keys, shifted by the block's own largest
  /// log-feature instead of the sequence's; that shift goes to `shift` ((..., 1, 1) double;
  /// undefined for maps without shifts). The sequence's key features are each block's times
  /// exp(shift_block - max over blocks of shift_block): a caller that sums over keys in blocks
  /// rescales its sums by that factor. x: (..., L, Din) -> (..., L, M)
  torch::Tensor block_key_features(const FeatureInput& x, torch::Tensor& shift) const;

  /// Features without any shift: phi(x).phi(y) estimates exp(x.y) for the softmax-kernel maps.
  /// x: (..., L, Din) -> (..., L, M)
  torch::Tensor unshifted_features(const FeatureInput& x) const;

  FeatureMapOptions options;
  torch::Tensor
      projection;  ///< W: (m, Din) buffer (a parameter for kLearnable); undefined for kElu
};
TORCH_MODULE(FeatureMap);

/// Rows of features a CPU call of `favor_attention` holds at once (its blocked forward, and the
/// fused backward), as bytes of one block of query or key features (B H rows M columns each; at
/// least 64 rows).
constexpr int64_t kFavorBlockBytes = int64_t{2} << 20;

/// FAVOR+ attention, the forward of Performer and FLT: query features with their per-token shift,
/// key features with the shift for `causal` (see the file comment), then
/// `kernels::normalized_linear_attention` with `favor_floor`. On the CPU it runs over blocks of
/// `kFavorBlockBytes` of tokens and never holds more features than one block: features the size
/// of (B, H, L, M) went through malloc's mmap on every call and were faulted in page by page
/// (docs/benchmarks.md). Causal blocks carry the scan state and the key mass, addition for
/// addition as one pass. Non-causal keys are summed block by block, each block shifted by its own
/// largest log-feature and the sums rescaled to the running one (the shift cancels in the ratio;
/// equal to one pass up to rounding, exactly so when the keys fit one block).
/// With autograd recording (any input, scale or W requiring grad), a
/// CPU float or double call is one autograd function that keeps only its inputs, W, the keys' shift
/// and (non-causal) the keys' summary S = sum_j phi_k_j [v_j, 1]^T and mass (M (Dv + 1) + 2
/// numbers a head): its forward is the blocked one, and its backward recomputes the features
/// block by block and takes their gradients to the inputs (scales too: FLT's spectrum)
/// through the feature map's own formula. Causal backward passes run the scans of
/// `kernels::linear_attention_numerator`'s backward block by block with carried states (forward
/// for the queries, reverse for keys and values) and keep dL/d[numerator, denominator], the size
/// of v. A W that requires grad (kLearnable), other devices and dtypes, and the tests' composite
/// guard take the calls above on whole tensors (autograd then keeps the features of the whole
/// sequence); so does a backward with create_graph (double backward), from the saved inputs. q:
/// (..., Lq, Din) blocks  k: (..., Lk, Din) blocks  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
torch::Tensor favor_attention(const FeatureMapImpl& map, FeatureInput q, FeatureInput k,
                              const torch::Tensor& v, bool causal, double eps);

/// Streaming causal linear attention: the state (S, z) of `append`ed keys and values, `read` by
/// queries. Its outputs equal the batch causal outputs token by token. For RNN-style use (one step
/// at a time, one state per coordinate), put the coordinates in B. Works for any feature map: the
/// caller gives features (`FeatureMap::key_features(k, shift)` with `causal_key_shift` of the first
/// key keeps the same shift as the batch causal path).
struct LinearAttentionState {
  torch::Tensor numerator;   ///< S = sum_j phi_k_j v_j^T: (B, H, M, Dv)
  torch::Tensor normaliser;  ///< z = sum_j phi_k_j: (B, H, M, 1)
  torch::Tensor key_shift;   ///< the shift fixed by the first key: (B, H, 1, 1) double
  int64_t steps = 0;         ///< tokens appended so far

  bool empty() const { return steps == 0; }
  /// phi_k: (B, H, T, M)  v: (B, H, T, Dv): adds the T tokens (all of them visible to later reads).
  void append(const torch::Tensor& phi_k, const torch::Tensor& v);
  /// phi_q: (B, H, T, M) -> (B, H, T, Dv): phi_q S / max(phi_q z, eps) over everything appended.
  torch::Tensor read(const torch::Tensor& phi_q, double eps) const;
  /// The same with a floor per query (`favor_floor`). floor: broadcastable to (B, H, T, 1)
  torch::Tensor read(const torch::Tensor& phi_q, const torch::Tensor& floor) const;
  /// S <- factor S, z <- factor z (e.g. e^{-tau} before each append, for a forgetting memory).
  /// factor: a scalar or broadcastable to (B, H, 1, 1)
  void decay(const torch::Tensor& factor);

  /// Throws, naming `fn` and both shapes, unless tokens k: (B, H, T, *) and v: (B, H, T, Dv) fit
  /// what the state holds (B, H, Dv, dtype, device; anything fits an empty state). Callers check
  /// before computing features, so a rejected call leaves the state as it was.
  void check_tokens(const char* fn, const torch::Tensor& k, const torch::Tensor& v) const;
  /// Throws, naming `fn` and both shapes, unless queries q: (B, H, T, *) can read the state
  /// (something appended; same B, H, dtype, device).
  void check_queries(const char* fn, const torch::Tensor& q) const;

 private:
  void check_read(const torch::Tensor& phi_q) const;
};

}  // namespace flt::attention
