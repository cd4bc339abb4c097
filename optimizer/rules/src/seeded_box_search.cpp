#include "flt/optim/seeded_box_search.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

namespace flt::optim {

void SeededBoxSearch::start(const SearchBox& box, const char* fn) {
  box.check(fn);
  box_ = box;
  generator_ = at::make_generator<at::CPUGeneratorImpl>(seed_);
}

torch::Tensor SeededBoxSearch::uniform(int64_t count) {
  const auto unit = at::rand({count, box_.dims()}, generator_, torch::kDouble);
  return box_.lower + unit * (box_.upper - box_.lower);
}

torch::Tensor SeededBoxSearch::clip(const torch::Tensor& x) const {
  return torch::max(torch::min(x, box_.upper), box_.lower);
}

void SeededBoxSearch::check_count(const char* fn, const char* what, int64_t value, int64_t least) {
  TORCH_CHECK(value >= least, fn, ": ", what, " must be >= ", least, ", got ", value);
}

}  // namespace flt::optim
