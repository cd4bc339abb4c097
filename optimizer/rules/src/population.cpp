#include "flt/optim/population.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace flt::optim {

SearchBox SearchBox::cube(int64_t n, double lower, double upper) {
  TORCH_CHECK(n >= 1, "SearchBox::cube: dimension must be >= 1, got ", n);
  SearchBox box{torch::full({n}, lower, torch::kDouble), torch::full({n}, upper, torch::kDouble)};
  box.check("SearchBox::cube");
  return box;
}

SearchBox SearchBox::around(const torch::Tensor& x0, double radius) {
  TORCH_CHECK(x0.defined() && x0.dim() == 1 && x0.size(0) >= 1,
              "SearchBox::around: x0 must have shape (n), got ",
              x0.defined() ? x0.sizes() : at::IntArrayRef{});
  TORCH_CHECK(std::isfinite(radius) && radius > 0,
              "SearchBox::around: radius must be positive and finite, got ", radius);
  const auto center = x0.to(torch::kDouble);
  SearchBox box{center - radius, center + radius};
  box.check("SearchBox::around");
  return box;
}

void SearchBox::check(const char* fn) const {
  TORCH_CHECK(lower.defined() && upper.defined() && lower.dim() == 1 &&
                  lower.sizes() == upper.sizes() && lower.size(0) >= 1,
              fn, ": the box needs lower and upper of one shape (n), got ",
              lower.defined() ? lower.sizes() : at::IntArrayRef{}, " and ",
              upper.defined() ? upper.sizes() : at::IntArrayRef{});
  TORCH_CHECK(lower.isfinite().all().item<bool>() && upper.isfinite().all().item<bool>(), fn,
              ": the box must be finite, got lower ", lower, " upper ", upper);
  const auto bad = (upper <= lower).nonzero();
  TORCH_CHECK(bad.size(0) == 0, fn,
              ": the box needs lower < upper in every coordinate; coordinate ",
              bad.size(0) ? bad[0].item<int64_t>() : 0, " has lower ",
              bad.size(0) ? lower[bad[0].item<int64_t>()].item<double>() : 0.0, " upper ",
              bad.size(0) ? upper[bad[0].item<int64_t>()].item<double>() : 0.0);
}

void PopulationSearch::record(const torch::Tensor& x, const torch::Tensor& values) {
  const auto finite = values.isfinite();
  if (!finite.any().item<bool>()) return;
  const auto masked = torch::where(finite, values, torch::full_like(values, INFINITY));
  const int64_t i = masked.argmin().item<int64_t>();
  const double v = masked[i].item<double>();
  if (!best_x_.defined() || v < best_value_) {
    best_value_ = v;
    best_x_ = x[i].clone();
  }
}

torch::Tensor PopulationSearch::finite_or_worst(const torch::Tensor& values) {
  const auto finite = values.isfinite();
  if (!finite.any().item<bool>()) return torch::full_like(values, 1e300);
  const double worst =
      torch::where(finite, values, torch::full_like(values, -INFINITY)).max().item<double>();
  return torch::where(finite, values, torch::full_like(values, worst + 1.0 + std::abs(worst)));
}

void PopulationSearch::check_tell(const torch::Tensor& values, const torch::Tensor& gradients,
                                  int64_t points, int64_t dims) const {
  TORCH_CHECK(values.defined() && values.dim() == 1 && values.size(0) == points, name(),
              "::tell: expected values of shape (", points,
              ") for the points of the last ask, got ",
              values.defined() ? values.sizes() : at::IntArrayRef{});
  if (gradients.defined()) {
    TORCH_CHECK(gradients.dim() == 2 && gradients.size(0) == points && gradients.size(1) == dims,
                name(), "::tell: expected gradients of shape (", points, ", ", dims, "), got ",
                gradients.sizes());
  }
  TORCH_CHECK(!needs_gradients() || gradients.defined(), name(),
              "::tell: this searcher needs the gradients of the objective");
}

SearchResult run_search(PopulationSearch& search, const BatchObjective& f, const SearchBox& box,
                        int64_t budget) {
  TORCH_CHECK(budget >= 1, "run_search: budget must be >= 1 evaluation, got ", budget);
  TORCH_CHECK(static_cast<bool>(f), "run_search: the objective is empty");
  box.check("run_search");
  search.set_budget(budget);
  search.reset(box);
  SearchResult result;
  bool seen_finite = false;
  while (result.evaluations < budget) {
    const auto points = search.ask();
    const int64_t p = points.size(0);
    const int64_t take = std::min(p, budget - result.evaluations);
    auto x = points.narrow(0, 0, take).detach();
    torch::Tensor values, gradients;
    if (search.needs_gradients()) {
      torch::AutoGradMode with_grad(true);  // also under a caller's NoGradGuard
      x = x.clone().requires_grad_(true);
      const auto y = f(x);
      TORCH_CHECK(y.defined() && y.dim() == 1 && y.size(0) == take,
                  "run_search: the objective must map (P, n) to (P); for ", take,
                  " points it returned ", y.defined() ? y.sizes() : at::IntArrayRef{});
      TORCH_CHECK(y.requires_grad(), "run_search: ", search.name(),
                  " needs gradients, but the objective's values do not depend on x through "
                  "autograd");
      gradients = torch::autograd::grad({y.sum()}, {x})[0].detach().to(torch::kDouble);
      gradients = torch::where(gradients.isfinite(), gradients, torch::zeros_like(gradients));
      values = y.detach().to(torch::kDouble);
    } else {
      torch::NoGradGuard no_grad;
      values = f(x);
      TORCH_CHECK(values.defined() && values.dim() == 1 && values.size(0) == take,
                  "run_search: the objective must map (P, n) to (P); for ", take,
                  " points it returned ", values.defined() ? values.sizes() : at::IntArrayRef{});
      values = values.to(torch::kDouble);
    }
    if (!seen_finite) {
      seen_finite = values.isfinite().any().item<bool>();
      TORCH_CHECK(seen_finite, "run_search: the objective returned no finite value for any of the ",
                  take, " first points (first value: ", values[0].item<double>(), ")");
    }
    if (take < p) {  // the budget ends inside this batch: the rest count as never evaluated
      values = torch::cat({values, torch::full({p - take}, NAN, torch::kDouble)});
      if (gradients.defined()) {
        gradients =
            torch::cat({gradients, torch::zeros({p - take, gradients.size(1)}, torch::kDouble)});
      }
    }
    search.tell(values, gradients);
    result.evaluations += take;
    result.best_history.push_back(search.best_value());
    result.evaluation_history.push_back(result.evaluations);
  }
  result.best_x = search.best_x();
  result.best_value = search.best_value();
  return result;
}

}  // namespace flt::optim
