// A training loop that links only flt::base (libflt.so): attention and the optimizers, without
// meta-training.
#include <flt/attention.h>
#include <flt/core.h>
#include <flt/optim.h>

#include <iostream>

int main() {
  flt::init(/*quiet=*/true);
  flt::attention::PerformerAttention attention(
      flt::attention::PerformerAttentionOptions().heads(2).head_dim(8).features(16));
  auto q = torch::randn({1, 2, 5, 8}), k = torch::randn({1, 2, 5, 8}),
       v = torch::randn({1, 2, 5, 8});
  auto w = torch::randn({8, 8}, torch::requires_grad());
  flt::optim::Mnemosyne opt({w});
  auto loss = attention(torch::matmul(q, w), k, v).square().mean();
  loss.backward();
  opt.step();
  std::cout << "flt::base consumer ok: loss " << loss.item<double>() << "\n";
  return std::isfinite(loss.item<double>()) ? 0 : 1;
}
