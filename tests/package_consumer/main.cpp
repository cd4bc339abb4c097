// Uses the installed library the way the README shows (keep the two in step).
#include <flt/flt.h>
#include <torch/nn/functional/loss.h>

#include <iostream>

int main() {
  flt::init(/*quiet=*/true);
  namespace fa = flt::attention;
  fa::TransformerLM lm(
      fa::TransformerOptions(/*vocab=*/256, /*embed=*/128, /*heads=*/4, /*layers=*/2)
          .attention(fa::FLTAttentionOptions().features(64).rpe_features(32)));
  flt::optim::Mnemosyne opt(lm->parameters());
  auto tokens = torch::randint(0, 256, {8, 65}, torch::kLong);
  auto logits = lm(tokens.narrow(1, 0, 64));
  auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 256}),
                                                   tokens.narrow(1, 1, 64).reshape(-1));
  opt.zero_grad();
  loss.backward();
  opt.step();
  if (logits.sizes() != torch::IntArrayRef({8, 64, 256}) || !std::isfinite(loss.item<double>())) {
    std::cerr << "unexpected output " << logits.sizes() << ", loss " << loss.item<double>() << "\n";
    return 1;
  }
  std::cout << "flt " << flt::version() << " consumer ok: logits " << logits.sizes() << ", loss "
            << loss.item<double>() << "\n";
  return 0;
}
