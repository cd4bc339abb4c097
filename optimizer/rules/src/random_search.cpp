#include "flt/optim/random_search.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace flt::optim {

RandomSearch::RandomSearch(int64_t batch, uint64_t seed) : SeededBoxSearch(seed), batch_(batch) {
  check_count("RandomSearch", "batch", batch, 1);
}

void RandomSearch::reset(const SearchBox& box) {
  start(box, "RandomSearch::reset");
  best_x_ = torch::Tensor();
  best_value_ = INFINITY;
}

torch::Tensor RandomSearch::ask() {
  asked_ = uniform(batch_);
  return asked_;
}

void RandomSearch::tell(const torch::Tensor& values, const torch::Tensor& gradients) {
  check_tell(values, gradients, batch_, box_.dims());
  record(asked_, values);
}

}  // namespace flt::optim
