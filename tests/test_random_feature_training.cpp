// Behaviour: SequenceClassifiers with Performer, FLT and SchoenbAt attention learn position tasks
// within fixed step budgets; without absolute position embeddings, FLT with a local RPE learns a
// relative-position task that Performer without RPE cannot (it sees a bag of tokens).
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>

#include <cstdio>

#include "flt/attention/transformer.h"
#include "test_util.h"

namespace fa = flt::attention;

namespace {

class RandomFeatureTraining : public flt::testing::SeededTest {};

constexpr int64_t kLength = 8;
constexpr int64_t kAbsoluteSteps = 150;

struct Batch {
  torch::Tensor tokens;  // (B, L) int64
  torch::Tensor labels;  // (B) int64
};

// Absolute task: is the token at position 3 equal to the first one? Balanced classes, vocab 6.
Batch first_token_task(int64_t batch) {
  auto tokens = torch::randint(0, 6, {batch, kLength}, torch::kLong);
  const auto labels = torch::randint(0, 2, {batch}, torch::kLong);
  const auto first = tokens.select(1, 0);
  // Positive: copy the first token; negative: any other token.
  const auto other = (first + torch::randint(1, 6, {batch}, torch::kLong)) % 6;
  tokens.select(1, 3).copy_(torch::where(labels.to(torch::kBool), first, other));
  return {tokens, labels};
}

// Relative task: tokens A = 0 and B = 1 appear once each among 6 distinct other tokens (2..15),
// next to each other (label 1) or at distance >= 3 (label 0). Both classes have the same token
// multiset distribution, so a model without positional information is at chance by construction.
Batch adjacent_pair_task(int64_t batch) {
  auto tokens = torch::empty({batch, kLength}, torch::kLong);
  auto labels = torch::randint(0, 2, {batch}, torch::kLong);
  auto t = tokens.accessor<int64_t, 2>();
  auto y = labels.accessor<int64_t, 1>();
  for (int64_t b = 0; b < batch; ++b) {
    const auto fillers = torch::randperm(14, torch::kLong) + 2;
    int64_t a = 0, c = 0;
    do {
      a = torch::randint(0, kLength, {1}, torch::kLong).item<int64_t>();
      c = torch::randint(0, kLength, {1}, torch::kLong).item<int64_t>();
    } while (a == c || (y[b] == 1 ? std::abs(a - c) != 1 : std::abs(a - c) < 3));
    for (int64_t i = 0, f = 0; i < kLength; ++i)
      t[b][i] = i == a ? 0 : (i == c ? 1 : fillers[f++].item<int64_t>());
  }
  return {tokens, labels};
}

// Trains with Adam for `steps` batches of 64 and returns held-out accuracy on 1024 sequences.
double train_and_evaluate(const fa::AttentionOptions& attention, bool absolute_positions,
                          Batch (*task)(int64_t), int64_t steps, double lr) {
  torch::manual_seed(7);
  fa::SequenceClassifier model(fa::TransformerOptions(16, 32, 2, 2)
                                   .max_length(absolute_positions ? kLength : 0)
                                   .ff_dim(64)
                                   .attention(attention)
                                   .classes(2));
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(lr));
  for (int64_t step = 0; step < steps; ++step) {
    const auto batch = task(64);
    optimizer.zero_grad();
    const auto loss = torch::nn::functional::cross_entropy(model(batch.tokens), batch.labels);
    loss.backward();
    optimizer.step();
  }
  torch::NoGradGuard no_grad;
  const auto test = task(1024);
  return (model(test.tokens).argmax(-1) == test.labels).to(torch::kDouble).mean().item<double>();
}

fa::FLTAttentionOptions local_flt() {
  // Triangle-shaped local RPE (k = 2, radii 1 and 2 tokens), Cauchy proposal (finite variance).
  return fa::FLTAttentionOptions()
      .features(32)
      .rpe_features(32)
      .family(fa::SpectrumFamily::kLocal)
      .smoothness(2)
      .rpe_scale(1.0)
      .proposal(fa::ProposalKind::kCauchy)
      .proposal_sigma(0.5);
}

}  // namespace

// Budget: kAbsoluteSteps = 150 Adam steps of 64 sequences, lr 3e-3, 2 layers, width 32, 2 heads, m
// = 32 (r = 32).
TEST_F(RandomFeatureTraining, EachVariantLearnsAbsolutePositionTask) {
  const std::vector<std::pair<const char*, fa::AttentionOptions>> variants = {
      {"performer", fa::PerformerAttentionOptions().features(32)},
      {"flt", local_flt()},
      {"schoenbat", fa::SchoenbAttentionOptions().features(32)},
  };
  for (const auto& [name, options] : variants) {
    const double accuracy = train_and_evaluate(options, /*absolute_positions=*/true,
                                               first_token_task, kAbsoluteSteps, 3e-3);
    std::printf("first-token task, %s with absolute positions: accuracy %.3f after %d steps\n",
                name, accuracy, static_cast<int>(kAbsoluteSteps));
    EXPECT_GT(accuracy, 0.9) << name;
  }
}

// 400 steps, otherwise the same model, no absolute position embeddings: FLT's local RPE sees
// relative positions and must learn the task. Chance is 0.5 by the task's construction (balanced
// labels, the same token multiset in both classes): a model without positional information (a
// Performer, measured 0.500) cannot beat it, so it is no baseline worth training here. On 1024
// test sequences an accuracy at chance stays below 0.5 + 5 sqrt(0.25 / 1024) = 0.58 (5 sd); FLT
// reaches 1.000 (seed 7); 0.8 sits between the two.
TEST_F(RandomFeatureTraining, LocalRpeLearnsAdjacentPairsWithoutPositions) {
  const double flt = train_and_evaluate(local_flt(), false, adjacent_pair_task, 400, 3e-3);
  std::printf("adjacent-pair task without absolute positions: FLT local RPE %.3f\n", flt);
  EXPECT_GT(flt, 0.8);
}
