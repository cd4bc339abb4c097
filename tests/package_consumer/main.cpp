// Uses the installed library the way the README shows.
#include <flt/flt.h>

#include <iostream>

int main() {
  flt::init(/*quiet=*/true);
  namespace fa = flt::attention;
  fa::MultiheadAttention mha(fa::MultiheadAttentionOptions(32, 4).attention(fa::LinearAttentionOptions()));
  const auto y = mha(torch::randn({2, 10, 32}));
  if (y.sizes() != torch::IntArrayRef({2, 10, 32}) || !y.isfinite().all().item<bool>()) {
    std::cerr << "unexpected output " << y.sizes() << "\n";
    return 1;
  }
  std::cout << "flt " << flt::version() << " consumer ok: " << y.sizes() << "\n";
  return 0;
}
